"""Curriculum runs end to end with the embedded tiny model: records, resume after SIGKILL, engineer fallbacks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curriculum.config import PRESETS, RunConfig, Training, preset
from curriculum.reports.report import compare_table, load_run, render_report, write_plots
from curriculum.loop.records import TrainingReport
from curriculum.training.run import Run
from simulator.config import StageConfig
from simulator.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "stages": 2,
    "training.steps": 2,
    "training.prompts_per_step": 2,
    "training.generations": 4,
    "warm_start.steps": 6,
    "warm_start.samples": 64,
    "warm_start.batch_size": 16,
    "validation.samples": 12,
    "evaluation_suite": "train-2agent-quick",
    "cpu_threads": None,  # the one-thread default: steady while other tests share the machine
}


def small_config(tmp_path: Path, name: str, **extra) -> RunConfig:
    return preset("tiny").with_overrides(name=name, output_dir=str(tmp_path), **{**SMALL, **extra})


def _instances(side: int, seed: int, samples: int = 8, wait_ratio: float = 0.5) -> list:
    """Certified 2-agent instances of one map side (hole ratio 0.2), as the trainers' tests feed them."""
    from simulator.generator import generate

    return generate(StageConfig.from_dict({"agents": 2, "samples": samples, "seed": seed, "sizes": {
        side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": wait_ratio}}})).instances


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    config = small_config(tmp_path_factory.mktemp("runs"), "small")
    Run(config, log=lambda message: None).execute()
    return config


def test_run__two_stages_end_to_end_leave_complete_records(finished_run):
    run_dir = finished_run.run_dir
    for name in ("manifest.json", "run.yaml", "metrics.jsonl", "untrained/validation.mlr", "warm_start/model/tokenizer.json",
                 "stage-01/stage.json", "stage-01/decision.json", "stage-01/validation.mlr", "stage-02/model/config.json",
                 "final/table.json"):
        assert (run_dir / name).exists(), name
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["versions"]["trl"] and manifest["seed"] == 0
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["stage"] for line in lines] == [1, 2]
    record = json.loads((run_dir / "stage-02" / "stage.json").read_text())
    assert 0.0 <= record["scores"]["zero_variance_share"] <= 1.0 and record["train"]["step_seconds"] > 0
    # the per-size training signal covers every group trained on and agrees with TRL's own per-step logs
    signal = record["train"]["signal"]["by_size"]
    groups = sum(figures["groups"] for figures in signal.values())
    assert groups == SMALL["training.steps"] * SMALL["training.prompts_per_step"] and set(signal) <= {"3", "4", "5", "6"}
    share = sum(f["groups"] * f["zero_variance_share"] for f in signal.values()) / groups
    reward = sum(f["groups"] * f["reward_mean"] for f in signal.values()) / groups
    assert share == pytest.approx(record["train"]["zero_variance_share"])
    assert reward == pytest.approx(record["train"]["reward_mean"], abs=1e-6)
    context = json.loads((run_dir / "stage-02" / "decision.json").read_text())["context_text"]
    assert "training signal of the stage just trained" in context
    # where the stage's time went: training and validation dominate; the loop around them is small
    from curriculum.loop.records import StageTimings
    from curriculum.training.run import loop_overhead

    timings = record["timings"]
    assert set(timings) == {"instances", "train", "validation", "judging", "records", "engineer"}
    split = json.loads((run_dir / "stage-02" / "summary.json").read_text())["seconds"]
    assert split["generation"] > 0 and split["judging_and_records"] == pytest.approx(timings["judging"])
    assert all(value >= 0 for value in timings.values()) and 0.0 <= loop_overhead(StageTimings(**timings)) < 0.5
    assert "where each stage's time went" in render_report(load_run(run_dir))
    # how far the stage moved the greedy answers, against the previous checkpoint's validation replay
    churn = record["churn"]
    assert churn["episodes"] == SMALL["validation.samples"] and 0.0 <= churn["changed"] <= 1.0
    assert 0 <= churn["gained"] + churn["lost"] <= churn["changed"] * churn["episodes"]
    table = json.loads((run_dir / "final" / "table.json").read_text())
    assert sum(cell["episodes"] for cell in table["cells"].values()) == 80


def test_checkpoints__remember_their_prompt_style_for_later_evaluation(finished_run, tmp_path):
    from policy.policies import make_policy
    from policy.prompts import STYLE_FILE, checkpoint_style

    for part in ("model-init", "warm_start/model", "stage-01/model", "stage-02/model"):
        folder = finished_run.run_dir / part
        assert checkpoint_style(f"hf:{folder}") == finished_run.prompt_style, part
    assert make_policy(f"hf:{finished_run.run_dir / 'stage-02' / 'model'}").style.name == finished_run.prompt_style
    for text in ("not json", '{"prompt_style": "no-such-style"}', "[1]"):
        (tmp_path / STYLE_FILE).write_text(text)
        assert checkpoint_style(f"hf:{tmp_path}") is None, text
    assert checkpoint_style("hf:Qwen/Qwen3-4B") is None and checkpoint_style("openai:gpt-4o") is None


def test_report_and_compare__read_the_run(finished_run, tmp_path):
    run = load_run(finished_run.run_dir)
    text = render_report(run)
    assert "stage" in text and "config trajectory" in text
    plots = write_plots(run, tmp_path)
    assert [p.name for p in plots] == ["rates.png", "mix.png"] and all(p.stat().st_size > 1000 for p in plots)
    assert "small" in compare_table([run, run])


def test_presets__every_preset_has_a_help_line():
    from curriculum.config import PRESET_SUMMARIES

    assert set(PRESET_SUMMARIES) == set(PRESETS)


def test_presets__small_mixed_is_small_with_a_long_warm_start_on_2_and_3_agents():
    # its 3-agent column is a transfer column: the warm start has 3-agent boards, the stages and validation do not
    small, mixed = preset("small").to_dict(), preset("small-mixed").to_dict()
    warm = mixed["warm_start"]
    assert warm["config"]["agents"] == [2, 3] and warm["steps"] == 2000
    assert warm["config"]["sizes"] == small["warm_start"]["config"]["sizes"]
    for document in (small, mixed):
        document.pop("name"), document["warm_start"].pop("config"), document["warm_start"].pop("steps")
    assert mixed == small and small["initial_config"]["agents"] == 2 and small["evaluation_suite"] == "test-small"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets__validate_and_survive_a_yaml_round_trip(tmp_path, name):
    from curriculum.config import load_run_config, save_run_config

    config = preset(name)
    save_run_config(config, tmp_path / "run.yaml")
    assert load_run_config(tmp_path / "run.yaml") == config


@pytest.mark.parametrize("field, value", [
    ("training.generations", 1),
    ("training.learning_rate", 0.0),
    ("training.rewards", {"nonsense": 1.0}),
    ("training.vllm_mode", "remote"),
    ("warm_start.steps", 0),
    ("validation.samples", -5),
    ("cpu_threads", 0),
    ("cpu_threads", 1.5),
    ("stages", 0),
    ("prompt_style", "verbose"),
    ("evaluation_suite", "no-such-suite"),
    ("engineer.context", ["behavior", "gossip"]),
    ("training.lora", "maybe"),
    ("training.use_vllm", 1),
    ("warm_start.enabled", "yes please"),
    ("training.trainer", "ppo"),
    ("training.rft_rounds", 0),
    ("training.rft_min_kept", 0),
    ("validation.sampled_k", -1),
    ("arm", "a/b"),
    ("model", "huge"),
    ("initial_config.sizes.3.hole_ratio", 5.0),
    ("validation.config.agents", 0),
    ("warm_start.config.samples", 0),
])
def test_run_config__bad_value_names_the_field(field, value):
    with pytest.raises(ConfigError) as caught:
        preset("tiny").with_overrides(**{field: value})
    assert caught.value.field.startswith(field)


def test_run_config__holds_its_stage_configs_as_validated_stage_config_objects():
    from dataclasses import replace

    from simulator.config import StageConfig

    config = preset("small")
    for part in (config.initial_config, config.warm_start.config, config.validation.config):
        assert isinstance(part, StageConfig)
    assert preset("qwen3-4b").warm_start.config is None  # no warm start: written as {} and read back as None
    assert preset("qwen3-4b").to_dict()["warm_start"]["config"] == {}
    changed = config.with_overrides(**{"initial_config.sizes.6.wait_ratio": 0.5})
    assert changed.initial_config.sizes[6].wait_ratio == 0.5 and config.initial_config.sizes[6].wait_ratio == 0.3
    # a run config built from objects is the one built from the documents
    assert replace(config, initial_config=config.initial_config.to_dict()) == config
    with pytest.raises(ConfigError, match="initial_config"):
        replace(config, initial_config=None)
    with pytest.raises(ConfigError, match="validation.config"):
        RunConfig.from_dict({**config.to_dict(), "validation": {"samples": 10}})


def test_run_config__unknown_keys_and_presets_list_the_allowed_ones():
    with pytest.raises(ConfigError, match="training.stpes"):
        RunConfig.from_dict({"training": {"stpes": 3}})
    with pytest.raises(ConfigError, match="a run config key"):
        RunConfig.from_dict({"trainnig": {}})
    with pytest.raises(ConfigError, match="qwen3-4b"):
        preset("huge")


def test_run__same_config_again_reuses_everything(finished_run):
    start = time.perf_counter()
    Run(finished_run, log=lambda message: None).execute()
    assert time.perf_counter() - start < 60  # nothing is trained again: every stage record is read back


def test_run__refuses_a_folder_made_by_another_config(finished_run):
    changed = finished_run.with_overrides(**{"training.learning_rate": 1e-3})
    with pytest.raises(ConfigError, match="manifest"):
        Run(changed, log=lambda message: None).execute()


def test_run__engineer_failures_fall_back_to_the_previous_config(tmp_path, monkeypatch):
    # An unreachable endpoint: the engineer's backend raises; the run must go on with the config it had.
    monkeypatch.setenv("MAPF_LAKE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MAPF_LAKE_OPENAI_API_KEY", "sk-test-not-a-key")
    config = small_config(tmp_path, "fallback", **{"engineer.spec": "llm:openai:some-model", "stages": 1})
    Run(config, log=lambda message: None).execute()
    decision = json.loads((config.run_dir / "stage-01" / "decision.json").read_text())
    assert decision["accepted"] is False and decision["reason"]
    record = json.loads((config.run_dir / "stage-01" / "stage.json").read_text())
    assert record["next_config"] == record["config"]


def test_run__the_engineer_sees_the_stage_s_own_config_generator_report_and_outcome(finished_run, tmp_path):
    from replays.reader import ReplayReader
    from simulator.config import load_config

    stage = finished_run.run_dir / "stage-01"
    record = json.loads((stage / "stage.json").read_text())
    with ReplayReader(stage / "validation.mlr") as reader:
        header = reader.header
    # the header says which config made the instances (validation) and which the checkpoint trained on
    assert header.stage_config == finished_run.validation.config.to_dict()
    assert header.extra["trained_config"] == record["config"] != header.stage_config
    # the generator's own report of the stage, not estimates from the validation episodes
    generation = record["generation"]
    assert sum(report["count"] for report in generation.values()) == record["config"]["samples"]
    assert set(generation) == {str(side) for side, spec in record["config"]["sizes"].items() if spec["data_ratio"] > 0}
    context = json.loads((stage / "decision.json").read_text())["context_text"]
    assert "what the generator made of the current config" in context
    assert record["decision"]["outcome"] in ("changed", "kept", "rejected")
    # mapf-lake engineer on the stage folder alone edits the config the stage trained on
    out = tmp_path / "next.yaml"
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "engineer", "--replays", str(stage),
                             "--engineer", "fixed", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert load_config(out).to_dict() == record["config"] and "trained on" in result.stderr


def _train_in_subprocess(config_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "curriculum.cli", "train", "--config", str(config_path)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_when(process: subprocess.Popen, ready, timeout: float = 300) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready():
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.01)
    process.kill()
    return False


@pytest.mark.parametrize("moment", ["training", "engineering"])
def test_run__resume_after_sigkill_matches_an_uninterrupted_run(tmp_path, finished_run, moment):
    from curriculum.config import save_run_config

    config = small_config(tmp_path, f"killed-{moment}", **{"engineer.spec": "llm:self"})
    save_run_config(config, tmp_path / "run.yaml")
    stage = config.run_dir / "stage-01"
    if moment == "training":
        ready = lambda: (stage / "trainer").exists()  # noqa: E731
    else:  # validation written, decision not yet: the engineer (the tiny model itself) is thinking
        ready = lambda: (stage / "summary.json").exists() and not (stage / "decision.json").exists()  # noqa: E731
    killed = _kill_when(_train_in_subprocess(tmp_path / "run.yaml"), ready)
    assert killed, f"the run ended before it could be killed during {moment}"
    assert not (stage / "stage.json").exists()
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--resume", str(config.run_dir)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    reference = small_config(tmp_path, "reference", **{"engineer.spec": "llm:self"})
    Run(reference, log=lambda message: None).execute()
    for number in (1, 2):
        resumed = json.loads((config.run_dir / f"stage-0{number}" / "stage.json").read_text())
        clean = json.loads((reference.run_dir / f"stage-0{number}" / "stage.json").read_text())
        assert resumed["config"] == clean["config"]
        assert resumed["next_config"] == clean["next_config"]
        assert resumed["decision"]["accepted"] == clean["decision"]["accepted"]


def test_resume__extends_a_finished_run_to_more_stages_as_if_it_had_them_from_the_start(tmp_path, finished_run):
    short = small_config(tmp_path, "extended", stages=1)
    Run(short, log=lambda message: None).execute()
    cli = [sys.executable, "-m", "curriculum.cli", "train", "--resume", str(short.run_dir)]
    for bad, named in ((["--set", "training.steps=3"], "training.steps"), (["--set", "stages=0"], "stages")):
        refused = subprocess.run(cli + bad, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert refused.returncode == 2 and named in refused.stderr and "Traceback" not in refused.stderr
    assert (short.run_dir / "final" / "table.json").exists() and not (short.run_dir / "stage-02").exists()
    result = subprocess.run(cli + ["--set", "stages=2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "extended from 1 to 2 stages" in result.stderr
    # stage 2 is what the two-stage run trained: the same config, the same engineer decision after it
    for number in (1, 2):
        extended = json.loads((short.run_dir / f"stage-0{number}" / "stage.json").read_text())
        reference = json.loads((finished_run.run_dir / f"stage-0{number}" / "stage.json").read_text())
        assert extended["config"] == reference["config"] and extended["next_config"] == reference["next_config"]
    manifest = json.loads((short.run_dir / "manifest.json").read_text())
    assert manifest["run_config"]["stages"] == 2 and manifest["extended"][0]["from_stages"] == 1
    assert (short.run_dir / "final-stage-01" / "table.json").exists() and (short.run_dir / "final" / "table.json").exists()
    assert [json.loads(line)["stage"] for line in (short.run_dir / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    # a run cannot be cut below its finished stages: a clear error, and the folder is left as it was
    with pytest.raises(ConfigError, match="extended, not cut"):
        Run(short.with_overrides(stages=1), log=lambda message: None).execute()
    assert json.loads((short.run_dir / "manifest.json").read_text())["run_config"]["stages"] == 2


def test_run__the_bandit_engineer_s_state_survives_a_sigkill_and_resume(tmp_path):
    from curriculum.config import save_run_config

    config = small_config(tmp_path, "bandit", **{"engineer.spec": "bandit"})
    save_run_config(config, tmp_path / "run.yaml")
    killed = _kill_when(_train_in_subprocess(tmp_path / "run.yaml"),
                        lambda: (config.run_dir / "stage-02" / "trainer").exists())
    assert killed, "the run ended before stage 2 could be killed"
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--resume", str(config.run_dir)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    signals = [json.loads((config.run_dir / f"stage-0{n}" / "stage.json").read_text())["train"]["signal"]["by_size"]
               for n in (1, 2)]
    state = json.loads((config.run_dir / "stage-02" / "decision.json").read_text())["details"]["state"]
    # the counts cover both stages' groups: the resumed stage-2 decision continued stage 1's bandit
    expected = {side: sum(s.get(side, {}).get("groups", 0) for s in signals) for side in {*signals[0], *signals[1]}}
    assert state["counts"] == {side: n for side, n in sorted(expected.items(), key=lambda kv: int(kv[0])) if n}
    assert sum(state["counts"].values()) == 2 * SMALL["training.steps"] * SMALL["training.prompts_per_step"]


def test_run__the_progress_engineer_steers_by_the_rejection_sampling_rounds(tmp_path):
    config = small_config(tmp_path, "progress", **{"engineer.spec": "progress", "stages": 1, "training.trainer": "rft",
                                                   "training.rft_rounds": 2, "training.rft_epochs": 1,
                                                   "training.steps": 8, "training.rft_min_kept": 1})
    Run(config, log=lambda message: None).execute()
    rounds = json.loads((config.run_dir / "stage-01" / "stage.json").read_text())["train"]["signal"]["rounds"]
    decision = json.loads((config.run_dir / "stage-01" / "decision.json").read_text())
    assert len(rounds) == 2 and decision["engineer"] == "progress"
    # each size's last rate is kept for the next stage; a size sampled in both rounds is valued by the change
    # of its log-odds
    last = {side: figures["valid_rate"] for by_size in rounds for side, figures in by_size.items()}
    assert decision["details"]["state"]["rates"] == pytest.approx(last)
    both = set(rounds[0]) & set(rounds[1])
    assert both, rounds  # 8 instances a round over 4 sizes: the seed's draw shares sizes between the rounds
    from engineer.progress import scaled

    assert decision["details"]["state"]["values"] == pytest.approx(
        {side: abs(scaled(rounds[1][side]["valid_rate"], "logit") - scaled(rounds[0][side]["valid_rate"], "logit"))
         for side in both})
    assert "sampled valid by round" in decision["context_text"]


def test_read_summary__a_summary_without_the_makespan_split_gets_it_from_the_replays_beside_it(finished_run, tmp_path):
    import shutil

    from curriculum.loop.folder import read_summary as _read_summary

    stage = finished_run.run_dir / "stage-01"
    fresh = _read_summary(stage / "summary.json")
    assert fresh.failures.by_size_makespan  # the run wrote the split itself
    old = tmp_path / "stage"
    old.mkdir()
    document = json.loads((stage / "summary.json").read_text())
    del document["by_size_makespan"]  # as a run folder of a version before the split has it
    (old / "summary.json").write_text(json.dumps(document))
    assert _read_summary(old / "summary.json").failures.by_size_makespan == {}  # no replays beside it: none
    shutil.copy(stage / "validation.mlr", old / "validation.mlr")
    read = _read_summary(old / "summary.json")
    assert read == fresh and json.loads((old / "summary.json").read_text()) == document  # nothing rewritten


def test_run__the_gap_engineer_reads_the_validation_split_the_run_records(tmp_path):
    config = small_config(tmp_path, "gap", **{"engineer.spec": "gap", "engineer.options": {"min_episodes": 1},
                                              "stages": 1, "validation.samples": 40})
    Run(config, log=lambda message: None).execute()
    split = json.loads((config.run_dir / "stage-01" / "summary.json").read_text())["by_size_wait"]
    decision = json.loads((config.run_dir / "stage-01" / "decision.json").read_text())
    record = json.loads((config.run_dir / "stage-01" / "stage.json").read_text())
    assert split and decision["engineer"] == "gap" and "instances that need a wait" in decision["context_text"]
    sizes = record["config"]["sizes"]
    gap = False
    for side in sizes:
        waits, others = split.get(f"{side}:needs_wait"), split.get(f"{side}:no_wait")
        gap |= bool(waits and others and others["valid_rate"] > 0 and waits["valid_rate"] < 0.5 * others["valid_rate"])
    lesson = min(sizes, key=int)  # with a gap anywhere, the smallest size teaches waiting on open maps
    expected = {side: ((0.0, 1.0) if gap and side == lesson else (spec["hole_ratio"], spec["wait_ratio"]))
                for side, spec in sizes.items()}
    assert {side: (spec["hole_ratio"], spec["wait_ratio"]) for side, spec in record["next_config"]["sizes"].items()} \
        == expected
    assert decision["details"]["state"]["start"] == {side: {"hole_ratio": spec["hole_ratio"],
                                                            "wait_ratio": spec["wait_ratio"]}
                                                     for side, spec in sizes.items()}


def test_run__plan_first_lets_the_engineer_choose_stage_1_from_the_warm_start(tmp_path):
    options = {"low": 0.0, "high": 1.0, "min_episodes": 1}  # every size in the band: each gets one edit
    config = small_config(tmp_path, "plan", **{"engineer.spec": "mutate", "engineer.options": options, "stages": 1,
                                               "engineer.plan_first": True})
    lines: list[str] = []
    Run(config, log=lines.append).execute()
    plan = json.loads((config.run_dir / "warm_start" / "decision.json").read_text())
    record = json.loads((config.run_dir / "stage-01" / "stage.json").read_text())
    given = StageConfig.from_dict(config.initial_config.to_dict())
    # stage 1 trained on the engineer's plan, made from the warm start's validation, not on the config as given
    assert plan["engineer"] == "mutate" and plan["diff"]
    assert StageConfig.from_dict(plan["config"]).sizes == StageConfig.from_dict(record["config"]).sizes != given.sizes
    assert (config.run_dir / "stage-01" / "config.yaml").exists()
    assert any(line.startswith("before stage 1: engineer mutate") for line in lines), lines
    # a second run of the same folder reads the plan back instead of asking again
    before = (config.run_dir / "warm_start" / "decision.json").stat().st_mtime_ns
    Run(config, log=lambda message: None).execute()
    assert (config.run_dir / "warm_start" / "decision.json").stat().st_mtime_ns == before
    with pytest.raises(ConfigError, match="engineer.plan_first"):
        small_config(tmp_path, "bad", **{"engineer.plan_first": "yes"})


def test_grpo_stage__lora_trains_merges_and_saves_a_loadable_checkpoint(tmp_path, finished_run):
    from curriculum.training.grpo import grpo_stage
    from policy.backend_base import Sampling
    from policy.backends import make_backend
    from policy.prompts import get_style

    items = _instances(4, seed=3)
    training = Training(steps=1, prompts_per_step=2, generations=4, max_completion_length=24, learning_rate=1e-4,
                        temperature=1.0, beta=0.0, lora=True, lora_rank=4)
    info = grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
                      get_style(finished_run.prompt_style), tmp_path, seed=0)
    assert info.steps == 1 and 0.0 <= info.zero_variance_share <= 1.0
    assert info.signal is not None and info.signal.by_size  # the engineer's training signal, typed
    assert TrainingReport.from_dict(json.loads(json.dumps(info.to_dict()))) == info  # stage.json's train
    backend = make_backend(f"hf:{tmp_path / 'model'}")
    out = backend.generate(["n=3\n...\n...\n...\nA0 0,0>0,2\nA1 2,2>2,0\n?\n"], Sampling(max_new_tokens=8, temperature=0.0))
    assert isinstance(out[0].text, str)


def test_progress_line__prints_each_tenth_with_time_left_and_latest_figure():
    import io
    from types import SimpleNamespace

    from curriculum.training.common import _Progress

    out = io.StringIO()
    progress = _Progress.make("GRPO stage-01", 20, stream=out)
    for step in range(1, 21):
        progress.on_step_begin(None, None, None)
        progress.on_log(None, None, None, logs={"reward": step / 10, "loss": 0.5})
        progress.on_step_end(None, SimpleNamespace(global_step=step), None)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and len(progress.times) == 20  # not a terminal: every second step of 20, then done
    assert lines[0].startswith("GRPO stage-01: step 2/20") and "s/step" in lines[0] and "left" in lines[0]
    assert lines[-1].startswith("GRPO stage-01: step 20/20") and lines[-1].endswith("reward 2.000")


def test_bench_grpo__times_real_steps_of_a_fresh_tiny_model():
    from curriculum.benches.grpo import bench_grpo, render

    figures = bench_grpo(steps=2, prompts_per_step=2, generations=2, max_completion_length=12, cpu_threads=1, side=3)
    assert figures["model"] == "tiny" and figures["training"] == "full"
    assert figures["step_s"] > 0 and figures["first_step_s"] > 0 and figures["peak_memory_gib"] > 0.05
    assert figures["trainable_parameters"] == figures["parameters"] > 100_000
    assert "s/step" in render(figures)
    with pytest.raises(ConfigError, match="--steps"):
        bench_grpo(steps=1)


def test_grpo_stage__without_save_leaves_no_checkpoint(tmp_path, finished_run):
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style

    items = _instances(3, seed=4)
    training = Training(steps=3, prompts_per_step=2, generations=2, max_completion_length=16, learning_rate=1e-4,
                        temperature=1.0, beta=0.0, lora=False, lora_rank=4)
    info = grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
                      get_style(finished_run.prompt_style), tmp_path, seed=0, save=False)
    assert info.figures["first_step_seconds"] > 0 and info.figures["later_step_seconds"] > 0
    assert not (tmp_path / "model").exists() and not any((tmp_path / "trainer").glob("checkpoint-*"))


def test_bench_lift__grpo_and_sft_peer_validated_on_the_same_held_out_instances(finished_run):
    from curriculum.benches.lift import bench_lift, render

    model = str(finished_run.run_dir / "warm_start" / "model")
    figures = bench_lift(model, steps=2, validation=12, cpu_threads=None, log=lambda message: None)
    assert figures["style"] == finished_run.prompt_style and figures["validation_instances"] == 12
    rows = figures["rows"]
    assert list(rows) == ["checkpoint", "rl", "sft"]
    for name in ("rl", "sft"):
        assert rows[name]["lift"] == pytest.approx(rows[name]["valid"] - rows["checkpoint"]["valid"])
        assert rows[name]["seconds"] > 0
    train = rows["rl"]["train"]  # the trainer's own figures
    assert 0.0 <= train["zero_variance_share"] <= 1.0 and train["completion_tokens_mean"] > 0
    assert "failure_credit_localized" not in train  # only with training.failure_credit
    for row in rows.values():
        assert set(row["by_side"]) <= {3, 4, 5, 6} and 0.0 <= row["valid"] <= 100.0
    text = render(figures)
    assert "12 held-out instances" in text and "+ GRPO 2 steps" in text and "+ SFT 2 steps" in text
    with pytest.raises(ConfigError, match="--validation"):
        bench_lift(model, validation=5)


def test_best_valid_plans__count_the_instances_that_need_a_wait_apart():
    from curriculum.training.rft import _best_valid_plans
    from simulator.types import JointPlan

    items = _instances(4, seed=5)
    waiting = [index for index, item in enumerate(items) if item.needs_wait]
    assert 0 < len(waiting) < len(items)
    empty = JointPlan.from_sequences([[], []])
    # three samples each: the solver's plan only for the first instance that needs a wait and for every other one
    plans = [p for index, item in enumerate(items)
             for p in ((item.plan if index not in waiting[1:] else empty), empty, None)]
    kept, figures = _best_valid_plans(items, plans, 3)
    assert figures.needs_wait == len(waiting) and figures.needs_wait_kept == 1
    assert figures.needs_wait_sampled_valid_rate == pytest.approx(1 / (3 * len(waiting)))
    no_waits = [item for item in items if not item.needs_wait]
    _, plain = _best_valid_plans(no_waits, [item.plan for item in no_waits], 1)
    assert plain.needs_wait is None and "needs_wait" not in plain.to_dict()


def test_rft_stage__keeps_only_valid_own_plans_and_resumes_by_round(tmp_path, finished_run):
    from curriculum.training.rft import _best_valid_plans, rft_stage
    from policy.prompts import get_style
    from engineer.evidence import TrainingSignal
    from policy.rewards import StageReward
    from simulator.types import JointPlan

    items = _instances(3, seed=5, samples=6, wait_ratio=0.0)
    # Two samples per instance: the solver's plan (valid) and an empty plan (never reaches the goals; starts and
    # goals differ) or no parse at all. The kept plan is always the valid one; the group agrees only when both fail.
    empty = JointPlan.from_sequences([[], []])
    plans = [p for item in items for p in (item.plan, empty)]
    plans[2:4] = [None, empty]  # instance 1: nothing valid
    signal = StageReward({"valid": 1.0}, 2)
    outcomes: dict = {}
    kept, figures = _best_valid_plans(items, plans, 2, signal, outcomes=outcomes)
    # each instance's own samples, by content key: 1 of 2 valid, instance 1 none
    assert outcomes == {item.instance.content_key().hex(): [0 if i == 1 else 1, 2] for i, item in enumerate(items)}
    assert kept[1] is None and all(k is item.plan for k, item in zip(kept, items) if k is not None)
    assert figures.solved_share == pytest.approx(5 / 6) and figures.zero_variance_share == pytest.approx(1 / 6)
    assert figures.sampled_valid_rate == pytest.approx(5 / 12)
    # the samples of one instance are one group of the 0/1 valid reward: 5 mixed groups (each sample 0.5 from the
    # mean, the group's std 0.5 ** 0.5), 1 agreeing group (no advantage)
    three = signal.signal().by_size[3]
    assert three.groups == 6 and three.zero_variance_share == pytest.approx(1 / 6)
    assert three.valid_rate == pytest.approx(5 / 12)
    assert three.abs_advantage_mean == pytest.approx(5 / 6 * 0.5 / (0.5 ** 0.5 + 1e-4))

    model = str(finished_run.run_dir / "warm_start" / "model")
    training = Training(trainer="rft", steps=2, prompts_per_step=3, generations=4, max_completion_length=24,
                        learning_rate=1e-4, temperature=1.0, rft_rounds=2, rft_epochs=1, rft_batch_size=8,
                        rft_min_kept=1)
    kwargs = dict(seed=0, cpu_threads=1)
    info = rft_stage(training, model, items, get_style(finished_run.prompt_style), tmp_path / "a", **kwargs).to_dict()
    assert info["trainer"] == "rft" and [r["prompts"] for r in info["rounds"]] == [3, 3]
    assert all(r["kept"] <= r["prompts"] for r in info["rounds"]) and (tmp_path / "a" / "model" / "config.json").exists()
    # every sampled instance is one group of the stage's signal (what the bandit engineer reads), 4 samples each
    assert info["signal"]["by_size"]["3"]["groups"] == 6
    assert info["signal"]["by_size"]["3"]["valid_rate"] == pytest.approx(info["reward_mean"])
    assert TrainingSignal.from_dict(info["signal"]).trainer == "rft"
    # each round's own groups too (what the progress engineer reads): 3 instances each, together the stage's
    rounds = TrainingSignal.from_dict(info["signal"]).rounds
    assert [by_size[3].groups for by_size in rounds] == [3, 3]
    assert [by_size[3].valid_rate for by_size in rounds] == \
        pytest.approx([r["sampled_valid_rate"] for r in info["rounds"]])
    # each sampled instance's own samples (what the replay engineer scores it by): 6 prompts x 4 samples in all
    from curriculum.loop.records import OUTCOMES_FILE
    from engineer.material import read_outcomes

    outcomes = read_outcomes(json.loads((tmp_path / "a" / OUTCOMES_FILE).read_text()))
    assert sum(samples for _, samples in outcomes.values()) == 24
    assert sum(valid for valid, _ in outcomes.values()) == round(info["reward_mean"] * 24)
    assert set(outcomes) <= {item.instance.content_key() for item in items}
    # a stage killed after its first round: the round is read back, the second is done again, same figures
    (tmp_path / "a" / "round-02" / "model" / "checkpoint_done.json").unlink()
    (tmp_path / "a" / "model" / "checkpoint_done.json").unlink()
    again = rft_stage(training, model, items, get_style(finished_run.prompt_style), tmp_path / "a", **kwargs).to_dict()
    assert [r["kept"] for r in again["rounds"]] == [r["kept"] for r in info["rounds"]]
    assert again["signal"] == info["signal"]  # the first round's groups were read back with it, not lost
    assert read_outcomes(json.loads((tmp_path / "a" / OUTCOMES_FILE).read_text())) == outcomes  # and its samples
    # rounds that keep fewer plans than rft_min_kept do not fine-tune: the stage's model is its starting one
    from dataclasses import replace

    guarded = rft_stage(replace(training, rft_min_kept=4), model, items, get_style(finished_run.prompt_style),
                        tmp_path / "b", **kwargs).to_dict()
    assert [r["sft_steps"] for r in guarded["rounds"]] == [0, 0] and [r["kept"] for r in guarded["rounds"]] == \
        [r["kept"] for r in info["rounds"]]
    assert (tmp_path / "b" / "model" / "model.safetensors").read_bytes() == \
        (Path(model) / "model.safetensors").read_bytes()


@pytest.mark.parametrize("pair, field", [
    ("name=..", "name"),
    ("name=.", "name"),
    ("name=a\\b", "name"),
    ("training.steps=[1", "--set training.steps"),
    ("bogus.key=1", "bogus.key"),
    ("training.steps.x=1", "training.steps.x"),
    ("training.bogus=1", "training.bogus"),
    ("engineer.context=5", "engineer.context"),
    ("training.steps=" + "9" * 5000, "--set training.steps"),
    ("training.steps=&a [1]", "--set training.steps"),
    ("training.learning_rate=1e309", "--set training.learning_rate"),  # infinite: refused as read, named as typed
])
def test_set_overrides__bad_pairs_name_the_key_in_one_line(pair, field):
    from curriculum.config import parse_overrides

    with pytest.raises(ConfigError) as caught:
        preset("tiny").with_overrides(**parse_overrides([pair]))
    assert caught.value.field == field and len(str(caught.value)) < 400


def test_set_overrides__a_misspelt_key_is_answered_with_the_closest_ones():
    with pytest.raises(ConfigError, match=r"closest: weight_average; `mapf-lake train --print-config` lists them"):
        preset("tiny").with_overrides(**{"training.weight_avg": 1})
    with pytest.raises(ConfigError, match=r"steps"):  # a short section lists all its keys
        preset("tiny").with_overrides(**{"warm_start.stepz": 1})


def test_set_overrides__open_sections_take_new_keys_which_their_reader_checks():
    config = preset("small").with_overrides(**{"engineer.spec": "progress", "engineer.options.scale": "absolute",
                                               "training.rewards.progress": 0.5})
    assert config.engineer.options == {"scale": "absolute"} and config.training.rewards["progress"] == 0.5
    with pytest.raises(ConfigError, match="one of logit, absolute"):
        preset("small").with_overrides(**{"engineer.spec": "progress", "engineer.options.scale": "log"})
    with pytest.raises(ConfigError, match="a reward among"):
        preset("small").with_overrides(**{"training.rewards.bogus": 1.0})


@pytest.mark.parametrize("key, value, read", [
    ("initial_config.sizes.3.min_makespan", 4, lambda c: c.initial_config.sizes[3].min_makespan),
    ("initial_config.sizes.6.max_makespan", 9, lambda c: c.initial_config.sizes[6].max_makespan),
    ("validation.config.sizes.4.max_makespan", 6, lambda c: c.validation.config.sizes[4].max_makespan),
    ("warm_start.config.sizes.5.min_makespan", 2, lambda c: c.warm_start.config.sizes[5].min_makespan),
])
def test_set_overrides__the_optional_makespan_bounds_of_a_size_can_be_set(key, value, read):
    assert read(preset("tiny").with_overrides(**{key: value})) == value


@pytest.mark.parametrize("changes, field", [
    ({"initial_config.sizes.3.min_makespan": 0}, "initial_config.sizes.3.min_makespan"),
    ({"initial_config.sizes.3.min_makespan": 5, "initial_config.sizes.3.max_makespan": 4},
     "initial_config.sizes.3.max_makespan"),
    ({"initial_config.sizes.3.bogus": 1}, "initial_config.sizes.3.bogus"),
    ({"initial_config.min_makespan": 1}, "initial_config.min_makespan"),
    ({"training.sizes.3.min_makespan": 1}, "training.sizes.3.min_makespan"),
])
def test_set_overrides__makespan_bounds_are_checked_and_only_under_a_stage_configs_sizes(changes, field):
    with pytest.raises(ConfigError) as caught:
        preset("tiny").with_overrides(**changes)
    assert caught.value.field == field, str(caught.value)


def test_set_overrides__exponent_numbers_are_numbers():
    from curriculum.config import parse_overrides

    config = preset("tiny").with_overrides(**parse_overrides(["training.learning_rate=5e-5", "name=ok-name"]))
    assert config.training.learning_rate == 5e-5 and config.name == "ok-name"


def test_load_run_config__refuses_an_alias_bomb_quickly(tmp_path):
    from curriculum.config import load_run_config

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\nname: *a11\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="anchors and aliases"):
        load_run_config(tmp_path / "bomb.yaml")
    assert time.perf_counter() - start < 5


def test_config_error__never_expands_a_huge_value_to_print_it():
    nested = ["x"] * 9
    for _ in range(12):
        nested = [nested] * 9  # 9**13 leaves if expanded
    start = time.perf_counter()
    message = str(ConfigError("field", nested, "anything"))
    assert time.perf_counter() - start < 1 and len(message) < 200
    assert "about 5001 digits" in str(ConfigError("field", 10**5000, "anything"))


def test_run__a_second_process_trains_only_and_reads_the_main_process_records(finished_run, monkeypatch):
    """Under ``accelerate launch`` every process runs the loop; only rank 0 writes the run's records."""
    from curriculum.loop.distributed import process_rank, wait_for_file

    files = {path: path.stat().st_mtime_ns for path in finished_run.run_dir.rglob("*") if path.is_file()}
    monkeypatch.setenv("RANK", "1")
    assert process_rank() == 1
    table = Run(finished_run, log=lambda message: None).execute()
    assert table is not None
    assert table.to_dict() == json.loads((finished_run.run_dir / "final" / "table.json").read_text())
    assert {path: path.stat().st_mtime_ns for path in finished_run.run_dir.rglob("*") if path.is_file()} == files
    monkeypatch.setenv("RANK", "not a number")
    assert process_rank() == 0

    import threading

    target = finished_run.run_dir.parent / "written-later.json"
    threading.Timer(0.3, lambda: target.write_text("{}")).start()
    assert wait_for_file(target, poll_s=0.05) == target and target.read_text() == "{}"


def test_weight_average__is_the_exponential_average_of_the_steps_and_survives_a_resume(tmp_path):
    from types import SimpleNamespace

    import torch

    from curriculum.training.callbacks import AVERAGE_FILE, weight_average_callback

    model = torch.nn.Linear(3, 2)
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    model.register_parameter("frozen", frozen)
    args = SimpleNamespace(output_dir=str(tmp_path))
    average = weight_average_callback(0.5)
    average.on_train_begin(args, SimpleNamespace(global_step=0), None, model=model)
    expected = model.weight.detach().clone()
    for step in (1, 2):
        with torch.no_grad():
            model.weight.add_(1.0)
        expected = 0.5 * expected + 0.5 * model.weight.detach()
        average.on_step_end(args, SimpleNamespace(global_step=step), None, model=model)
    assert set(average.average) == {"weight", "bias"}  # only the trained weights
    torch.testing.assert_close(average.average["weight"], expected)
    (tmp_path / "checkpoint-2").mkdir()
    average.on_save(args, SimpleNamespace(global_step=2), None)
    resumed = weight_average_callback(0.5)
    resumed.on_train_begin(args, SimpleNamespace(global_step=2), None, model=model)
    torch.testing.assert_close(resumed.average["weight"], expected)
    resumed.on_train_end(args, SimpleNamespace(global_step=2), None, model=model)  # the stage keeps the average
    torch.testing.assert_close(model.weight.detach(), expected)
    assert (tmp_path / "checkpoint-2" / AVERAGE_FILE).exists() and not list(tmp_path.rglob("*.tmp"))


def test_grpo_stage__with_weight_average_saves_the_averaged_weights(tmp_path, finished_run):
    import torch
    from safetensors.torch import load_file

    from curriculum.training.callbacks import AVERAGE_FILE
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style

    items = _instances(3, seed=4)
    training = Training(steps=3, prompts_per_step=2, generations=2, max_completion_length=16, learning_rate=1e-3,
                        temperature=1.0, weight_average=0.5)
    grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
               get_style(finished_run.prompt_style), tmp_path, seed=0)
    # the last checkpoint holds the average, and the stage saved it (the callback's own test shows it lags the
    # weights; this warm start of a few steps earns no reward, so here the weights do not move)
    average = torch.load(tmp_path / "trainer" / "checkpoint-3" / AVERAGE_FILE, weights_only=True)
    saved = load_file(str(tmp_path / "model" / "model.safetensors"))
    shared = [name for name in average if name in saved]
    assert shared and len(shared) >= len(saved) - 1  # every trained weight (a tied head is saved once)
    for name in shared:
        torch.testing.assert_close(saved[name].float(), average[name])
    with pytest.raises(ConfigError, match="training.weight_average"):
        Training(weight_average=1.0).validate()


def test_sft_dataset__compact_xy_targets_trace_the_solver_plan_in_the_tiny_model_s_alphabet():
    from curriculum.training.common import sft_dataset
    from policy.models import compact_text_problems
    from policy.parsing import parse_plan
    from policy.prompts import get_style, xy_answer_for
    from simulator.generator import generate

    items = generate(StageConfig.from_dict(
        {"agents": 2, "samples": 24, "seed": 3, "sizes": {3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
                                                          6: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.5}}})).instances
    rows = sft_dataset(items, get_style("compact-xy"))
    for item, row in zip(items, rows):
        assert row["completion"] == xy_answer_for(item.instance, item.plan)
        assert parse_plan(row["completion"], item.instance.n_agents).plan == item.plan
        assert compact_text_problems(row["prompt"] + row["completion"]) == ""


def test_greedy_member__each_group_starts_with_the_greedy_answer_and_a_stage_trains(tmp_path, finished_run):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from curriculum.training.common import _common_arguments, grpo_dataset
    from curriculum.training.grpo import greedy_member_trainer, grpo_stage
    from policy.prompts import get_style
    from policy.rewards import StageReward

    model_dir = str(finished_run.run_dir / "warm_start" / "model")
    style = get_style(finished_run.prompt_style)
    items = _instances(4, seed=5, wait_ratio=0.0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    args = GRPOConfig(**_common_arguments(tmp_path / "direct", 1, 1e-5, 1, 0, model), per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=24, temperature=1.0, logging_steps=1)
    trainer = greedy_member_trainer()(model=model, reward_funcs=[StageReward({"default": 1.0}, 4, "group")], args=args,
                                      train_dataset=grpo_dataset(items, style), processing_class=tokenizer)
    trainer.model.train()
    prompts = [tokenizer(style.prompt(item.instance))["input_ids"] for item in items[:2] for _ in range(4)]
    completions, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    for group in range(2):
        with torch.no_grad():
            ids = torch.tensor([prompts[group * 4]])
            greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24)
        expected = greedy[0, ids.shape[1]:].tolist()
        eos = tokenizer.eos_token_id
        expected = expected[:expected.index(eos) + 1] if eos in expected else expected
        assert completions[group * 4] == expected
    with pytest.raises(RuntimeError, match="groups of num_generations"):
        trainer._generate_single_turn([prompts[0], prompts[4], prompts[0], prompts[4]], None, {}, 2)

    training = Training(steps=2, prompts_per_step=2, generations=4, max_completion_length=24, greedy_member=True)
    info = grpo_stage(training, model_dir, items, style, tmp_path / "stage", seed=0)
    assert info.steps == 2 and (tmp_path / "stage" / "model" / "config.json").exists()
    with pytest.raises(ConfigError, match="training.greedy_member"):
        Training(greedy_member=True, use_vllm=True).validate()


@pytest.mark.parametrize("lengths, spans, expected", [
    ([1, 1, 1, 1, 1], [(2, 3)], [False, False, True, False, False]),
    ([2, 3, 1], [(1, 2)], [True, False, False]),  # inside a longer token
    ([2, 3, 1], [(2, 3), (5, 6)], [False, True, True]),
    ([1, 1], [], [False, False]),
    ([], [(0, 1)], []),
])
def test_blamed_tokens__table(lengths, spans, expected):
    from curriculum.training.grpo import blamed_tokens

    assert blamed_tokens(lengths, spans) == expected


def test_failure_credit__negative_advantage_lands_on_the_failing_move_only(finished_run):
    from collections import defaultdict

    import torch
    from transformers import AutoTokenizer

    from curriculum.training.grpo import failure_credit_trainer
    from policy.rewards import reward_columns
    from simulator.types import Instance

    tokenizer = AutoTokenizer.from_pretrained(str(finished_run.run_dir / "warm_start" / "model"))
    instance = Instance(grid=[[0, 0, 0], [0, 1, 0], [0, 0, 0]], starts=[[0, 0], [2, 2]], goals=[[0, 2], [2, 0]])
    row = reward_columns(instance, optimal_makespan=2, horizon=12)
    texts = ["A0 DR\nA1 LL", "A0 RR\nA1 LL", "A0 DR\nA1 LL", "A0 R\nA1 L"]  # hole at step 2, valid, hole, off goal
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    width = max(map(len, encoded)) + 2
    ids = torch.tensor([e + [tokenizer.pad_token_id or 0] * (width - len(e)) for e in encoded])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    advantages = torch.tensor([-0.5, 1.5, 0.5, -0.5])  # the third: a failure with a positive advantage keeps it all

    class Scored:  # what TRL's own method returns, for four completions of one prompt
        def __init__(self):
            self.processing_class, self.model = tokenizer, torch.nn.Linear(1, 1)  # a module in training mode
            self._metrics = {"train": defaultdict(list)}

        def _generate_and_score_completions(self, inputs):
            return {"completion_ids": ids, "completion_mask": mask, "advantages": advantages.clone()}

    trainer = failure_credit_trainer(Scored)()
    out = trainer._generate_and_score_completions([row] * 4)["advantages"]
    assert out.shape == ids.shape
    blamed = [i for i in range(width) if out[0, i] != 0]
    assert tokenizer.decode(ids[0, blamed]) == "R" and out[0, blamed].tolist() == [-0.5]  # A0's second move
    assert torch.all(out[1] == 1.5) and torch.all(out[2] == 0.5) and torch.all(out[3] == -0.5)
    assert trainer._metrics["train"]["failure_credit/localized"] == [0.5]  # 1 of the 2 negative ones


def test_failure_credit__a_stage_trains_with_it(tmp_path, finished_run):
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style

    items = _instances(4, seed=5, wait_ratio=0.0)
    training = Training(steps=2, prompts_per_step=2, generations=4, max_completion_length=24, failure_credit=True,
                        greedy_member=True)
    info = grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
                      get_style(finished_run.prompt_style), tmp_path / "stage", seed=0)
    assert info.steps == 2 and (tmp_path / "stage" / "model" / "config.json").exists()
    assert 0.0 <= info.figures["failure_credit_localized"] <= 1.0
    with pytest.raises(ConfigError, match="training.failure_credit"):
        Training(failure_credit="yes").validate()


def test_run__a_stage_the_sibling_arm_trained_on_the_same_configs_is_copied_not_trained(tmp_path):
    from curriculum.loop.sharing import share_warm_start

    first = small_config(tmp_path, "first", **{"engineer.spec": "fixed", "arm": "first", "warm_start.enabled": False})
    Run(first, log=lambda message: None).execute()
    lines: list[str] = []
    agrees = small_config(tmp_path, "agrees", **{"engineer.spec": "fixed", "arm": "agrees",
                                                  "warm_start.enabled": False})
    share_warm_start(first.run_dir, agrees.run_dir)
    Run(agrees, log=lines.append, siblings=[first]).execute()
    assert [line for line in lines if "shared with" in line] == [
        f"agrees: stage {n} shared with first (the same settings, warm start and stage configs: the same training)"
        for n in (1, 2)]
    for stage in ("stage-01", "stage-02"):
        record = json.loads((agrees.run_dir / stage / "stage.json").read_text())
        assert record["shared_from"] == str(first.run_dir)
        assert ((agrees.run_dir / stage / "model" / "model.safetensors").read_bytes()
                == (first.run_dir / stage / "model" / "model.safetensors").read_bytes())
    # another setting of training: nothing is shared
    other = small_config(tmp_path, "other", **{"engineer.spec": "fixed", "arm": "other", "warm_start.enabled": False,
                                              "training.learning_rate": 1e-4})
    lines.clear()
    Run(other, log=lines.append, siblings=[first, agrees]).execute()
    assert not [line for line in lines if "shared with" in line]
    assert "shared_from" not in json.loads((other.run_dir / "stage-02" / "stage.json").read_text())
    # a different initial_config whose stage 1 (an engineer's plan) is the sibling's: the same experiment, shared;
    # with a warm start trained on initial_config (no warm-start config of its own) it is not
    from curriculum.loop.sharing import share_stage

    stage1 = StageConfig.from_dict(json.loads((first.run_dir / "stage-01" / "stage.json").read_text())["config"])
    planned = small_config(tmp_path, "planned", **{"engineer.spec": "gap", "arm": "planned",
                                                   "warm_start.enabled": False, "initial_config.sizes.3.wait_ratio": 0.0})
    assert planned.initial_config != first.initial_config
    assert share_stage(first, planned, 1, stage1)
    assert (planned.run_dir / "stage-01" / "model" / "model.safetensors").exists()
    own = {"warm_start.enabled": True, "warm_start.config": {}}
    warm = small_config(tmp_path, "warm", **{"arm": "warm", **own, "initial_config.sizes.3.wait_ratio": 0.0})
    assert not share_stage(first.with_overrides(**own), warm, 1, stage1)


def test_frontier_stages_script__reads_every_stage_of_a_run_folder(finished_run):
    import importlib.util

    path = ROOT / "docs" / "results" / "small-rft" / "frontier_stages.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = module.frontier_figures(finished_run.run_dir)
    metrics = [json.loads(line) for line in (finished_run.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [stage["valid"] for stage in figures["stages"]] == [line["valid_rate"] for line in metrics]
    assert figures["seed"] == finished_run.seed and set(figures["warm_by_size"]) <= {"3", "4", "5", "6"}
    assert all(abs(sum(stage["sizes"].values()) - 1.0) < 1e-9 for stage in figures["stages"])
    # the split by makespan adds up to the per-size figures, and pooling one run gives that run's split
    last = json.loads((finished_run.run_dir / "stage-02" / "summary.json").read_text())["by_size"]
    for side, group in last.items():
        cells = [cell for key, cell in figures["last_by_length"].items() if key.split(":")[0] == side]
        assert [sum(c[0] for c in cells), sum(c[1] for c in cells)] == [group["valid"], group["episodes"]]
    assert module.pooled({"one": figures}) == {figures["arm"]: {"warm": figures["warm_by_length"],
                                                                "last": figures["last_by_length"]}}


def test_lookahead__tries_every_candidate_keeps_the_best_and_trains_it_once(tmp_path):
    # The ceiling arm at a reduced budget: after stage 1 it trains stage 2 once per distinct candidate (fixed's config
    # and every config-writing engineer's proposal), keeps the best on the evidence set, records every candidate, and
    # stage 2 is the winning trial's checkpoint (copied, not trained again); a rerun reads everything back.
    from curriculum.training.run import Run, candidate_folder
    from curriculum.loop.sets import training_seed
    from engineer.engineers import candidate_engineers
    from simulator.config import StageConfig

    config = small_config(tmp_path, "look", **{"engineer.spec": "lookahead", "initial_config.samples": 48})
    Run(config).execute()
    decision = json.loads((config.run_dir / "stage-01" / "decision.json").read_text())
    rows = decision["details"]["candidates"]
    assert rows[0]["proposed_by"][0] == "fixed"
    assert sorted(name for row in rows for name in row["proposed_by"]) == sorted(candidate_engineers())
    best = max(row["evidence_valid_rate"] for row in rows)
    winner = next(row for row in rows if row["evidence_valid_rate"] == best)
    assert decision["config"] == winner["config"] and decision["reason"].startswith("lookahead: the best of")
    stage_two = config.run_dir / "stage-02"
    trial = candidate_folder(stage_two, StageConfig.from_dict({**winner["config"],
                                                               "seed": training_seed(config.seed, 2)}))
    assert (trial / "model" / "model.safetensors").read_bytes() == (stage_two / "model" / "model.safetensors").read_bytes()
    assert json.loads((stage_two / "summary.json").read_text())["valid_rate"] == pytest.approx(best)
    assert len(list((stage_two / "candidates").iterdir())) == len(rows)
    last = json.loads((config.run_dir / "stage-02" / "decision.json").read_text())
    assert "candidates" not in last["details"] and "no trial" in last["reason"]  # no stage 3 to try
    Run(config).execute()  # resumed: nothing trained again
    assert len(list((stage_two / "candidates").iterdir())) == len(rows)

    # The ceiling page's second_evidence.py: every trial scored again on a fresh draw of the evidence distribution
    # that holds no test, evidence, stage or trial instance.
    import importlib.util

    from curriculum.loop.sets import RunSets

    path = ROOT / "docs" / "results" / "ceiling" / "second_evidence.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    second = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(second)
    sets = RunSets.build(config.evaluation_suite, config.evidence_config, config.validation.samples)
    trial_keys = {item.instance.content_key() for item in sets.training(
        StageConfig.from_dict({**winner["config"], "seed": training_seed(config.seed, 2)})).instances}
    _, _, drawn, items = second.second_draw(config.run_dir, 50)
    keys = {item.instance.content_key() for item in items}
    assert keys and not keys & (sets.test | sets.evidence_keys | trial_keys)
    evidence = config.evidence_config
    second.DRAW_SEED = evidence.seed  # drawn with the evidence set's own seed: the evidence set is drawn again
    _, _, drawn, items = second.second_draw(config.run_dir, -(-evidence.samples // len(evidence.sizes)))
    drawn_keys = {item.instance.content_key() for item in drawn}
    assert drawn_keys & sets.evidence_keys and not {item.instance.content_key() for item in items} & sets.evidence_keys
    out = tmp_path / "second.json"
    assert second.main([str(config.run_dir), "--per-side", "6", "--json", str(out)]) == 0
    (boundary,) = json.loads(out.read_text())["runs"][0]["boundaries"]
    assert [row["evidence"] for row in boundary["candidates"]] == [row["evidence_valid_rate"] for row in rows]
    assert boundary["winner_lead_evidence"] == pytest.approx(best - rows[0]["evidence_valid_rate"])
    assert all(0 <= row["second_draw"] <= 1 for row in boundary["candidates"])

    # Killed while stage 1's decision was still trying candidates: stage 1 has no record yet and stage 2's folder
    # holds only trials. That is no gap: the rerun decides stage 1 again, reading the finished trials back and
    # training only the one that was missing.
    for part in ("stage.json", "decision.json"):
        (config.run_dir / "stage-01" / part).unlink()
    for path in stage_two.iterdir():
        if path.name != "candidates":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    kept = {path.name: (path / "model" / "model.safetensors").stat().st_mtime_ns
            for path in (stage_two / "candidates").iterdir()}
    shutil.rmtree(trial)
    Run(config).execute()
    again = json.loads((config.run_dir / "stage-01" / "decision.json").read_text())
    retrained = next(index for index, row in enumerate(rows) if row is winner)
    assert [{**row, "evidence_valid_rate": None} if index == retrained else row
            for index, row in enumerate(again["details"]["candidates"])] \
        == [{**row, "evidence_valid_rate": None} if index == retrained else row for index, row in enumerate(rows)]
    assert {path.name: (path / "model" / "model.safetensors").stat().st_mtime_ns
            for path in (stage_two / "candidates").iterdir() if path.name != trial.name} \
        == {name: stamp for name, stamp in kept.items() if name != trial.name}
    assert (trial / "model" / "model.safetensors").exists() and (stage_two / "stage.json").exists()


def test_trainer_names__declared_once_for_the_config_the_signal_and_the_registry():
    from curriculum.config import Training
    from curriculum.training.trainers import STAGE_TRAINERS
    from policy.signal import SIGNAL_TRAINERS, TRAINERS
    from simulator.fields import field_rows

    (row,) = [row for row in field_rows(Training) if row.name == "trainer"]
    assert tuple(STAGE_TRAINERS) == TRAINERS == tuple(SIGNAL_TRAINERS)
    assert all(name in str(row.allowed) for name in TRAINERS)
