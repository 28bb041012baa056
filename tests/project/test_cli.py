"""Subprocess smoke tests of every mapf-lake command with tiny arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import mapf_lake as run


def test_cli__help_lists_commands():
    out = run("--help").stdout
    for command in ("gen", "solve", "demo", "bench"):
        assert command in out


def test_cli_engineer__help_names_every_registered_engineer():
    from engineer.engineers import ENGINEERS

    out = " ".join(run("engineer", "--help").stdout.split())
    named = out.split("Engineers:", 1)[1].split(";", 1)[0]
    assert [kind for kind in ENGINEERS if kind not in named] == []


def test_cli_gen__prints_instances_and_writes_jsonl(tmp_path):
    out = run("gen", "--size", "4", "--agents", "2", "--n", "3", "--seed", "1").stdout
    assert out.count("optimal plan:") == 3 and "checksum" in out
    target = tmp_path / "x.jsonl"
    run("gen", "--size", "5", "6", "--agents", "2", "3", "--n", "4", "--out", str(target))
    lines = target.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["optimal_makespan"] > 0 for line in lines)


def test_cli_gen__makespan_bounds_keep_the_plans_in_the_band_and_a_bad_bound_is_one_line(tmp_path):
    target = tmp_path / "near.jsonl"
    out = run("gen", "--size", "6", "--n", "6", "--wait-ratio", "0", "--min-makespan", "2", "--max-makespan", "3",
              "--out", str(target)).stdout
    assert "outside the makespan band" in out
    assert all(2 <= json.loads(line)["optimal_makespan"] <= 3 for line in target.read_text().splitlines())
    bad = run("gen", "--size", "4", "--min-makespan", "5", "--max-makespan", "2", check=False)
    assert bad.returncode == 2 and "sizes.4.max_makespan" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("source, flags, named", [
    ("--config", ["--min-makespan", "6", "--max-makespan", "6"], "--min-makespan, --max-makespan"),
    ("--config", ["--size", "4"], "--size"),
    ("--config", ["--agents", "3"], "--agents"),
    ("--config", ["--holes", "0.1"], "--holes"),
    ("--config", ["--wait-ratio", "0", "--slip", "0.1"], "--wait-ratio, --slip"),
    ("--suite", ["--size", "4"], "--size"),
])
def test_cli_gen__map_flags_beside_a_config_or_suite_are_refused_not_ignored(tmp_path, source, flags, named):
    config = tmp_path / "stage.yaml"
    config.write_text("agents: 2\nsamples: 2\nseed: 4\nsizes:\n  5: {data_ratio: 1.0, hole_ratio: 0.2, wait_ratio: 0}\n")
    target = str(config) if source == "--config" else "paper-quick"
    result = run("gen", source, target, *flags, "--quiet", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert named in result.stderr and source in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_gen__config_file_and_schema(tmp_path):
    config = tmp_path / "stage.yaml"
    config.write_text("agents: 2\nsamples: 3\nseed: 4\nsizes:\n  5: {data_ratio: 1.0, hole_ratio: 0.2, wait_ratio: 0.5}\n")
    assert "size 5: 3 instances" in run("gen", "--config", str(config), "--quiet").stdout
    schema = json.loads(run("gen", "--schema").stdout)
    assert "sizes" in schema["properties"]


def test_cli_gen__impossible_config_is_a_clear_error():
    result = run("gen", "--size", "3", "--agents", "5", "--holes", "0.5", check=False)
    assert result.returncode == 2
    assert "sizes.3.hole_ratio" in result.stderr and "Traceback" not in result.stderr


def test_cli_solve__text_in_plan_out():
    out = run("solve", "-", stdin="A0 . H\n. . G0\nG1 . A1\n").stdout
    assert "optimal makespan 3" in out and "judge: valid" in out


def test_cli_solve__unsolvable_corridor_exits_1():
    # a dead-end corridor: agent 1 must get past agent 0, which parks on its goal for good
    corridor = json.dumps({"grid": [[0, 0, 0]], "starts": [[0, 0], [0, 1]], "goals": [[0, 1], [0, 0]]})
    result = run("solve", "--json", "-", stdin=corridor, check=False)
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["status"] == "unsolvable" and data["reason"]


def test_cli_solve__garbage_input_is_a_clear_error():
    result = run("solve", "-", stdin="A0 Q7\n", check=False)
    assert result.returncode == 2 and "token 2" in result.stderr


def test_cli_solve__documented_maxima_finish_within_the_time_limit_with_the_wait_label():
    """256x256, 64 agents: the solver took 0.4 s and the needs_wait search after it ran for minutes, deaf to
    --time-limit, --max-nodes and Ctrl-C; the label now comes from the optimal sum of costs."""
    import numpy as np

    rng = np.random.default_rng(0)
    grid = (rng.random((256, 256)) < 0.1).astype(int)
    free = np.argwhere(grid == 0)
    cells = free[rng.choice(len(free), 128, replace=False)].tolist()
    instance = json.dumps({"grid": grid.tolist(), "starts": cells[:64], "goals": cells[64:]})
    result = run("solve", "--json", "--time-limit", "20", "-", stdin=instance, check=False, timeout=60)
    data = json.loads(result.stdout)
    assert result.returncode == (0 if data["status"] == "solved" else 1), result.stderr
    if data["status"] == "solved":
        assert isinstance(data["needs_wait"], bool)


def test_cli_gen__crowded_maps_give_instances_or_one_line_not_a_traceback():
    """gen --size 32 --agents 16 --n 3 ended in needs_wait's RuntimeError (search and fallback solver both over
    budget); such a candidate is now skipped as over budget, like one the solver cannot certify."""
    result = run("gen", "--size", "32", "--agents", "16", "--n", "3", check=False)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0 and result.stdout.count("optimal plan:") == 3


def test_cli_demo__prints_the_oracle_table():
    out = run("demo").stdout
    assert "100/100" in out and "10x10" in out


@pytest.mark.parametrize("target", ["sim"])
def test_cli_bench__quick_json(target):
    data = json.loads(run("bench", target, "--quick", "--json").stdout)
    assert data["step_4x8x8"]["agent_steps_per_s"] > 0
    assert data["cold_start"]["import_and_first_call_s"] > 0


def test_cli_rollout_and_summarize__write_and_read_replays(tmp_path):
    out = run("rollout", "--policy", "greedy", "--size", "5", "--agents", "2", "--n", "30", "--seed", "3",
              "--out", str(tmp_path)).stdout
    assert "episodes 30" in out
    summary = json.loads(run("summarize", str(tmp_path), "--json").stdout)
    assert summary["episodes"] == 30
    assert "examples of failures" in run("summarize", str(tmp_path)).stdout or summary["valid"] == 30


def test_cli_summarize__corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.mlr"
    bad.write_bytes(b"MLREPLAY\x01\x00\x00\x00garbage")
    result = run("summarize", str(bad), check=False)
    assert result.returncode == 2 and "bad.mlr" in result.stderr and "Traceback" not in result.stderr


def _one_step_short_replay(path: Path) -> Path:
    """A replay of one episode: one agent that stopped after 1 step, one cell short of its goal."""
    import numpy as np

    from replays.types import Episode, Outcome, ReplayHeader
    from replays.writer import write_replay
    from simulator import constants as C
    from simulator.types import Instance

    episode = Episode(instance=Instance(grid=np.zeros((1, 3), np.int8), starts=[[0, 0]], goals=[[0, 2]]),
                      labels=None, plan=None, parse_error=None, positions=np.array([[[0, 0]], [[0, 1]]], np.int32),
                      events=np.zeros((1, 1), np.int8),
                      outcome=Outcome(False, C.GOAL_NOT_REACHED, 1, 0, -1, -1, 0, optimal=False))
    write_replay(path, ReplayHeader.new("run", 0, "validation", {"name": "hand"}), [episode])
    return path


def test_cli_summarize__each_file_counts_once_and_one_is_singular(tmp_path):
    replay = _one_step_short_replay(tmp_path / "one.mlr")
    for paths in ([replay, replay], [replay, tmp_path], [tmp_path, str(tmp_path) + "/."]):
        summary = json.loads(run("summarize", *map(str, paths), "--json").stdout)
        assert summary["episodes"] == 1, paths
    text = run("summarize", str(replay)).stdout
    assert "1x1: 1 episode," in text and "the plan ended after 1 step with agent 0" in text, text
    assert "1x3, 1 agent (one.mlr#0)" in text


@pytest.mark.parametrize("make, flags, names", [
    ("empty", [], "no replay files"),
    ("other", [], "no replay files"),  # a folder of other files
    ("replay", ["--exemplars", "-1"], "--exemplars"),
])
def test_cli_summarize__an_empty_folder_or_negative_exemplars_is_exit_2(tmp_path, make, flags, names):
    folder = tmp_path / "replays"
    folder.mkdir()
    if make == "other":
        (folder / "notes.txt").write_text("x")
    if make == "replay":
        _one_step_short_replay(folder / "one.mlr")
    result = run("summarize", str(folder), *flags, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert names in result.stderr and len(result.stderr.strip().splitlines()) == 1
    if make != "replay":
        assert str(folder) in result.stderr


def test_cli_eval__quick_oracle_table(tmp_path):
    out = run("eval", "--policy", "oracle", "--suite", "train-2agent", "--quick", "--out", str(tmp_path)).stdout
    assert "100/100" in out and "mean" in out


def test_cli_bench_replay__quick_json():
    data = json.loads(run("bench", "replay", "--quick", "--json").stdout)
    assert data["replay"]["bytes_per_episode"] > 0 and data["summary"]["episodes"] == 10_000


def test_cli_bench_gen__quick_json():
    data = json.loads(run("bench", "gen", "--quick", "--json").stdout)
    assert data["generation_2agents_3to10_holes30"]["instances_per_s"] > 0
    peer = data["solver_vs_pymapf_4agents_8x8"]
    assert peer["disagreements"] == [] and peer["compared_equal"] > 0


def test_cli_bench_reward__quick():
    data = json.loads(run("bench", "reward", "--quick", "--json").stdout)
    assert data["completions"] == 512 and data["best_ms"] > 0 and 0.5 < data["reward_mean"] < 1.6


def test_summarize_json__non_finite_figures_become_null():
    from replays.cli import _finite

    data = {"a": float("nan"), "b": [1.0, float("inf"), {"c": -float("inf")}], "d": "nan", "e": 3}
    assert _finite(data) == {"a": None, "b": [1.0, None, {"c": None}], "d": "nan", "e": 3}
    json.dumps(_finite(data), allow_nan=False)  # valid JSON


@pytest.mark.parametrize("args, usage", [
    (["train", "--bogus"], "mapf-lake train"),
    (["bench", "sim", "--bogus"], "mapf-lake bench sim"),
    (["gen", "--size", "3", "--n", "1", "--bogus", "x"], "mapf-lake gen"),
])
def test_cli__unknown_flag_names_the_subcommand_usage(args, usage):
    result = run(*args, check=False)
    assert result.returncode == 2 and f"{usage}: error: unrecognized arguments" in result.stderr
    assert result.stderr.splitlines()[0].startswith(f"usage: {usage}")


@pytest.mark.parametrize("args", [
    ["gen", "--size", "3", "--n", "2", "--out", "{file}/x.jsonl"],
    ["gen", "--size", "3", "--n", "2", "--out", "{folder}"],
    ["gen", "--size", "3", "--n", "2", "--out", "{file}/deeper/x.jsonl"],
    ["model", "init", "tiny", "--out", "{file}"],
])
def test_cli__output_path_that_cannot_be_written_is_one_line_exit_2(tmp_path, args):
    (tmp_path / "a-file").write_text("keep me")
    (tmp_path / "a-folder").mkdir()
    args = [a.format(file=tmp_path / "a-file", folder=tmp_path / "a-folder") for a in args]
    result = run(*args, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-800:]
    assert result.stderr.strip().splitlines()[-1].startswith("mapf-lake: error: ")
    assert ".tmp" not in result.stderr and (tmp_path / "a-file").read_text() == "keep me"
    assert list((tmp_path / "a-folder").iterdir()) == []


@pytest.mark.parametrize("content", ['{"a":' * 100_000 + "1" + "}" * 100_000, ". A\u00b2\nG\u00b2 .\n", "A\u0661 .\n. G\u0661\n"])
def test_cli_solve__deep_json_and_non_ascii_digits_are_one_line_exit_2(tmp_path, content):
    path = tmp_path / "instance.txt"
    path.write_text(content, encoding="utf-8")
    result = run("solve", str(path), check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-800:]
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_gen__agents_counts_a_lone_agent_s_waits_and_n_with_a_config(tmp_path):
    bad = run("gen", "--agents", "2", "3", "9", "--n", "3", check=False)
    assert bad.returncode == 2 and "--agents = [2, 3, 9]" in bad.stderr  # not silently [2, 3]
    mixed = run("gen", "--agents", "1", "2", "--size", "4", "--n", "10", "--out", str(tmp_path / "m.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert mixed.returncode == 0 and all(len(r["starts"]) >= 2 for r in rows if r["needs_wait"])
    too_many = run("gen", "--agents", "1", "2", "--size", "4", "--n", "10", "--wait-ratio", "0.9", check=False)
    assert too_many.returncode == 2 and "a lone agent never needs a wait" in too_many.stderr
    config = tmp_path / "c.yaml"
    config.write_text("agents: 2\nsamples: 10\nsizes: {4: {data_ratio: 1, hole_ratio: 0.1, wait_ratio: 0}}\n")
    run("gen", "--config", str(config), "--n", "3", "--out", str(tmp_path / "c.jsonl"))
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 3  # --n overrides the file's samples


def test_cli_eval__sampling_flags_reach_the_replay_header_and_bad_ones_are_one_line(tmp_path):
    from replays.reader import ReplayReader
    from tests.model_fixtures import tiny_model_dir

    run("eval", "--policy", f"hf:{tiny_model_dir()}", "--style", "compact", "--suite", "train-2agent", "--quick",
        "--max-new-tokens", "8", "--temperature", "0.6", "--top-p", "0.95", "--top-k", "20", "--out", str(tmp_path))
    replay = sorted(tmp_path.glob("*.mlr"))[0]
    with ReplayReader(replay) as reader:
        sampling = reader.header.policy["sampling"]
    assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.6, 0.95, 20)
    bad = run("eval", "--policy", f"hf:{tiny_model_dir()}", "--quick", "--top-p", "0", "--out", str(tmp_path / "x"),
              check=False, timeout=120)
    assert bad.returncode == 2 and "sampling.top_p" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("first, second", [
    (["--size", "4", "--n", "3"], ["--size", "5", "--n", "3"]),
    (["--size", "4", "--n", "3"], ["--size", "4", "--n", "4"]),
    (["--size", "4", "--n", "3"], ["--size", "4", "--n", "3", "--agents", "3"]),
    (["--size", "4", "--n", "3"], ["--size", "4", "--n", "3", "--holes", "0.1"]),
])
def test_cli_rollout__other_settings_write_another_file(tmp_path, first, second):
    run("rollout", "--policy", "greedy", "--out", str(tmp_path), *first)
    run("rollout", "--policy", "greedy", "--out", str(tmp_path), *second)
    files = sorted(tmp_path.glob("*.mlr"))
    assert len(files) == 2, files


def test_cli_rollout__the_same_rollout_again_is_refused_not_replaced(tmp_path):
    arguments = ("rollout", "--policy", "random", "--size", "4", "--n", "3", "--out", str(tmp_path))
    run(*arguments)
    (written,) = tmp_path.glob("*.mlr")
    before = written.read_bytes()
    again = run(*arguments, check=False)
    lines = again.stderr.strip().splitlines()
    assert again.returncode == 2 and len(lines) == 1 and written.name in lines[0] and "--out" in lines[0], again.stderr
    assert written.read_bytes() == before


def test_cli_solve__reads_what_gen_prints_from_a_pipe_and_a_file(tmp_path):
    printed = run("gen", "--size", "3", "--agents", "2", "--n", "1", "--seed", "1").stdout
    assert printed.startswith("#") and "optimal plan:" in printed
    piped = json.loads(run("solve", "-", "--json", stdin=printed).stdout)
    (tmp_path / "one.txt").write_text(printed)
    from_file = json.loads(run("solve", str(tmp_path / "one.txt"), "--json").stdout)
    makespan = int(printed.split("optimal makespan ")[1].split(",")[0])
    assert piped["status"] == from_file["status"] == "solved" and piped["makespan"] == makespan


def test_cli_solve__gen_text_of_several_instances_is_one_line_saying_how_many():
    printed = run("gen", "--size", "3", "--agents", "2", "--n", "2", "--seed", "1").stdout
    result = run("solve", "-", stdin=printed, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "2 instances" in lines[0], result.stderr
