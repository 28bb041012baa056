"""Subprocess smoke tests of the render commands: ``watch --png``, ``--gif``, ``--svg``, ``--mp4``,
``bench render --quick``, and clean refusals (one line on stderr, exit status 2, no traceback) of foreign and
corrupt files by every viewer."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests.cli_runner import mapf_lake
from tests.render.test_render_fixtures import CASES, ORDER, corrupt_first_record, write_cases

# No display on purpose: image export must not need one, and viewers must refuse bad files before opening.
run = partial(mapf_lake, timeout=120, without_env=("DISPLAY", "SDL_VIDEODRIVER"))


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    return write_cases(tmp_path_factory.mktemp("render-cli") / "cases.mlr")


def test_cli_watch__png(cases, tmp_path):
    out = tmp_path / "frame.png"
    edge = str(ORDER.index("edge"))
    result = run("watch", str(cases), "--episode", edge, "--png", str(out), "--resolution", "640x400")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"step {len(CASES['edge'][0])}" in result.stdout
    written = out.read_bytes()
    again = run("watch", str(cases), "--episode", "0", "--png", str(out), check=False)
    assert again.returncode == 2 and "--force" in again.stderr and out.read_bytes() == written  # never replaced
    run("watch", str(cases), "--episode", "0", "--png", str(out), "--force")
    assert out.read_bytes() != written


def test_cli_watch__gif(cases, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    out = tmp_path / "episode.gif"
    run("watch", str(cases.parent), "--gif", str(out), "--fps", "5")  # a folder works as well as a file
    with PIL.open(out) as image:
        assert image.n_frames == len(CASES["valid"][0]) + 1


def test_cli_watch__svg_and_mp4_in_one_call_and_no_trails(cases, tmp_path):
    import xml.etree.ElementTree as ET

    svg, mp4 = tmp_path / "edge.svg", tmp_path / "edge.mp4"
    edge = str(ORDER.index("edge"))
    result = run("watch", str(cases), "--episode", edge, "--svg", str(svg), "--no-trails",
                 *(["--mp4", str(mp4)] if _has_video() else []))
    root = ET.parse(svg).getroot()
    frames = len(CASES["edge"][0]) + 1
    assert root.get("data-frames") == str(frames) and f"wrote {svg} ({frames} frames" in result.stdout
    assert not root.findall(".//{http://www.w3.org/2000/svg}line[@class='trail']")
    if _has_video():
        assert mp4.read_bytes()[4:8] == b"ftyp" and f"wrote {mp4} ({frames} frames of 960x600" in result.stdout


def _has_video() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("imageio", "imageio_ffmpeg"))


def test_cli_watch__help_explains_the_export_and_trail_flags():
    text = " ".join(run("watch", "--help").stdout.split())
    for expected in ("--svg OUT", "animated SVG", "--mp4 OUT", "frozenlake[video]", "--no-trails",
                     "t path trails", "steps per second of the SVG"):
        assert expected in text, expected


def test_cli_bench_render__quick_json():
    data = json.loads(run("bench", "render", "--quick", "--json", timeout=300).stdout)
    assert {row["map"] for row in data["draw"]} == {"10x10", "32x32"}
    assert all(row["fps"] > 0 for row in data["draw"])
    (trails,) = [row for row in data["draw"] if row["trails"]]
    assert trails["map"] == "10x10" and trails["agents"] == 5 and trails["fps_ratio_to_no_trails"] > 0
    assert "draw_10x10_5_trails_fps_ok" in data["checks"]
    assert data["open"]["episodes"] == 1000 and data["open"]["first_frame_s"] > 0


@pytest.mark.parametrize("mode", [[], ["--terminal"], ["--png", "x.png"], ["--gif", "x.gif"], ["--svg", "x.svg"],
                                  ["--mp4", "x.mp4"]])
def test_cli_watch__refuses_foreign_and_corrupt_files(cases, tmp_path, mode):
    foreign = tmp_path / "notes.mlr"
    foreign.write_text("not a replay")
    corrupt = corrupt_first_record(cases, tmp_path / "corrupt.mlr")
    for path, reason in ((foreign, "not a replay file"), (corrupt, "episode 0: positions")):
        result = run("watch", str(path), *[str(tmp_path / arg) if "." in arg else arg for arg in mode], check=False)
        assert result.returncode == 2, result.stderr
        assert reason in result.stderr and "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1


def test_cli_watch__bad_episode_and_step_are_clear_errors(cases):
    result = run("watch", str(cases), "--episode", "99", "--png", "x.png", check=False)
    assert result.returncode == 2 and "--episode" in result.stderr
    result = run("watch", str(cases), "--step", "99", "--png", "x.png", check=False)
    assert result.returncode == 2 and "--step" in result.stderr


def test_cli_play__refuses_foreign_file(tmp_path):
    foreign = tmp_path / "x.mlr"
    foreign.write_bytes(b"MLREPLAY\x01\x00\x00\x00garbage")
    result = run("play", "--load", str(foreign), check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "x.mlr" in result.stderr


@pytest.mark.parametrize("flag, name", [("--gif", "x.png"), ("--png", "x.gif"), ("--svg", "x"), ("--mp4", "x.gif")])
def test_cli_watch__an_output_name_that_does_not_fit_its_format_is_refused(cases, tmp_path, capsys, flag, name):
    """--gif x.png wrote a GIF named .png."""
    from curriculum.cli import main

    assert main(["watch", str(cases), flag, str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and f"ending in .{flag[2:]}" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_watch__the_step_error_names_the_whole_range_and_its_ends_work(cases, tmp_path, capsys):
    """The error said 0..N (or -1): -(N+1)..-2 are accepted too."""
    from curriculum.cli import main

    n_steps = len(CASES["edge"][0])
    edge = str(ORDER.index("edge"))
    assert main(["watch", str(cases), "--episode", edge, "--step", "99", "--png", str(tmp_path / "x.png")]) == 2
    assert f"{-(n_steps + 1)}..{n_steps}" in capsys.readouterr().err
    for step in (-(n_steps + 1), n_steps):
        assert main(["watch", str(cases), "--episode", edge, "--step", str(step), "--png",
                     str(tmp_path / f"s{step}.png")]) == 0


def test_cli_export__a_format_the_out_name_contradicts_is_refused(tmp_path, capsys):
    """export --format parquet --out x.jsonl wrote Parquet into x.jsonl."""
    from curriculum.cli import main

    assert main(["export", "--suite", "paper-quick", "--format", "parquet", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "ending in .parquet" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_cli_play__without_a_terminal_is_one_line_not_a_wait_for_keys_that_never_come(tmp_path):
    result = run("play", "--size", "4", "--agents", "2", "--seed", "3", check=False)  # stdin/stdout are pipes here
    assert result.returncode == 2 and "not a terminal" in result.stderr and "Traceback" not in result.stderr
