"""Subprocess smoke tests of users' own maps and sets: ``gen --map/--scen``, ``play --map/--scen`` refusals,
``eval --instances`` and ``eval --config``."""

from __future__ import annotations

import json
from functools import partial

from simulator.generator import read_jsonl
from tests.cli_runner import ROOT, mapf_lake

MOVINGAI = ROOT / "tests" / "fixtures" / "movingai"
LAKE_MAP, LAKE_SCEN = str(MOVINGAI / "lake-6x4.map"), str(MOVINGAI / "lake-6x4.scen")

run = partial(mapf_lake, without_env=("DISPLAY",))


def test_cli_gen__movingai_map_and_scen_print_and_write_certified_instances(tmp_path):
    printed = run("gen", "--map", LAKE_MAP, "--scen", LAKE_SCEN).stdout
    assert "optimal makespan 9" in printed and "imported 2 of 5 instances" in printed
    assert "skipped instance 3 (from line 8): unsolvable" in printed
    out = tmp_path / "lake.jsonl"
    written = run("gen", "--map", LAKE_MAP, "--scen", LAKE_SCEN, "--agents", "1", "--out", str(out)).stdout
    assert "imported 9 of 11 instances" in written and f"written to {out}" in written
    items = read_jsonl(out)
    # line 6 (instance 4) starts on a tree, line 8 (instance 6) has its goal in a walled-off corner
    assert [item.index for item in items] == [0, 1, 2, 3, 5, 7, 8, 9, 10]
    assert all(item.instance.n_agents == 1 and item.size == 6 for item in items)


def test_cli_gen__movingai_refusals_are_one_line_exit_2(tmp_path):
    for args, words in (
        (("--map", LAKE_MAP), "--scen = None is not allowed"),
        (("--scen", LAKE_SCEN), "--map = None is not allowed"),
        (("--map", LAKE_MAP, "--scen", LAKE_SCEN, "--agents", "2", "3"), "one count with --map"),
        (("--map", LAKE_SCEN, "--scen", LAKE_SCEN), "lake-6x4.scen line 1"),
    ):
        result = run("gen", *args, check=False)
        assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr, args


def test_cli_play__movingai_instance_out_of_range_or_skipped_is_one_line_before_the_app(tmp_path):
    for episode, words in (("7", "--episode = 7 is not allowed: 0..4"), ("2", "on an impassable tile")):
        result = run("play", "--map", LAKE_MAP, "--scen", LAKE_SCEN, "--episode", episode, check=False)
        assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr
    result = run("play", "--scen", LAKE_SCEN, check=False)
    assert result.returncode == 2 and "--map FILE.map and --scen FILE.scen together" in result.stderr


def test_cli_eval__a_users_instances_file_the_movingai_import_and_cvar_in_the_json(tmp_path):
    mine = tmp_path / "lake.jsonl"
    run("gen", "--map", LAKE_MAP, "--scen", LAKE_SCEN, "--agents", "1", "--out", str(mine))
    data = json.loads(run("eval", "--policy", "oracle", "--instances", str(mine), "--out", str(tmp_path / "out"),
                          "--json").stdout)
    assert data["suite"] == f"instances:{mine}" and data["cells"] == {
        "1x6": {"valid_rate": 1.0, "optimal_rate": 1.0, "episodes": 9}}
    assert data["cvar10_valid"] == 1.0 and data["cvar10_cells"] == 1
    assert data["source"]["instances"]["path"] == str(mine) and len(data["source"]["instances"]["sha256"]) == 64


def test_cli_eval__a_stage_config_generated_now_with_seed_and_refusals(tmp_path):
    stage = tmp_path / "stage.yaml"
    stage.write_text("agents: 2\nsamples: 6\nseed: 1\nsizes:\n  3: {data_ratio: 0.5, hole_ratio: 0.1, wait_ratio: 0}\n"
                     "  4: {data_ratio: 0.5, hole_ratio: 0.1, wait_ratio: 0}\n")
    out = run("eval", "--policy", "greedy", "--config", str(stage), "--seed", "7", "--out", str(tmp_path / "out"))
    assert f"greedy on config:{stage}" in out.stdout and "worst 10% of cells" in out.stdout
    from replays.reader import read_replay

    header, _ = read_replay(tmp_path / "out" / "cell-2x3.mlr")
    assert header.extra["config"]["seed"] == 7 and header.extra["seed"] == 7
    for args, words in (
        (("--config", str(stage), "--quick"), "--quick = True is not allowed"),
        (("--instances", str(stage), "--config", str(stage)), "not allowed with argument"),
        (("--instances", str(tmp_path / "missing.jsonl")), "--instances"),
    ):
        result = run("eval", "--policy", "oracle", *args, "--out", str(tmp_path / "refused"), check=False)
        assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr, args


def test_cli_export__movingai_files_that_gen_reads_back(tmp_path):
    stage = tmp_path / "stage.yaml"
    stage.write_text("agents: 3\nsamples: 3\nseed: 2\nsizes:\n  5: {data_ratio: 1.0, hole_ratio: 0.2, wait_ratio: 0}\n")
    printed = run("export", "--config", str(stage), "--movingai", str(tmp_path / "mai")).stdout
    assert "wrote 3 MovingAI maps and 3 scenarios (3 instances" in printed
    back = tmp_path / "back.jsonl"
    folder = tmp_path / "mai"
    run("gen", "--map", str(folder / "stage-0001.map"), "--scen", str(folder / "stage-0001-a3.scen"), "--agents", "3",
        "--out", str(back))
    original = tmp_path / "original.jsonl"
    run("gen", "--config", str(stage), "--out", str(original))
    (imported,), generated = read_jsonl(back), read_jsonl(original)
    assert imported.instance == generated[1].instance and imported.plan == generated[1].plan
    result = run("export", "--config", str(stage), check=False)
    assert result.returncode == 2 and "--out = None is not allowed" in result.stderr


def test_cli__a_band_the_generator_cannot_fill_names_the_config_file_it_came_from(tmp_path):
    """gen, export, rollout and eval --config: the generator's refusal of a size's band names the file first, as
    the file's other refusals do; the same band from flags names no file."""
    config = tmp_path / "band.yaml"
    config.write_text("agents: 2\nsamples: 2\nseed: 0\nsizes:\n"
                      "  '6': {data_ratio: 1.0, hole_ratio: 0.2, wait_ratio: 0.3, max_makespan: 1}\n")
    for args in (("gen", "--config", str(config)), ("export", "--config", str(config), "--out", str(tmp_path / "x")),
                 ("rollout", "--policy", "oracle", "--config", str(config), "--out", str(tmp_path / "r")),
                 ("eval", "--policy", "oracle", "--config", str(config), "--out", str(tmp_path / "e"))):
        result = mapf_lake(*args, check=False, timeout=120)
        line = result.stderr.strip().splitlines()[-1]
        assert result.returncode == 2 and line.startswith(f"mapf-lake: error: {config}: sizes.6.max_makespan = 1"), args
    result = mapf_lake("gen", "--size", "6", "--max-makespan", "1", "--n", "2", check=False, timeout=120)
    assert result.returncode == 2 and "mapf-lake: error: sizes.6.max_makespan = 1" in result.stderr
