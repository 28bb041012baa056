"""pygame drawing under the dummy video driver: pixel facts of known states, failure markers, PNG and GIF export,
the viewer's state and keys; plus the pygame-free parts they rest on (markers, completion spans)."""

from __future__ import annotations

import numpy as np
import pygame
import pytest

from replays.errors import ReplayError
from render import colors as P
from render.completion import CompletionText, action_spans, clean_text
from render.draw import HELP_LINES, DrawCache, FrameView, compute_layout, draw_frame
from render.export import export_gif, export_png, frame_view
from render.source import ReplaySource
from render.timeline import EDGE, HOLE, ILLEGAL, VERTEX, Marker, markers_for_step
from render.viewer import handle_key, run_viewer, snapshot_path
from render.watch_state import WatchState
from simulator import constants as C
from tests.render.test_render_fixtures import (
    CASES,
    HOLE_CELL,
    INSTANCE,
    MULTI_SENTENCES,
    ORDER,
    corrupt_first_record,
    write_multi,
)

SIZE = (900, 560)


def render_state(source: ReplaySource, name: str, step: int, size=SIZE):
    """(surface, layout) of episode ``name`` at ``step`` at rest."""
    state = WatchState(source, ORDER.index(name), step)
    surface = pygame.Surface(size)
    layout = draw_frame(surface, frame_view(state), DrawCache())
    return surface, layout


def failure_pixels(surface: pygame.Surface) -> int:
    pixels = pygame.surfarray.array3d(surface)
    return int(np.all(pixels == np.array(P.FAILURE), axis=-1).sum())


def agent_probe(layout, row: float, col: float) -> tuple[int, int]:
    """A pixel on agent's disc below its index label."""
    x, y = layout.cell_center(row, col)
    return x, y + int(layout.cell * 0.26)


# --- markers and completion spans (no pygame) -----------------------------------------------------------------
@pytest.mark.parametrize(
    "before, after, events, actions, expected",
    [
        ([[0, 0], [2, 0]], [[1, 0], [1, 0]], [C.EV_VERTEX, C.EV_VERTEX], None, [Marker(VERTEX, (0, 1), (1, 0))]),
        ([[1, 0], [2, 0]], [[2, 0], [1, 0]], [C.EV_EDGE, C.EV_EDGE], None, [Marker(EDGE, (0, 1), (1, 0), (2, 0))]),
        ([[0, 1], [2, 0]], [[0, 2], [2, 0]], [C.EV_HOLE, 0], None, [Marker(HOLE, (0,), (0, 2))]),
        ([[0, 0], [2, 0]], [[0, 0], [2, 0]], [C.EV_ILLEGAL, 0], [C.UP, C.WAIT],
         [Marker(ILLEGAL, (0,), (0, 0), (-1, 0))]),
        ([[0, 0], [2, 0]], [[0, 1], [2, 1]], [C.EV_GOAL, 0], None, []),
    ],
)
def test_markers_for_step__places_each_failure(before, after, events, actions, expected):
    got = markers_for_step(np.array(before), np.array(after), np.array(events, np.int8),
                           None if actions is None else np.array(actions))
    assert list(got) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("agent 0: R R D", {0: [(0, 9, 10), (0, 11, 12), (0, 13, 14)]}),
        ("A1 UURD", {1: [(0, 3, 4), (0, 4, 5), (0, 5, 6), (0, 6, 7)]}),
        ("A0 U22R23", {0: [(0, 3, 4), (0, 6, 7)]}),  # compact-xy: each letter, not the cells after it
        ("Agent 0 - up, wait", {0: [(0, 10, 12), (0, 14, 18)]}),
        ("Agent 0 needs to go right first", {}),  # prose: not an action list
        ("agent 0: R\nagent 0: D D", {0: [(1, 9, 10), (1, 11, 12)]}),  # the later line (the answer) wins
        ("agent 7: R", {}),  # no such agent
    ],
)
def test_action_spans__table(text, expected):
    assert action_spans(text.split("\n"), 2 if "7" in text else 8) == expected


def test_completion_text__cleans_wraps_and_highlights_per_step():
    text = CompletionText("agent 0: R D\nagent 1: L\x00\t" + "x" * 30, 2)
    assert "\x00" not in "\n".join(text.lines)
    wrapped = text.wrapped(10)
    assert all(len(line.text) <= 10 for line in wrapped) and len(wrapped) >= 4
    assert text.highlights(0) == [] and [agent for agent, _ in text.highlights(1)] == [0]
    assert text.highlights(2) == [(0, (0, 11, 12))]
    long = clean_text("a" * 300_000)
    assert "characters not shown" in long and len(long) < 210_000


# --- pixels ------------------------------------------------------------------------------------------------
def test_draw__hole_and_agent_colours_at_their_cells(source):
    surface, layout = render_state(source, "valid", 0)
    assert surface.get_at(layout.cell_center(*HOLE_CELL))[:3] == P.HOLE
    for k, (r, c) in enumerate(INSTANCE.starts.tolist()):
        assert surface.get_at(agent_probe(layout, r, c))[:3] == P.agent_color(k)
    assert failure_pixels(surface) == 0


def test_draw__goal_frame_in_agent_colour(source):
    surface, layout = render_state(source, "valid", 0)
    for k, (r, c) in enumerate(INSTANCE.goals.tolist()):
        rect = layout.cell_rect(r, c)
        column = [surface.get_at((rect.centerx, y))[:3] for y in range(rect.top, rect.top + rect.height // 4)]
        assert P.agent_color(k) in column


def test_draw__interpolation_puts_agent_between_cells(source):
    state = WatchState(source, ORDER.index("valid"), 2)
    state.clock = 1.5  # halfway from step 1 to step 2: agent 1 goes from (2, 1) to (2, 2)
    surface = pygame.Surface(SIZE)
    layout = draw_frame(surface, frame_view(state), DrawCache())
    assert surface.get_at(agent_probe(layout, 2, 1.5))[:3] == P.agent_color(1)


@pytest.mark.parametrize("name", ["hole", "vertex", "edge", "illegal", "not_reached"])
def test_draw__failure_marker_only_on_failure_step(source, name):
    steps = len(CASES[name][0])
    before, _ = render_state(source, name, steps - 1)
    after, layout = render_state(source, name, steps)
    assert failure_pixels(before) == 0
    assert failure_pixels(after) > 50


def test_draw__hole_marker_is_at_the_hole(source):
    surface, layout = render_state(source, "hole", 2)
    rect = layout.cell_rect(*HOLE_CELL).inflate(layout.cell // 2, layout.cell // 2)
    assert failure_pixels(surface.subsurface(rect)) == failure_pixels(surface) > 0


def test_draw__illegal_move_marker_reaches_off_the_map(source):
    surface, layout = render_state(source, "illegal", 1)
    x, _ = layout.cell_center(0, 0)
    above = pygame.Rect(x - layout.cell // 2, 0, layout.cell, layout.board.top)
    assert failure_pixels(surface.subsurface(above)) > 0


def test_draw__large_map_scales_down_and_small_window_drops_panel():
    layout = compute_layout((1200, 760), 32, 32)
    assert layout.board.right <= layout.panel.left and layout.board.bottom <= 760 and layout.cell >= 20
    tiny = compute_layout((400, 300), 32, 32)
    assert tiny.panel is None and tiny.board.width <= 400 and tiny.cell >= 2


def test_draw__panel_shows_completion_and_follows_step(source):
    state = WatchState(source, ORDER.index("valid"), 3)
    surface = pygame.Surface(SIZE)
    layout = draw_frame(surface, frame_view(state), DrawCache())
    assert layout.completion_lines >= 5 and layout.panel is not None
    # The highlight of step 3 is drawn in agent 0's (dimmed) colour on the panel.
    panel = pygame.surfarray.array3d(surface.subsurface(layout.panel))
    tint = np.array(P.dimmed(P.agent_color(0), 0.55, P.PANEL))
    assert np.all(panel == tint, axis=-1).sum() > 20


# --- export ----------------------------------------------------------------------------------------------
def test_export_png__pixel_facts_survive_the_file(source, tmp_path):
    out, step = export_png(source, ORDER.index("hole"), -1, tmp_path / "hole.png", SIZE)
    assert step == 2
    image = pygame.image.load(str(out))
    layout = compute_layout(SIZE, INSTANCE.height, INSTANCE.width)
    assert image.get_at(agent_probe(layout, 2, 0))[:3] == P.agent_color(1)
    assert failure_pixels(image) > 0


def test_export_gif__one_frame_per_step_plus_start(source, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    for name in ("valid", "edge"):
        index = ORDER.index(name)
        count = export_gif(source, index, tmp_path / f"{name}.gif", (480, 300))
        with PIL.open(tmp_path / f"{name}.gif") as image:
            assert image.n_frames == count == len(CASES[name][0]) + 1


def test_export_gif__tween_frames(source, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    count = export_gif(source, ORDER.index("valid"), tmp_path / "smooth.gif", (480, 300), tween=2)
    with PIL.open(tmp_path / "smooth.gif") as image:
        assert image.n_frames == count == 4 * 3 + 1


# --- viewer state and keys -------------------------------------------------------------------------------------
def test_watch_state__play_step_speed(source):
    state = WatchState(source, 0)
    assert (state.step, state.alpha) == (0, 1.0)
    state.toggle_play()
    state.advance(0.25)  # 2 steps/s: half a step
    assert state.step == 1 and 0.4 < state.alpha < 0.6
    state.step_by(+1)  # lands on the step being entered, at rest
    assert (state.step, state.alpha, state.playing) == (1, 1.0, False)
    state.step_by(+1)
    state.step_by(-1)
    assert state.step == 1
    state.faster()
    assert state.speed == 4.0
    state.go_to_step(99)
    assert state.step == state.n_steps == 4


def test_watch_state__plays_on_into_next_episode(source):
    state = WatchState(source, 0, playing=True)
    for _ in range(200):
        state.advance(0.05)
    assert state.index > 0


def test_watch_state__episodes_and_failure_filter(source):
    state = WatchState(source, 0)
    state.next_episode()
    assert state.index == 1
    state.previous_episode()
    state.previous_episode()
    assert state.index == len(ORDER) - 1  # wraps around
    state.go_to_step(0)
    state.toggle_failures_only()
    assert state.failures_only and "failures only" in state.message
    seen = set()
    for _ in range(len(ORDER)):
        state.next_episode()
        seen.add(state.index)
        assert not state.loaded.episode.outcome.valid
    assert ORDER.index("valid") not in seen


def test_viewer_keys__map_to_state(source, tmp_path):
    state = WatchState(source, 0)
    saved = []
    assert handle_key(state, pygame.K_RIGHT, lambda: saved.append(1))
    assert state.step == 1
    handle_key(state, pygame.K_n, lambda: None)
    assert state.index == 1
    handle_key(state, pygame.K_h, lambda: None)
    assert state.show_help
    assert handle_key(state, pygame.K_ESCAPE, lambda: None) and not state.show_help  # esc closes help first
    handle_key(state, pygame.K_s, lambda: saved.append(1))
    assert saved == [1]
    assert not handle_key(state, pygame.K_q, lambda: None)
    assert snapshot_path(state, tmp_path).name == "cases-ep1-t0.png"


def test_viewer__window_loop_runs_headless(source):
    state = WatchState(source, 0, playing=True)
    run_viewer(state, (640, 400), max_frames=5)
    assert state.step >= 0


def test_viewer__help_overlay_and_message_draw(source):
    state = WatchState(source, 0)
    state.show_help = True
    state.message = "hello"
    surface = pygame.Surface(SIZE)
    draw_frame(surface, frame_view(state), DrawCache())
    # The overlay darkens the board: the hole's pixel is no longer the hole's colour.
    layout = compute_layout(SIZE, INSTANCE.height, INSTANCE.width)
    assert surface.get_at(layout.cell_center(*HOLE_CELL))[:3] != P.HOLE


def test_frame_view__board_only(source):
    state = WatchState(source, 0)
    view = frame_view(state)
    surface = pygame.Surface((500, 400))
    layout = draw_frame(surface, FrameView(scene=view.scene, panel=False), DrawCache())
    assert layout.panel is None


# --- bad files ----------------------------------------------------------------------------------------------
def test_source__refuses_foreign_truncated_and_corrupt_files(cases_path, tmp_path):
    foreign = tmp_path / "notes.mlr"
    foreign.write_text("hello")
    with pytest.raises(ReplayError, match="not a replay file"):
        ReplaySource(foreign)
    truncated = tmp_path / "cut.mlr"
    truncated.write_bytes(cases_path.read_bytes()[:-5])
    with pytest.raises(ReplayError, match="truncated"):
        ReplaySource(truncated)
    corrupt = corrupt_first_record(cases_path, tmp_path / "corrupt.mlr")
    with ReplaySource(corrupt) as opened, pytest.raises(ReplayError, match="episode 0"):
        WatchState(opened, 0)  # before any window: the state loads episode 0 in full
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReplayError, match="no replay files"):
        ReplaySource(empty)


def test_viewer__no_display_is_a_clear_config_error(source, monkeypatch):
    from simulator.errors import ConfigError

    def no_display(*args, **kwargs):
        raise pygame.error("No available video device")

    monkeypatch.setattr(pygame.display, "set_mode", no_display)
    with pytest.raises(ConfigError, match="--terminal"):
        run_viewer(WatchState(source, 0), (640, 400), max_frames=1)


def test_viewer__a_headless_video_driver_is_no_display_instead_of_a_window_that_waits_forever(source):
    from simulator.errors import ConfigError

    # the tests run on SDL's dummy driver, where SDL also lands without a display: an interactive window there
    # would wait for keys nobody can press
    with pytest.raises(ConfigError, match="--terminal, --png or --gif") as error:
        run_viewer(WatchState(source, 0), (640, 400))
    assert "dummy" in str(error.value)


def test_cli_watch__an_empty_or_unknown_video_driver_is_one_line(tmp_path, source):
    import os
    import subprocess
    import sys

    for driver in ("", "nonexistent"):
        env = {**os.environ, "SDL_VIDEODRIVER": driver}
        env.pop("DISPLAY", None)
        result = subprocess.run([sys.executable, "-m", "curriculum.cli", "watch", str(source.path)], env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr and "--terminal" in result.stderr


def test_episode_facts__reward_shown_only_when_recorded_and_its_parts_on_their_own_line(source):
    from render.source import episode_facts

    loaded = source.load(0)
    names = [name for name, _, _ in episode_facts(loaded, 0, len(source))]
    assert loaded.episode.reward == 0 and not loaded.episode.reward_components
    assert "reward" not in names and "step" in names  # scripted cases record no reward: no false 0.000
    loaded.episode.reward = 1.6
    loaded.episode.reward_components = {"valid": 1.0, "optimal": 1.0, "format": 1.0}
    facts = {name: text for name, text, _ in episode_facts(loaded, 0, len(source))}
    assert facts["reward"] == "1.600" and facts["reward parts"] == "valid 1 optimal 1 format 1"


def test_draw__the_failing_agent_s_number_is_drawn_over_the_hole_marker(source):
    """The agent that fell is drawn above the hole's cross: the cell's centre shows the agent's label, not the
    marker's red, while the marker's ring around it stays visible."""
    steps = len(CASES["hole"][0])
    surface, layout = render_state(source, "hole", steps)
    x, y = layout.cell_center(*HOLE_CELL)
    centre = pygame.surfarray.array3d(surface.subsurface(pygame.Rect(x - 6, y - 6, 13, 13)))
    assert np.all(centre == np.array(P.FAILURE), axis=-1).mean() < 0.2  # drawn over it, the cross made it 95% red
    label_colours = {tuple(int(v) for v in pixel) for row in centre for pixel in row}
    assert len(label_colours) > 1  # the label's strokes on the dimmed disc
    rect = layout.cell_rect(*HOLE_CELL).inflate(layout.cell // 2, layout.cell // 2)
    assert failure_pixels(surface.subsurface(rect)) > 20  # the ring of the marker is still there


# --- several failures in one step, trails, the legend ----------------------------------------------------------
@pytest.fixture(scope="module")
def multi_path(tmp_path_factory):
    return write_multi(tmp_path_factory.mktemp("render-multi") / "multi.mlr")


class RecordingCache(DrawCache):
    """A cache that notes every text it is asked to render: what a frame says, in words."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def text(self, text, role, size, color):
        self.seen.append(text)
        return super().text(text, role, size, color)

    def said(self) -> str:
        return " ".join(self.seen)


def colour_pixels(surface: pygame.Surface, color) -> int:
    return int(np.all(pygame.surfarray.array3d(surface) == np.array(color), axis=-1).sum())


def test_scene_sentences__a_step_with_several_failures_names_each_of_them(multi_path):
    with ReplaySource(multi_path) as opened:
        loaded = opened.load(0)
    assert loaded.episode.outcome.fail_agent == 3  # the judge records the first failure only
    scene = loaded.timeline.scene(1)
    assert scene.sentences() == [(sentence, True) for sentence in MULTI_SENTENCES]
    assert scene.marked_agents() == (0, 2, 3)


@pytest.mark.parametrize("where", ["window", "png", "gif", "narrow window"])
def test_draw__every_failure_of_a_step_is_a_sentence_in_the_window_and_the_images(multi_path, tmp_path, where,
                                                                                     monkeypatch):
    cache = RecordingCache()
    with ReplaySource(multi_path) as opened:
        if where in ("window", "narrow window"):
            surface = pygame.Surface(SIZE if where == "window" else (500, 400))
            layout = draw_frame(surface, frame_view(WatchState(opened, 0, -1)), cache)
            assert (layout.panel is None) == (where == "narrow window")
            assert failure_pixels(surface) > 50
        else:
            monkeypatch.setattr("render.export.DrawCache", lambda: cache)
            if where == "png":
                out, _ = export_png(opened, 0, -1, tmp_path / "multi.png", SIZE)
                assert failure_pixels(pygame.image.load(str(out))) > 50
            else:
                pytest.importorskip("PIL.Image")
                export_gif(opened, 0, tmp_path / "multi.gif", (960, 600))
    for sentence in MULTI_SENTENCES:
        assert sentence in cache.said(), where


def test_draw__trails_in_each_agent_s_colour_on_the_cells_it_left_and_off_with_the_flag(source, tmp_path):
    index = ORDER.index("valid")
    layout = compute_layout(SIZE, INSTANCE.height, INSTANCE.width)
    # by step 3 agent 0 went (0, 0) (1, 0) (1, 1) to (1, 2); agent 1 (2, 0) (2, 1) (2, 2) to (2, 3)
    visited = {0: [(0, 0), (1, 0), (1, 1)], 1: [(2, 0), (2, 1), (2, 2)]}
    out, _ = export_png(source, index, 3, tmp_path / "trails.png", SIZE)  # trails by default
    image = pygame.image.load(str(out))
    for k, cells in visited.items():
        for cell in cells:
            assert colour_pixels(image.subsurface(layout.cell_rect(*cell)), P.trail_color(k)) > 10, (k, cell)
    assert colour_pixels(image.subsurface(layout.cell_rect(0, 3)), P.trail_color(0)) == 0  # never stood on
    assert colour_pixels(image.subsurface(layout.cell_rect(2, 1)), P.trail_color(0)) == 0  # agent 1's cell only
    out, _ = export_png(source, index, 3, tmp_path / "plain.png", SIZE, trails=False)
    plain = pygame.image.load(str(out))
    for k, cells in visited.items():
        assert all(colour_pixels(plain.subsurface(layout.cell_rect(*cell)), P.trail_color(k)) == 0 for cell in cells)


def test_draw__a_trail_grows_with_the_move_being_animated(source):
    state = WatchState(source, ORDER.index("valid"), 1)
    layout = compute_layout(SIZE, INSTANCE.height, INSTANCE.width)
    between = layout.cell_rect(2, 1).clip(layout.cell_rect(2, 1).move(layout.cell // 2, 0))  # right half of (2, 1)
    counts = []
    for clock in (1.0, 1.9):  # at rest on step 1, then most of the way into step 2 (agent 1: (2, 1) -> (2, 2))
        state.clock = clock
        surface = pygame.Surface(SIZE)
        draw_frame(surface, frame_view(state), DrawCache())
        counts.append(colour_pixels(surface.subsurface(between), P.trail_color(1)))
    assert counts[0] == 0 < counts[1]


def test_draw__legend_names_each_agent_s_colour_and_samples_each_marker_without_failure_red(source):
    cache = RecordingCache()
    surface = pygame.Surface(SIZE)
    layout = draw_frame(surface, frame_view(WatchState(source, ORDER.index("valid"), 0)), cache)
    legend = surface.subsurface(layout.legend)
    assert layout.legend.height > 40 and layout.panel.contains(layout.legend)
    pixels = pygame.surfarray.array3d(legend)
    assert np.all(pixels == np.array(P.PANEL), axis=-1).mean() < 0.93  # the region is drawn on, not empty
    for k in range(INSTANCE.n_agents):
        assert colour_pixels(legend, P.agent_color(k)) > 20
    assert colour_pixels(legend, P.BAD) > 20  # the marker samples
    assert failure_pixels(surface) == 0  # ... which are not the failure red: this step has no failure
    for word in ("orange", "green", "fell in a hole", "collision", "swap", "off the map", "goal not reached",
                 "path so far"):
        assert word in cache.seen, word


def test_viewer_keys__t_toggles_trails_and_the_key_help_lists_it(source):
    state = WatchState(source, 0)
    assert state.trails and frame_view(state).trails
    handle_key(state, pygame.K_t, lambda: None)
    assert not state.trails and not frame_view(state).trails and state.message == "path trails off"
    assert ("t", "path trails (toggle)") in HELP_LINES
    state.show_help = True
    cache = RecordingCache()
    draw_frame(pygame.Surface(SIZE), frame_view(state), cache)
    assert "path trails (toggle)" in cache.seen
