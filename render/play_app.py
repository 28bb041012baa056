"""``mapf-lake play``: play MAPF-FrozenLake by hand in the terminal (Textual).

Two screens. The setup screen chooses a map (size, agents, holes, wait ratio, seed: a certified instance from
the generator) or loads one (a replay's episode, ``gen --out`` JSON lines, instance JSON or map text). The game
screen shows the board and, beside it, the agents with their pending actions, the step count against the
optimal makespan, the log of arrivals and failures, and the hint.

Keys on the game screen: tab / shift+tab or a digit select an agent; arrows or WASD give it a move and space a
wait (the selection then moves on to the next agent); enter commits the joint step; u undo, r restart, h hint
(an optimal way to finish from here, its first joint action filled in), ctrl+s save the game to the replay file,
n new game, q quit. Saving adds the game to the file and keeps every game saved before (this session's and the
file's own, when ``--save`` names a file of played games); only a snapshot that the game as it stands carries on
(the same moves and then more) is replaced by it.

The game lives in :class:`render.game.PlayGame` (a ``MapfEnv`` and its history); the widgets only show it.
"""

from __future__ import annotations

import os
from datetime import datetime
from dataclasses import replace
from typing import Any, Callable, TypeVar, cast

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, Static

from replays.errors import ReplayError
from replays.types import Episode
from render.game import Hint, PlayGame, SetupValues, generate_instance, load_instance, read_saved_games, save_games
from render.term import ARROW_GLYPHS, LEGEND, agent_chip, board_text, cell_shape
from simulator import constants as C
from simulator.errors import ConfigError
from simulator.text import counted, format_plan



Number = TypeVar("Number", int, float)


def default_save_path() -> str:
    return f"play-{datetime.now().strftime('%Y%m%d-%H%M%S')}.mlr"


def _play_app(screen: Screen[None]) -> PlayApp:
    """The app a screen of this module belongs to: Textual types ``screen.app`` as any App, and only
    :class:`PlayApp` pushes these screens."""
    return cast("PlayApp", screen.app)


class SetupScreen(Screen[None]):
    """Choose a generated map, or load one from a file."""

    BINDINGS = [Binding("escape", "back", "Back to the game / quit")]

    # What the form calls the stage-config fields a generation error names.
    FIELD_LABELS = (("hole_ratio", "hole ratio"), ("wait_ratio", "wait ratio"), ("sizes", "map size"),
                    ("agents", "agents"), ("seed", "seed"))

    def __init__(self, defaults: SetupValues, previous: PlayGame | None = None) -> None:
        super().__init__()
        self.defaults = defaults
        self.previous = previous  # the game this screen was opened from (n): escape goes back to it

    def action_back(self) -> None:
        if self.previous is not None:
            self.app.switch_screen(GameScreen(self.previous))
        else:
            self.app.exit()

    def _say(self, exc: Exception) -> None:
        """The error in the form's words: 'hole ratio: 0.95 is not allowed (...)', not an internal field."""
        field = getattr(exc, "field", None)
        label = next((name for key, name in self.FIELD_LABELS if isinstance(field, str) and key in field), None)
        if label is not None and isinstance(exc, ConfigError):
            text = f"{label}: {exc.value!r} is not allowed ({exc.allowed})"
        else:
            text = str(exc)
        self.query_one("#setup-error", Static).update(Text(text, style="bold red"))

    def compose(self) -> ComposeResult:
        # Two fields a row, the error under the title and the Load row last: the whole form, its error and the
        # Load section fit an 80x24 terminal (one field a row put the error and Load below the fold).
        d = self.defaults
        with VerticalScroll(id="setup"):
            yield Label("MAPF-FrozenLake: a new game", id="setup-title")
            yield Static("", id="setup-error")
            with Horizontal(classes="row"):
                yield Label("map size (3..32)", classes="name")
                yield Input(str(d.size), id="size", type="integer")
                yield Label("agents (1..16)", classes="name second")
                yield Input(str(d.agents), id="agents", type="integer")
            with Horizontal(classes="row"):
                yield Label("hole ratio (0..0.9)", classes="name")
                yield Input(str(d.holes), id="holes", type="number")
                yield Label("wait ratio (0..1)", classes="name second")
                yield Input(str(d.wait_ratio), id="wait_ratio", type="number")
            with Horizontal(classes="row"):
                yield Label("seed", classes="name")
                yield Input(str(d.seed), id="seed", type="integer")
                yield Button("Generate", id="generate", variant="primary")
            yield Label("or load an instance (replay .mlr, gen JSON lines, instance JSON, map text):", id="load-label")
            with Horizontal(classes="row"):
                yield Input(d.load or "", id="path", placeholder="path")
                yield Input(str(d.episode), id="episode", type="integer", placeholder="episode")
                yield Button("Load", id="load")

    def on_mount(self) -> None:
        # Typing starts at once (the form opened with nothing focused): in the path when one was given, else size.
        self.query_one("#path" if self.defaults.load else "#size", Input).focus()

    def _number(self, field: str, kind: Callable[[str], Number]) -> Number:
        raw = self.query_one(f"#{field}", Input).value.strip()
        try:
            return kind(raw)
        except ValueError:
            raise ConfigError(field, raw, f"a {'whole number' if kind is int else 'number'}") from None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        try:
            if event.button.id == "generate":
                instance, labels, config = generate_instance(
                    self._number("size", int), self._number("agents", int), self._number("holes", float),
                    self._number("wait_ratio", float), self._number("seed", int),
                )
                seed = self._number("seed", int)
                game = PlayGame(instance, labels, origin=f"generated seed {seed}")
                # the next new game starts from what was typed, with the next seed (not the same map again)
                app = _play_app(self)
                app.defaults = replace(app.defaults, size=self._number("size", int),
                                       agents=self._number("agents", int), holes=self._number("holes", float),
                                       wait_ratio=self._number("wait_ratio", float), seed=seed + 1)
                _play_app(self).start_game(game, config)
            else:
                path = self.query_one("#path", Input).value.strip()
                if not path:
                    raise ConfigError("path", path, "a file to load the instance from")
                instance, file_labels = load_instance(path, self._number("episode", int))
                _play_app(self).start_game(PlayGame(instance, file_labels, origin=path), None)
        except (ConfigError, ReplayError) as exc:
            self._say(exc)


class GameScreen(Screen[None]):
    """The board and the game's panel."""

    BINDINGS = [
        Binding("q", "quit_game", "Quit", priority=True),  # first, so the footer always shows how to quit
        Binding("tab", "next_agent(1)", "Next agent", priority=True),
        Binding("shift+tab", "next_agent(-1)", "Previous agent", show=False, priority=True),
        Binding("up,w", f"act({C.UP})", "Up", show=False, priority=True),
        Binding("down,s", f"act({C.DOWN})", "Down", show=False, priority=True),
        Binding("left,a", f"act({C.LEFT})", "Left", show=False, priority=True),
        Binding("right,d", f"act({C.RIGHT})", "Right", show=False, priority=True),
        Binding("space", f"act({C.WAIT})", "Wait", show=False, priority=True),
        Binding("enter", "commit", "Step", priority=True),
        Binding("u", "undo", "Undo", priority=True),
        Binding("r", "restart", "Restart", priority=True),
        Binding("h", "hint", "Hint", priority=True),
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("n", "new_game", "New", priority=True),
        *[Binding(str(k), f"select({k})", show=False, priority=True) for k in range(10)],
    ]

    def __init__(self, game: PlayGame) -> None:
        super().__init__()
        self.game = game
        self.hint_text: str = ""
        self._leave_armed: str | None = None  # "quit" or "new" after a first press that would lose the game

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="board-pane"):
                yield Static(id="board")
                yield Static(Text(LEGEND, style="dim"), id="legend")
                yield Static(id="keys")
            with VerticalScroll(id="side"):
                yield Static(id="status")
                yield Static(id="agents")
                yield Static(id="hint")
                yield Static(id="log")
        yield Footer()

    def on_resize(self) -> None:
        self.refresh_view()

    def on_mount(self) -> None:
        self.query_one("#keys", Static).update(Text(
            "tab/0-9 select · arrows/WASD move · space wait · enter step · u undo · r restart · h hint · ctrl+s save",
            style="dim"))
        self.refresh_view()

    def refresh_view(self) -> None:
        game = self.game
        # The board gets about three fifths of the terminal; cells grow while the map still fits.
        columns = max(20, (self.app.size.width * 3) // 5 - 6)
        rows = max(6, self.app.size.height - 12)
        shape = cell_shape(game.instance, columns, rows)
        selected = None if game.over else game.selected
        board = board_text(game.scene(), selected, game.pending, shape)
        self.query_one("#board", Static).update(board)
        # the pane is as wide as the map (legend and keys wrap inside it), so the panel gets the rest
        width = max((len(line) for line in board.plain.splitlines()), default=20)
        self.query_one("#board-pane").styles.width = max(width + 4, 26)
        optimum = "?" if game.optimal_makespan is None else str(game.optimal_makespan)
        status = Text()
        status.append(f"steps {game.steps} / optimal {optimum}\n", style="bold")
        tone = "bold green" if game.won else ("bold red" if game.over else "")
        status.append(game.verdict() + "\n", style=tone)
        status.append(f"{game.instance.height}x{game.instance.width} map, {counted(game.n_agents, 'agent')}")
        self.query_one("#status", Static).update(status)
        agents = Text("agents  (pending action)\n", style="bold")
        for k in range(game.n_agents):
            pointer = "▶ " if k == game.selected and not game.over else "  "
            agents.append(pointer)
            agents.append_text(agent_chip(k))
            agents.append(" ")
            state = int(game.status[k])
            if state == C.ON_GOAL:
                agents.append(" home ✓", style="green")
            elif state == C.FALLEN:
                agents.append(" fell in ✗", style="red")
            else:
                action = int(game.pending[k])
                agents.append(f" {ARROW_GLYPHS[action]} {C.ACTION_NAMES[action]}")
            agents.append("\n")
        self.query_one("#agents", Static).update(agents)
        self.query_one("#hint", Static).update(Text(self.hint_text, style="cyan") if self.hint_text else "")
        lines = game.log()
        log = Text("log\n", style="bold")
        for line in lines[-200:]:
            log.append(line + "\n", style="red" if "(" in line or "fell" in line else "")
        self.query_one("#log", Static).update(log)

    # --- actions (each one calls the game, then redraws) ----------------------------------------------------
    def action_next_agent(self, direction: int) -> None:
        self.game.select_next(direction)
        self.refresh_view()

    def action_select(self, agent: int) -> None:
        if agent < self.game.n_agents:
            self.game.select(agent)
            self.refresh_view()

    def action_act(self, action: int) -> None:
        if not self.game.over:
            self.game.set_action(action)
            self.refresh_view()

    def action_commit(self) -> None:
        if self.game.over:
            self.app.notify("the game is over: undo (u), restart (r) or a new game (n)", severity="warning")
            return
        markers = self.game.commit()
        self.hint_text = ""
        failures = [marker for marker in markers if marker.is_failure]
        if failures:
            self.app.notify("\n".join(marker.describe() for marker in failures),
                            title="failure" if len(failures) == 1 else f"{len(failures)} failures", severity="error")
        elif self.game.won:
            self.app.notify(self.game.verdict(), title="solved")
        self.refresh_view()

    def action_undo(self) -> None:
        if not self.game.undo():
            self.app.notify("nothing to undo")
        self.hint_text = ""
        self.refresh_view()

    def action_restart(self) -> None:
        self.game.restart()
        self.hint_text = ""
        self.refresh_view()

    def action_hint(self) -> None:
        hint = self.game.hint()
        if isinstance(hint, Hint):
            self.hint_text = (f"hint: {hint.makespan} more steps, e.g.\n{format_plan(hint.sequences)}\n"
                              "(its first step is filled in: press enter)")
        else:
            self.hint_text = f"hint: {hint}"
        self.refresh_view()

    def action_save(self) -> None:
        _play_app(self).save_game(self.game)

    def _would_lose(self, what: str) -> bool:
        """Whether leaving now loses moves nobody saved; if so, warn and arm ``what`` for a second press."""
        unsaved = self.game.steps > 0 and not _play_app(self).is_saved(self.game)
        if not unsaved or self._leave_armed == what:
            return False
        self._leave_armed = what
        key = "q" if what == "quit" else "n"
        self.app.notify(f"this game is not saved: ctrl+s saves it, {key} again {what}s without saving",
                        title="not saved", severity="warning")
        return True

    def action_quit_game(self) -> None:
        if not self._would_lose("quit"):
            self.app.exit()

    def action_new_game(self) -> None:
        if not self._would_lose("new"):
            self.app.switch_screen(SetupScreen(_play_app(self).defaults, previous=self.game))


def _warm_up() -> None:
    """Play one step of a 3x3 game and solve it once, so numba has compiled what play uses."""
    import numpy as np

    from simulator.types import Instance

    instance = Instance(grid=np.zeros((3, 3), np.int8), starts=[[0, 0]], goals=[[0, 2]])
    game = PlayGame(instance, origin="warm-up")
    game.set_action(C.RIGHT)
    game.commit()
    game.hint()


def _carries_on(earlier: Episode, now: Episode) -> bool:
    """Whether episode ``now`` is ``earlier``'s game carried on: the same moves, then perhaps more (an undo or a
    restart since makes it another attempt, saved beside the earlier one)."""
    if earlier.instance != now.instance or earlier.plan is None or now.plan is None:
        return False
    played = earlier.plan.actions.shape[1]
    return now.plan.actions.shape[1] >= played and bool((now.plan.actions[:, :played] == earlier.plan.actions).all())


def _game_signature(game: PlayGame) -> tuple[int, tuple[str, ...]]:
    """What a saved snapshot of ``game`` captured: its steps and its log (changed by any move, undo or restart)."""
    return game.steps, tuple(game.log())


class PlayApp(App[None]):
    """The play app. ``game`` starts straight on the game screen; without it the setup screen opens.

    Args:
        game: a game to start with, or None.
        save_path: the replay file that ctrl+s writes: the games already in it, then every game saved in this
            session, one episode each. An existing file that is not a replay of played games raises ConfigError.
        defaults: the setup screen's initial values (size, agents, holes, wait_ratio, seed, load, episode).
        stage_config: the config the first game came from, recorded in the replay header.
    """

    TITLE = "mapf-lake play"
    CSS = """
    #setup { width: 100%; max-width: 84; padding: 1 2; }
    #setup-title { text-style: bold; }
    #setup-error { height: auto; margin-bottom: 1; }
    .row { height: 3; }
    .name { width: 20; padding: 1 0; }
    .name.second { padding: 1 0 1 2; }
    #setup Input { width: 14; }
    #setup #path { width: 1fr; }
    #setup Button { margin: 0 0 0 2; }
    #load-label { margin-top: 1; }
    #board-pane { width: auto; padding: 1 2; }
    #board { width: auto; height: auto; }
    #legend, #keys { width: 100%; height: auto; margin-top: 1; }
    #side { width: 1fr; padding: 1 2; border-left: solid $primary; }
    #status, #agents, #hint { margin-bottom: 1; }
    """

    def __init__(
        self,
        game: PlayGame | None = None,
        save_path: str | os.PathLike[str] | None = None,
        defaults: SetupValues | None = None,
        stage_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.first_game = game
        self.save_path = os.fspath(save_path) if save_path is not None else default_save_path()
        self.defaults = defaults if defaults is not None else SetupValues()
        self.stage_config = stage_config
        self._kept_header, self._kept = read_saved_games(self.save_path)  # the file's games before this session
        self.saved: list[Episode] = []  # episodes saved this session, in order
        self._saved_games: list[PlayGame] = []  # the game behind each saved episode
        self._saved_as: dict[int, tuple[int, tuple[str, ...]]] = {}  # id(game) -> its signature when last saved

    def on_mount(self) -> None:
        # The step kernel and the solver are compiled on first use (seconds on a fresh install): do it now, in
        # the background, so the first enter or hint answers at once.
        self.run_worker(_warm_up, thread=True, exclusive=True, group="warm-up")
        if self.first_game is not None:
            self.push_screen(GameScreen(self.first_game))
        else:
            self.push_screen(SetupScreen(self.defaults))

    @property
    def game(self) -> PlayGame | None:
        screen = self.screen
        return screen.game if isinstance(screen, GameScreen) else None

    def start_game(self, game: PlayGame, stage_config: dict[str, Any] | None) -> None:
        if stage_config is not None and self.stage_config is None:
            self.stage_config = stage_config
        self.switch_screen(GameScreen(game))

    def is_saved(self, game: PlayGame) -> bool:
        """Whether ``game`` as it stands now is in the save file."""
        return self._saved_as.get(id(game)) == _game_signature(game)

    def save_game(self, game: PlayGame) -> None:
        """Add ``game`` (as it stands) to the saved games and rewrite the replay file with the file's earlier games
        and all of this session's. A snapshot is replaced only by the same game carried on (nothing it held is
        lost); after an undo or a restart the game is saved beside its earlier snapshot."""
        episode = game.to_episode()
        saved, games = list(self.saved), list(self._saved_games)
        if games and games[-1] is game and _carries_on(saved[-1], episode):
            saved[-1] = episode
        else:
            saved.append(episode)
            games.append(game)
        stage_config = self.stage_config
        if stage_config is None and self._kept_header is not None:
            stage_config = self._kept_header.stage_config
        try:
            save_games(self.save_path, self._kept + saved, stage_config)
        except (ReplayError, OSError) as exc:
            self.notify(str(exc), title="not saved", severity="error")
            return
        self.saved, self._saved_games = saved, games  # only once the file holds them
        self._saved_as[id(game)] = _game_signature(game)
        total = len(self._kept) + len(self.saved)
        self.notify(f"{counted(total, 'game')} in {self.save_path}: mapf-lake watch {self.save_path}", title="saved")
