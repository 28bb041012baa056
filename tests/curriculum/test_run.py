"""Curriculum runs end to end with the embedded tiny model (``curriculum/training/run.py``): records, resume after
SIGKILL, the engineers at the stage boundaries and their fallbacks, stages shared between arms, and the report and
results scripts that read a run folder."""

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

from curriculum.reports.report import compare_table, load_run, render_report, write_plots
from curriculum.training.run import Run
from simulator.config import StageConfig
from simulator.errors import ConfigError
from tests.small_run import SMALL, small_config

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


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
