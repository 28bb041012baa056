"""Whole-episode exports: the animated SVG (parsed back with ``xml.etree``: agents, frames, key times, each
failure marker shown at its step, trails, escaping, atomic writes) and the MP4 video (decoded back with imageio's
reader: frame count, size, colours), plus the one-line refusal when the video extra is missing."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from render import colors as P
from render.source import ReplaySource
from render.svg import CELL, HOLD_S, export_svg
from simulator.errors import ConfigError
from tests.render.test_render_fixtures import (CASES, HOLE_CELL, INSTANCE, MULTI_SENTENCES, ORDER, write_cases,
                                               write_multi)

SVG = "{http://www.w3.org/2000/svg}"
FPS = 4.0


def svg_of(source: ReplaySource, name: str, out, **options) -> tuple[ET.Element, int]:
    path, frames = export_svg(source, ORDER.index(name), out, fps=FPS, **options)
    return ET.parse(path).getroot(), frames


def key_time(frame: int, n_frames: int) -> float:
    """Where frame ``frame`` begins, as a share of the loop (the module's documented timing)."""
    step_s = 1 / FPS
    return frame * step_s / ((n_frames - 1) * step_s + max(step_s, HOLD_S))


def value_at(animation: ET.Element, frame: int, n_frames: int) -> str:
    """The value a discrete animation holds during ``frame``."""
    times = [float(t) for t in animation.get("keyTimes").split(";")]
    values = animation.get("values").split(";")
    assert len(times) == len(values) and times[0] == 0.0 and times == sorted(times)
    now = key_time(frame, n_frames)
    return [value for at, value in zip(times, values) if at <= now + 1e-6][-1]


def opacity_animation(element: ET.Element) -> ET.Element:
    (animation,) = [a for a in element.findall(f"{SVG}animate") if a.get("attributeName") == "opacity"]
    return animation


def test_export_svg__one_group_per_agent_one_counter_per_frame_and_agents_step_cell_to_cell(source, tmp_path):
    root, frames = svg_of(source, "valid", tmp_path / "valid.svg")
    n_steps = len(CASES["valid"][0])
    assert frames == n_steps + 1 == int(root.get("data-frames"))
    agents = root.findall(f".//{SVG}g[@class='agent']")
    assert [a.get("data-agent") for a in agents] == ["0", "1"]
    counters = root.findall(f"./{SVG}g[@id='steps']/{SVG}text")
    assert [c.text for c in counters] == [f"step {t} / {n_steps}" for t in range(frames)]
    for t in range(len(counters)):  # exactly one counter shows in each frame
        shown = [value_at(opacity_animation(c), t, frames) for c in counters]
        assert shown == ["1" if i == t else "0" for i in range(frames)]
    # one shared clock: every animation loops with the same duration, in discrete steps, on the frames' key times
    frame_times = {round(key_time(t, frames), 5) for t in range(frames)}
    animations = root.findall(f".//{SVG}animate") + root.findall(f".//{SVG}animateTransform")
    assert len({a.get("dur") for a in animations}) == 1
    assert all(a.get("calcMode") == "discrete" and a.get("repeatCount") == "indefinite" for a in animations)
    assert all(round(float(t), 5) in frame_times for a in animations for t in a.get("keyTimes").split(";"))
    with ReplaySource(source.path) as opened:
        positions = opened.load(ORDER.index("valid")).episode.positions  # (T+1, K, 2)
    for k, agent in enumerate(agents):
        (move,) = agent.findall(f"{SVG}animateTransform")
        assert move.get("type") == "translate" and len(move.get("keyTimes").split(";")) <= frames
        places = [tuple(float(v) for v in value_at(move, t, frames).split()) for t in range(frames)]
        for t in range(frames):
            dy, dx = (positions[t, k] - positions[0, k]) * CELL
            assert places[t] == pytest.approx((places[0][0] + dx, places[0][1] + dy)), (k, t)
    assert not root.findall(f".//{SVG}g[@class='marker']")  # a valid episode has no failure


@pytest.mark.parametrize("name, kind", [("hole", "hole"), ("vertex", "vertex_conflict"), ("edge", "edge_conflict"),
                                        ("illegal", "illegal_move"), ("not_reached", "goal_not_reached")])
def test_export_svg__the_failure_marker_is_animated_at_its_step(source, tmp_path, name, kind):
    root, frames = svg_of(source, name, tmp_path / f"{name}.svg")
    step = len(CASES[name][0])
    markers = root.findall(f".//{SVG}g[@class='marker']")
    assert markers and {m.get("data-kind") for m in markers} == {kind}
    assert {m.get("data-step") for m in markers} == {str(step)}
    for marker in markers:
        animation = opacity_animation(marker)
        assert marker.get("opacity") == "0"  # hidden where SMIL does not play
        assert float(animation.get("keyTimes").split(";")[1]) == pytest.approx(key_time(step, frames), abs=1e-6)
        assert [value_at(animation, t, frames) for t in range(frames)] == ["0"] * step + ["1"]
        drawn = {e.get("stroke") for e in marker.iter()} | {e.get("fill") for e in marker.iter()}
        assert P.hex_color(P.FAILURE) in drawn
    if name == "hole":
        (marker,) = markers
        circle = marker.find(f"{SVG}circle")
        cx, cy = float(circle.get("cx")), float(circle.get("cy"))
        (agent,) = [a for a in root.findall(f".//{SVG}g[@class='agent']") if a.get("data-agent") == "0"]
        x, y = (float(v) for v in value_at(agent.find(f"{SVG}animateTransform"), step, frames).split())
        assert (cx, cy) == pytest.approx((x, y))  # drawn where agent 0 fell into the hole


def test_export_svg__a_step_with_several_failures_marks_and_names_each(tmp_path):
    with ReplaySource(write_multi(tmp_path / "multi.mlr")) as opened:
        path, frames = export_svg(opened, 0, tmp_path / "multi.svg", fps=FPS)
    root = ET.parse(path).getroot()
    markers = {(m.get("data-kind"), m.get("data-agents"), m.get("data-step"))
               for m in root.findall(f".//{SVG}g[@class='marker']")}
    assert markers == {("hole", "3", "1"), ("vertex_conflict", "0 2", "1")}
    (sentences,) = root.findall(f".//{SVG}g[@class='sentences']")
    assert sentences.get("data-step") == "1"
    assert tuple(t.text for t in sentences.findall(f"{SVG}text")) == MULTI_SENTENCES
    assert [value_at(opacity_animation(sentences), t, frames) for t in range(frames)] == ["0", "1"]


def test_export_svg__trails_are_optional_and_each_move_appears_at_its_step(source, tmp_path):
    root, frames = svg_of(source, "valid", tmp_path / "trails.svg")
    trails = root.findall(f".//{SVG}line[@class='trail']")
    with ReplaySource(source.path) as opened:
        positions = opened.load(ORDER.index("valid")).episode.positions
    moves = {(str(k), str(t)) for t in range(1, frames) for k in range(INSTANCE.n_agents)
             if (positions[t, k] != positions[t - 1, k]).any()}
    assert {(line.get("data-agent"), line.get("data-step")) for line in trails} == moves
    for line in trails:
        step = int(line.get("data-step"))
        assert line.get("stroke") == P.hex_color(P.trail_color(int(line.get("data-agent"))))
        assert [value_at(opacity_animation(line), t, frames) for t in range(frames)] == ["0"] * step + ["1"] * (
            frames - step)
    legend = root.find(f".//{SVG}g[@id='legend']")
    assert {g.get("data-agent") for g in legend.findall(f"{SVG}g[@class='legend-agent']")} == {"0", "1"}
    assert "agent 0: orange" in [t.text for t in legend.iter(f"{SVG}text")]
    root, _ = svg_of(source, "valid", tmp_path / "plain.svg", trails=False)
    assert not root.findall(f".//{SVG}line[@class='trail']")
    assert "trail" not in {g.get("data-kind") for g in root.iter(f"{SVG}g")}


def test_export_svg__names_are_escaped_and_the_file_is_written_atomically(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    odd = write_cases(tmp_path / 'a&b<c>"d".mlr')
    with ReplaySource(odd) as opened:
        path, _ = export_svg(opened, ORDER.index("hole"), folder / "hole.svg")
    root = ET.parse(path).getroot()  # well-formed despite the name
    assert 'a&b<c>"d".mlr' in root.find(f"{SVG}title").text
    assert [p.name for p in folder.iterdir()] == ["hole.svg"]  # no temporary file left beside it


def test_export_svg__control_characters_in_the_name_still_make_valid_xml(tmp_path):
    """A replay file name with control characters: ElementTree wrote them raw and the SVG did not parse."""
    odd = write_cases(tmp_path / "run\x01\x1b[31m\x7fend\x0b.mlr")
    with ReplaySource(odd) as opened:
        path, _ = export_svg(opened, ORDER.index("hole"), tmp_path / "odd.svg")
    root = ET.parse(path).getroot()  # ParseError ("not well-formed (invalid token)") before
    assert "run\\x01\\x1b[31m\x7fend\\x0b.mlr" in root.find(f"{SVG}title").text  # shown, not dropped


def test_export_svg__a_long_name_is_cut_in_the_middle_to_fit_the_caption(tmp_path):
    """The caption ran off the picture's right edge; the title keeps the whole name."""
    name = "stage-03-validation-" + "x" * 120 + "-final.mlr"
    with ReplaySource(write_cases(tmp_path / name)) as opened:
        path, _ = export_svg(opened, ORDER.index("hole"), tmp_path / "long.svg")
    root = ET.parse(path).getroot()
    caption = root.find(f"{SVG}text").text
    assert name in root.find(f"{SVG}title").text and name not in caption
    assert caption.startswith("MAPF-FrozenLake replay: stage-0") and "…" in caption and "l.mlr, episode" in caption
    assert len(caption) * 14 * 0.64 <= int(root.get("width")) - 24


def test_export_svg__bad_fps_is_a_config_error(source, tmp_path):
    with pytest.raises(ConfigError, match="--fps"):
        export_svg(source, 0, tmp_path / "x.svg", fps=0)
    assert not (tmp_path / "x.svg").exists()


# --- MP4 ---------------------------------------------------------------------------------------------------
def test_export_mp4__decodes_back_with_the_frame_count_size_and_colours(source, tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    from render.draw import compute_layout
    from render.export import export_mp4

    out = tmp_path / "valid.mp4"
    count, size = export_mp4(source, ORDER.index("valid"), out, (481, 301), fps=FPS, tween=1)
    assert size == (480, 300)  # even sizes for H.264's 4:2:0 colour
    assert count == len(CASES["valid"][0]) * 2 + 1
    reader = imageio.get_reader(out, format="FFMPEG")
    try:
        frames = [frame for frame in reader]
        assert reader.get_meta_data()["size"] == size
    finally:
        reader.close()
    assert len(frames) == count and frames[0].shape == (300, 480, 3)
    layout = compute_layout(size, INSTANCE.height, INSTANCE.width)
    x, y = layout.cell_center(*HOLE_CELL)
    assert np.abs(frames[0][y, x].astype(int) - np.array(P.HOLE)).max() < 25  # the hole, through lossy coding
    x, y = layout.cell_center(*INSTANCE.starts[1])
    x0, y0 = layout.cell_center(*INSTANCE.goals[1])
    assert np.abs(frames[0][y + layout.cell // 4, x].astype(int) - np.array(P.agent_color(1))).max() < 40
    assert np.abs(frames[-1][y0 + layout.cell // 4, x0].astype(int) - np.array(P.agent_color(1))).max() < 40


def test_export_mp4__without_the_video_extra_is_one_line_naming_it(cases_path, tmp_path, monkeypatch, capsys):
    from curriculum.cli import main

    monkeypatch.setitem(sys.modules, "imageio", None)  # as if not installed: importing it raises ImportError
    monkeypatch.setitem(sys.modules, "imageio.v2", None)
    out = tmp_path / "x.mp4"
    assert main(["watch", str(cases_path), "--mp4", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--mp4" in err and "pip install 'mapf-frozenlake[video]'" in err
    assert not out.exists()


def test_export_mp4__bad_timing_is_a_config_error(source, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    from render.export import export_mp4

    with pytest.raises(ConfigError, match="--tween"):
        export_mp4(source, 0, tmp_path / "x.mp4", tween=99)
    assert not (tmp_path / "x.mp4").exists()
