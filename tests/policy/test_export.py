"""Exports and the standalone scorer: the same verdicts as the GRPO reward, every format read back, the verl
and OpenRLHF layouts and entry points, no torch on the scoring path, bad records refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy.export import layout_row, write_rows
from policy.prompts import PROMPT_STYLES, get_style
from policy.rewards import REWARDS, reward_columns
from policy.score import check_record, compute_score, make_record, score, score_batch
from policy.scripted import make_scripted
from simulator.config import StageConfig
from simulator.env import default_horizon
from simulator.errors import ConfigError
from simulator.generator import generate

ROOT = Path(__file__).resolve().parents[2]
CONFIG = StageConfig.from_dict({"agents": [2, 3], "samples": 40, "seed": 5, "sizes": {
    3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
    5: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.5}}})


def _answers(items, style):
    """Per instance: the reference, a greedy and a random scripted answer, garbage and an empty string."""
    greedy = make_scripted("greedy").plans(items, seed=1)
    noise = make_scripted("random").plans(items, seed=2)
    out = []
    for item, g, r in zip(items, greedy, noise):
        out += [(item, style.answer(item.plan)), (item, style.answer(g)), (item, style.answer(r)),
                (item, "no plan here"), (item, "")]
    return out


@pytest.mark.parametrize("style_name", ["natural", "compact-nb"])
def test_score__verdicts_equal_the_grpo_reward_on_the_same_inputs(items, style_name):
    style = get_style(style_name)
    pairs = _answers(items, style)
    records = [make_record(item, style, "config:test") for item, _ in pairs]
    verdicts = score_batch(records, [answer for _, answer in pairs])
    columns = {key: [reward_columns(item.instance, item.optimal_makespan, default_horizon(item.instance))[key]
                     for item, _ in pairs] for key in ("instance", "optimal_makespan", "horizon")}
    completions = [answer for _, answer in pairs]
    for name in ("format", "valid", "optimal", "progress"):
        assert [v[name] for v in verdicts] == pytest.approx(REWARDS[name](completions=completions, **columns)), name
    assert [v["reward"] for v in verdicts] == pytest.approx(REWARDS["default"](completions=completions, **columns))
    assert all(v["valid"] == 1 and v["optimal"] == 1 and v["category"] == "none" for v in verdicts[::5])  # reference
    assert {v["category"] for v in verdicts[3::5]} == {"parse_error"} and all(v["makespan"] is None for v in verdicts[3::5])
    assert all((v["category"] == "none") == bool(v["valid"]) for v in verdicts)
    reference = verdicts[0]
    assert reference["makespan"] == items[0].optimal_makespan and reference["sum_of_costs"] >= items[0].optimal_sum_of_costs


def test_score__needs_no_torch():
    code = ("import sys, json; from policy.score import score; "
            "r = json.loads(sys.stdin.readline()); print(score(r, r['reference'])['valid']); "
            "print(sorted(m for m in ('torch', 'transformers', 'trl', 'datasets') if m in sys.modules))")
    item = generate(CONFIG).instances[0]
    record = json.dumps(make_record(item, get_style("natural"), "config:test"))
    result = subprocess.run([sys.executable, "-c", code], input=record + "\n", cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["1", "[]"]


@pytest.mark.parametrize("bad, field", [
    ("not json", "record"), ([1, 2], "record"), ({"format": "other", "version": 1}, "record.format"),
    ({"format": "mapf-lake-record", "version": 2}, "record.format"),
    ({"format": "mapf-lake-record", "version": 1, "labels": {}, "horizon": 3}, "record.instance"),
    ({"format": "mapf-lake-record", "version": 1, "instance": {}, "horizon": 3, "labels": {"size": 3}}, "record.labels"),
])
def test_check_record__bad_records_are_config_errors_naming_the_field(bad, field):
    with pytest.raises(ConfigError) as error:
        check_record(bad)
    assert error.value.field == field


def test_score_batch__lengths_must_match(items):
    record = make_record(items[0], get_style("natural"), "x")
    with pytest.raises(ConfigError, match="completions"):
        score_batch([record, record], ["a"])


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "hf"])
def test_write_rows__every_format_reads_back_and_scores(tmp_path, items, fmt):
    style = get_style("natural")
    records = [make_record(item, style, "config:test") for item in items]
    out = tmp_path / ("rows.parquet" if fmt == "parquet" else "rows.jsonl" if fmt == "jsonl" else "rows")
    assert write_rows(iter(records), out, fmt) == len(records)
    if fmt == "jsonl":
        back = [json.loads(line) for line in out.read_text().splitlines()]
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        back = pq.read_table(out).to_pylist()
    else:
        from datasets import load_from_disk

        back = list(load_from_disk(str(out)))
    assert back == records
    assert [v["optimal"] for v in score_batch(back, [r["reference"] for r in back])] == [1] * len(back)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary left behind
    if fmt == "hf":
        with pytest.raises(ConfigError, match="--out"):
            write_rows(iter(records), out, fmt)  # an existing export is never overwritten half-way


def test_verl_layout__rows_and_compute_score(tmp_path, items):
    import pyarrow.parquet as pq

    style = get_style("compact-nb")
    rows = [layout_row(make_record(item, style, "config:test"), "verl", i, "train") for i, item in enumerate(items)]
    write_rows(iter(rows), tmp_path / "train.parquet", "parquet")
    table = pq.read_table(tmp_path / "train.parquet")
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    row = table.to_pylist()[3]
    assert row["data_source"] == "mapf-lake" and row["ability"] == "planning"
    assert row["prompt"] == [{"role": "user", "content": style.prompt(items[3].instance)}]  # a text style as one turn
    assert row["reward_model"]["style"] == "rule" and row["extra_info"]["index"] == 3
    truth = row["reward_model"]["ground_truth"]
    assert compute_score(row["data_source"], style.answer(items[3].plan), truth, row["extra_info"]) == pytest.approx(1.6)
    assert compute_score(row["data_source"], "A0 X", truth) == 0.0


def test_openrlhf_layout__reward_func_scores_the_response_after_the_prompt(items):
    from policy.openrlhf_reward import reward_func

    style = get_style("compact-nb")
    rows = [layout_row(make_record(item, style, "config:test"), "openrlhf", i, "train") for i, item in enumerate(items[:4])]
    prompts = [row["prompt"] for row in rows]
    answers = [style.answer(items[0].plan), "garbage", style.answer(items[2].plan), ""]
    out = reward_func([p + a for p, a in zip(prompts, answers)], prompts, [row["label"] for row in rows])
    assert out["rewards"].tolist() == pytest.approx([1.6, 0.0, 1.6, 0.0])
    assert out["scores"].tolist() == [1.0, 0.0, 1.0, 0.0] and set(out["extra_logs"]) == {"valid", "optimal"}


CHAT_TEMPLATES = {
    "chatml": ("<|im_start|>system\nYou plan.<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"),
    "llama3": ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n",
               "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"),
}


@pytest.mark.parametrize("template", sorted(CHAT_TEMPLATES))
@pytest.mark.parametrize("style_name", sorted(PROMPT_STYLES))
def test_openrlhf_reward__a_chat_template_around_the_prompt_scores_the_response_alone(items, style_name, template):
    """The query wraps the prompt in a chat template: the whole query was scored, so an empty response got 0.1
    (the natural prompt's own example answer parsed) and a right one 0 (compact prompts)."""
    from policy.openrlhf_reward import reward_func

    style = get_style(style_name)
    before, after = CHAT_TEMPLATES[template]
    record = make_record(items[0], style, "config:test")
    prompt = record["prompt"]
    text = prompt if isinstance(prompt, str) else "\n".join(message["content"] for message in prompt)
    label = layout_row(record, "openrlhf", 0, "train")["label"]
    answers = ["", style.answer(items[0].plan), "<think>\nfirst agent 0, then 1</think>\n" + style.answer(items[0].plan)]
    for prompts in ([text] * 3, [prompt] * 3):
        out = reward_func([before + text + after + answer for answer in answers], prompts, [label] * 3)
        assert out["rewards"].tolist() == pytest.approx([0.0, 1.6, 1.6])
    with pytest.raises(ConfigError, match=r"queries\[0\].*prompt's text was not found"):
        reward_func(["just an answer"], [text], [label])


def test_cli_export__suite_to_parquet_and_bad_input_is_one_line(tmp_path):
    out = tmp_path / "quick.parquet"
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "export", "--suite", "train-2agent-quick",
                             "--layout", "verl", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "wrote 80 rows (verl, natural, parquet)" in result.stdout and out.stat().st_size > 1000
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [")
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "export", "--config", str(bad), "--out",
                             str(tmp_path / "x.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr and not (tmp_path / "x.jsonl").exists()


def test_reasoning_gym__registered_dataset_scores_with_the_judge_and_its_curriculum_drives_the_config():
    reasoning_gym = pytest.importorskip("reasoning_gym")
    import policy.reasoning_gym_task as task

    data = reasoning_gym.create_dataset("mapf_frozenlake", size=6, seed=3, min_size=3, max_size=5, max_agents=3)
    entries = [data[i] for i in range(6)]
    assert [e["question"] for e in entries] == [data[i]["question"] for i in range(6)]  # same seed, same entries
    for entry in entries:
        difficulty = entry["metadata"]["difficulty"]
        assert 3 <= difficulty["size"] <= 5 and 2 <= difficulty["agents"] <= 3
        assert data.score_answer(entry["answer"], entry) == 1.0  # the reference is optimal
        assert data.score_answer("I give up", entry) == 0.0 and data.score_answer(None, entry) == 0.0
        assert score(entry["metadata"]["record"], entry["answer"])["category"] == "none"
    curriculum = task.MapfFrozenLakeCurriculum()
    first = curriculum.generate_configuration({"seed": 1, "size": 4})
    curriculum.increment_attr_level("max_size")
    curriculum.increment_attr_level("agents")
    harder = curriculum.generate_configuration({"seed": 1, "size": 4})
    assert (first.max_size, first.max_agents) == (3, 1) and (harder.max_size, harder.max_agents) == (4, 2)
    lone = task.MapfFrozenLakeDataset(first)
    assert lone.score_answer(lone[0]["answer"], lone[0]) == 1.0  # one agent: no wait asked for
    with pytest.raises(ConfigError, match="min_size"):
        reasoning_gym.create_dataset("mapf_frozenlake", size=2, seed=1, min_size=7, max_size=5)


def test_bench_export__scorer_matches_the_reward_path_and_every_format_is_measured():
    from curriculum.benches.export import format_export_bench, run_export_bench

    figures = run_export_bench(quick=True)
    assert figures["scorer"]["same_rewards"] and figures["instances"] == 210
    assert set(figures["formats"]) == {"jsonl", "parquet", "hf"}
    assert all(row["rows"] == 210 and row["megabytes"] > 0 for row in figures["formats"].values())
    assert "instances/s" in format_export_bench(figures)
