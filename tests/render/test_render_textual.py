"""Textual apps driven by the pilot: ``play`` (win by keys, a conflict, a fall, undo, hint, save and reload,
the setup screen) and ``watch --terminal``, with screenshots of their main screens."""

from __future__ import annotations

import numpy as np
import pytest

from replays.errors import ReplayError
from render.game import PlayGame, SetupValues, load_instance
from render.play_app import GameScreen, PlayApp, SetupScreen
from render.source import ReplaySource
from render.watch_app import WatchApp
from render.watch_state import WatchState
from simulator import constants as C
from simulator.errors import ConfigError
from tests.render.test_render_fixtures import (
    INSTANCE,
    MULTI_SENTENCES,
    OPTIMAL_MAKESPAN,
    ORDER,
    corrupt_first_record,
    write_cases,
    write_multi,
)

SIZE = (120, 36)

# Keys per joint step of the fixture's optimal plan: select agent 0, its move (the selection then moves on to
# agent 1), agent 1's move, commit. Arrows and WASD both appear.
WIN_KEYS = [
    ("0", "down", "right", "enter"),
    ("0", "d", "right", "enter"),
    ("0", "right", "d", "enter"),
    ("0", "right", "enter"),  # agent 1 is home: only agent 0 still moves
]


def new_app(tmp_path) -> tuple[PlayApp, PlayGame]:
    game = PlayGame(INSTANCE, optimal_makespan=OPTIMAL_MAKESPAN, origin="test")
    return PlayApp(game, save_path=tmp_path / "played.mlr"), game


async def test_play_app__win_by_keys_then_save_and_reload(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        for keys in WIN_KEYS:
            await pilot.press(*keys)
        assert game.won and game.steps == OPTIMAL_MAKESPAN
        assert "optimal!" in game.verdict()
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert (tmp_path / "played.mlr").exists()
    with ReplaySource(tmp_path / "played.mlr") as source:
        loaded = source.load(0)
        outcome = loaded.episode.outcome
        assert outcome.valid and outcome.optimal and outcome.makespan == OPTIMAL_MAKESPAN
        assert loaded.header.split == "play"
        assert np.array_equal(loaded.episode.positions[-1], INSTANCE.goals)
        # The saved game replays in the viewer and as a play instance.
        state = WatchState(source, 0, -1)
        assert state.step == OPTIMAL_MAKESPAN
    instance, _ = load_instance(tmp_path / "played.mlr")
    assert instance == INSTANCE


async def test_play_app__vertex_conflict_then_undo(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("0", "down", "up", "enter")  # both into (1, 0)
        assert game.over and not game.won
        assert "vertex conflict" in game.verdict()
        assert game.scene().marked_agents() == (0, 1)
        await pilot.press("enter")  # a finished game does not step
        assert game.steps == 1
        await pilot.press("u")
        assert game.steps == 0 and not game.over
        assert np.array_equal(game.positions, INSTANCE.starts)
        await pilot.press(*WIN_KEYS[0])  # and play goes on from the start
        assert game.steps == 1 and not game.over


async def test_play_app__fall_into_hole_and_restart(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("0", "d", "space", "enter")
        await pilot.press("0", "d", "space", "enter")
        assert game.over and game.status[0] == C.FALLEN
        assert "fell into the hole" in game.verdict()
        await pilot.press("r")
        assert game.steps == 0 and not game.over


async def test_play_app__edge_conflict_and_off_grid(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("0", "s", "space", "enter", "0", "s", "w", "enter")
        assert "edge conflict" in game.verdict()
        await pilot.press("r", "0", "w", "enter")
        assert "illegal move" in game.verdict()


async def test_play_app__tab_selects_and_hint_fills_the_step(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert game.selected == 0
        await pilot.press("tab")
        assert game.selected == 1
        await pilot.press("shift+tab")
        assert game.selected == 0
        await pilot.press("h")
        assert "hint: 4 more steps" in app.screen.hint_text
        assert game.pending.tolist() == [C.DOWN, C.RIGHT]  # the first step of an optimal finish
        await pilot.press("enter")
        assert game.steps == 1 and not game.over


async def test_play_app__screenshot_of_main_screen(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("0", "down")
        svg = app.export_screenshot()
        path = app.save_screenshot(path=str(tmp_path), filename="play.svg")
    text = svg.replace("&#160;", " ")
    for expected in ("steps 0 / optimal 4", "A0", "A1", "G0", "G1", "agents", "pending action", "down"):
        assert expected in text, expected
    assert (tmp_path / "play.svg").exists() and path.endswith("play.svg")


async def test_play_app__setup_generates_a_game_and_reports_bad_input(tmp_path):
    app = PlayApp(None, save_path=tmp_path / "x.mlr", defaults=SetupValues(size=4, agents=2, holes=0.1, seed=3))
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, SetupScreen)
        app.screen.query_one("#path").value = str(tmp_path / "missing.txt")
        await pilot.click("#load")
        await pilot.pause()
        error = str(app.screen.query_one("#setup-error").render())
        assert "missing.txt" in error
        await pilot.click("#generate")
        await pilot.pause()
        assert isinstance(app.screen, GameScreen)
        game = app.game
        assert game.instance.height == 4 and game.n_agents == 2 and game.optimal_makespan is not None


async def test_play_app__setup_loads_a_replay_instance(tmp_path):
    cases = write_cases(tmp_path / "cases.mlr")
    app = PlayApp(None, save_path=tmp_path / "x.mlr", defaults=SetupValues(load=str(cases), episode=1))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.click("#load")
        await pilot.pause()
        assert isinstance(app.screen, GameScreen) and app.game.instance == INSTANCE


def test_load_instance__refuses_truncated_replay_and_bad_text(tmp_path):
    cut = tmp_path / "cut.mlr"
    cut.write_bytes(write_cases(tmp_path / "cases.mlr").read_bytes()[:-5])
    with pytest.raises(ReplayError, match="truncated"):
        load_instance(cut, 0)
    with pytest.raises(ConfigError, match="--episode"):
        load_instance(tmp_path / "cases.mlr", 99)
    garbage = tmp_path / "map.txt"
    garbage.write_text("A0 Q7\n")
    with pytest.raises(ConfigError, match="token 2"):
        load_instance(garbage)


async def test_watch_app__refuses_corrupt_first_episode_before_starting(tmp_path):
    corrupt = corrupt_first_record(write_cases(tmp_path / "cases.mlr"), tmp_path / "bad.mlr")
    with ReplaySource(corrupt) as source, pytest.raises(ReplayError, match="episode 0: positions"):
        WatchApp(WatchState(source, 0))


# --- watch --terminal ---------------------------------------------------------------------------------------
async def test_watch_app__keys_step_episodes_and_filter(source):
    state = WatchState(source, 0)
    app = WatchApp(state)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right", "right")
        assert state.step == 2
        await pilot.press("left")
        assert state.step == 1
        await pilot.press("end")
        assert state.step == state.n_steps
        await pilot.press("n")
        assert state.index == 1
        await pilot.press("up")
        assert state.speed == 4.0
        await pilot.press("f")
        assert state.failures_only
        await pilot.press("n", "n")
        assert not state.loaded.episode.outcome.valid
        await pilot.press("space")
        assert state.playing
        await pilot.pause(0.3)
        svg = app.export_screenshot().replace("&#160;", " ")
    assert "failures only" in svg and "episode" in svg and "policy" in svg


async def test_watch_app__screenshot_shows_failure_and_completion(source):
    hole = ORDER.index("hole")
    app = WatchApp(WatchState(source, hole, -1))
    async with app.run_test(size=SIZE):
        svg = app.export_screenshot().replace("&#160;", " ")
    assert "fell into the hole" in svg and "invalid" in svg
    app = WatchApp(WatchState(source, ORDER.index("valid"), 1))
    async with app.run_test(size=SIZE):
        svg = app.export_screenshot().replace("&#160;", " ")
    # step 1: agent 0's "D" is highlighted (its own text run), the rest of the line is plain
    assert "agent 0: " in svg and "R R R" in svg and "valid, optimal" in svg


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40)])
async def test_play_app__fits_the_terminal_the_pane_is_the_map_s_width_and_quit_is_always_shown(tmp_path, size):
    app, game = new_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        board, pane, side = (screen.query_one(name).region for name in ("#board", "#board-pane", "#side"))
        assert pane.width <= board.width + 4  # the map's pane, not three fifths of the screen
        assert side.width >= size[0] - pane.width - 1 and side.width >= 40  # the panel gets the rest
        assert screen.query_one("#keys").region.width <= pane.width  # the key help wraps inside the pane
        for _ in range(40):  # the footer draws a moment later, later still while numba compiles the warm-up
            shot = app.export_screenshot().replace("&#160;", " ")
            if "Quit" in shot and "steps 0" in shot:
                break
            await pilot.pause(0.25)
        assert "Quit" in shot and "steps 0" in shot


async def test_play_app__q_on_an_unsaved_game_asks_first_and_a_saved_game_quits_at_once(tmp_path):
    app, game = new_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*WIN_KEYS[0])
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, GameScreen)  # warned, not gone
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    app, game = new_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*WIN_KEYS[0])
        await pilot.press("ctrl+s", "q")
        await pilot.pause()
        assert not app.is_running  # saved: nothing to lose
    app, game = new_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")  # nothing played yet: nothing to lose
        await pilot.pause()
        assert not app.is_running


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40)])
async def test_watch_app__the_map_pane_fits_the_map_and_the_panel_gets_the_rest(source, size):
    app = WatchApp(WatchState(source, ORDER.index("hole"), -1))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        board, pane, side = (app.screen.query_one(name).region for name in ("#board", "#board-pane", "#side"))
        assert pane.width <= board.width + 4 and side.width >= 40
        svg = app.export_screenshot().replace("&#160;", " ")
    assert "fell into the hole" in svg and "invalid" in svg


async def test_play_app__setup_errors_in_the_form_s_words_n_keeps_what_was_typed_and_escape_goes_back(tmp_path):
    app = PlayApp(None, save_path=tmp_path / "x.mlr", defaults=SetupValues(size=4, agents=2, holes=0.1, seed=3))
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#size").value = "99"
        await pilot.click("#generate")
        await pilot.pause(0.5)  # the button takes no second press while it still shows the first
        error = str(app.screen.query_one("#setup-error").render())
        assert error.startswith("map size: 99 is not allowed") and "sizes." not in error
        app.screen.query_one("#size").value = "5"
        await pilot.click("#generate")
        await pilot.pause(0.5)
        first = app.game
        assert first.instance.height == 5
        await pilot.press("n")  # nothing played: no question
        await pilot.pause()
        assert isinstance(app.screen, SetupScreen)
        assert app.screen.query_one("#size").value == "5" and app.screen.query_one("#seed").value == "4"
        await pilot.press("escape")  # back to the game it came from, not out of the app
        await pilot.pause()
        assert isinstance(app.screen, GameScreen) and app.game is first and app.is_running


async def test_watch_app__s_saves_a_png_of_the_step_and_h_lists_the_keys(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = write_cases(tmp_path / "cases.mlr")
    with ReplaySource(cases) as source:
        state = WatchState(source, ORDER.index("hole"), -1)
        app = WatchApp(state)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("h")
            for _ in range(40):  # the footer draws a moment later on a busy machine
                shot = app.export_screenshot()
                if "Quit" in shot:
                    break
                await pilot.pause(0.25)
    pngs = list(tmp_path.glob("cases-ep*-t*.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Quit" in shot


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_watch_app__a_step_with_several_failures_names_every_failing_agent(tmp_path, size):
    multi = write_multi(tmp_path / "multi.mlr")
    with ReplaySource(multi) as source:
        app = WatchApp(WatchState(source, 0, -1))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            events = str(app.query_one("#events").render())
            for _ in range(40):  # the footer draws a moment later on a busy machine
                shot = app.export_screenshot().replace("&#160;", " ")
                if "Quit" in shot:
                    break
                await pilot.pause(0.25)
    assert [line for line in events.splitlines() if line] == list(MULTI_SENTENCES)
    assert "Quit" in shot and "!0" in shot and "!3" in shot  # marked on the board (0 and 2 share a cell: 0 shows)
    if size[0] >= 120:  # wide enough for each sentence on one line of the screenshot
        for sentence in MULTI_SENTENCES:
            assert sentence in shot, sentence


async def test_play_app__a_step_with_several_failures_is_told_in_full(tmp_path):
    from tests.render.test_render_fixtures import MULTI_INSTANCE

    game = PlayGame(MULTI_INSTANCE, optimal_makespan=None, origin="test")
    app = PlayApp(game, save_path=tmp_path / "x.mlr")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("0", "right", "space", "left", "up", "enter")
        await pilot.pause()
        assert game.over
    verdict = game.verdict()
    assert "agent 3 fell into the hole" in verdict and "agents 0 and 2 collided" in verdict
    assert [line for line in game.log() if line.startswith("step 1")] == list(MULTI_SENTENCES)


async def test_watch_app__a_tick_that_lands_while_the_app_closes_draws_nothing(source):
    # While playing, the 20 Hz timer can fire after the widgets are removed on quit; that tick must not raise.
    state = WatchState(source, 0)
    app = WatchApp(state)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        await app.screen.query_one("Horizontal").remove()  # what closing does to the widgets
        app._shown = None
        state.step_by(1)
        app.refresh_view()
        assert app._shown is None  # nothing drawn, so the view is not marked as shown


def saved_steps(path) -> list[int]:
    from replays.reader import read_replay

    return [int(episode.events.shape[0]) for episode in read_replay(path)[1]]


@pytest.mark.parametrize("keys, steps", [
    # win, save, restart, one move, save: the solved game stays and the attempt joins it
    ([*[k for step in WIN_KEYS for k in step], "ctrl+s", "r", *WIN_KEYS[0], "ctrl+s"], [OPTIMAL_MAKESPAN, 1]),
    # two steps, save, undo, save: the two-step snapshot stays
    ([*WIN_KEYS[0], *WIN_KEYS[1], "ctrl+s", "u", "ctrl+s"], [2, 1]),
    # one step, save, three more, save: the same attempt carried on is saved once, as it stands now
    ([*WIN_KEYS[0], "ctrl+s", *[k for step in WIN_KEYS[1:] for k in step], "ctrl+s"], [OPTIMAL_MAKESPAN]),
    # saving twice with nothing new in between adds nothing
    ([*WIN_KEYS[0], "ctrl+s", "ctrl+s"], [1]),
])
async def test_play_app__saving_appends_and_keeps_every_earlier_game(tmp_path, keys, steps):
    app, game = new_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*keys)
        await pilot.pause()
    assert saved_steps(tmp_path / "played.mlr") == steps


async def test_play_app__save_into_an_existing_file_keeps_its_games(tmp_path):
    for _ in range(2):
        app, game = new_app(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(*WIN_KEYS[0], "ctrl+s")
            await pilot.pause()
    assert saved_steps(tmp_path / "played.mlr") == [1, 1]


@pytest.mark.parametrize("content, allowed", [
    (b"not a replay", "replay"),
    (b"", "replay"),
    (None, "play"),  # a replay of another kind (an eval file): its header would be lost
])
def test_play_app__an_existing_save_file_that_is_not_played_games_is_refused(tmp_path, content, allowed):
    path = tmp_path / "other.mlr"
    if content is None:
        write_cases(path)
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    game = PlayGame(INSTANCE, optimal_makespan=OPTIMAL_MAKESPAN, origin="test")
    with pytest.raises(ConfigError, match=allowed) as caught:
        PlayApp(game, save_path=path)
    assert "other.mlr" in str(caught.value)
    assert path.read_bytes() == before


def test_load_instance__reads_what_gen_prints_each_episode_by_number(tmp_path):
    from simulator.cli import _describe
    from simulator.config import StageConfig
    from simulator.generator import generate

    items = generate(StageConfig.from_dict({"agents": 2, "samples": 2, "seed": 1, "sizes": {
        3: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})).instances
    path = tmp_path / "printed.txt"
    path.write_text("\n".join(_describe(item) for item in items) + "size 3: 2 instances\nchecksum 00\n")
    for episode, item in enumerate(items):
        assert load_instance(path, episode)[0] == item.instance
    with pytest.raises(ConfigError, match="--episode"):
        load_instance(path, 2)


def _inside(region, size) -> bool:
    return region.width > 0 and region.x >= 0 and region.y >= 0 and region.right <= size[0] and region.bottom <= size[1]


async def test_play_app__the_setup_form_fits_80x24_with_its_error_and_load_row_and_starts_focused(tmp_path):
    """At 80x24 the error and the Load section were below the fold, and nothing was focused."""
    size = (80, 24)
    app = PlayApp(None, save_path=tmp_path / "x.mlr", defaults=SetupValues(size=4, agents=2, holes=0.1, seed=3))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert app.focused is app.screen.query_one("#size")
        await pilot.press("backspace", "9", "9")  # typing goes to the size at once
        await pilot.click("#generate")
        await pilot.pause(0.5)
        assert "map size: 99 is not allowed" in str(app.screen.query_one("#setup-error").render())
        for name in ("#setup-error", "#generate", "#path", "#episode", "#load", "#seed"):
            assert _inside(app.screen.query_one(name).region, size), name
    loading = PlayApp(None, save_path=tmp_path / "y.mlr", defaults=SetupValues(load=str(tmp_path / "a.mlr")))
    async with loading.run_test(size=size) as pilot:
        await pilot.pause()
        assert loading.focused is loading.screen.query_one("#path")


async def test_play_app__n_after_a_game_started_from_flags_offers_the_next_map(tmp_path):
    """play --size 4 --seed 7, then n and Generate: the same map came back (the form kept seed 7)."""
    from curriculum.cli import build_parser
    from render.cli import play_start

    game, defaults, config = play_start(build_parser().parse_args(["play", "--size", "4", "--seed", "7"]))
    assert defaults.seed == 8 and config is not None
    app = PlayApp(game, save_path=tmp_path / "x.mlr", defaults=defaults, stage_config=config)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        await pilot.pause()
        assert app.screen.query_one("#seed").value == "8" and app.screen.query_one("#size").value == "4"
        await pilot.click("#generate")
        await pilot.pause(0.5)
        assert isinstance(app.screen, GameScreen) and app.game.instance != game.instance
