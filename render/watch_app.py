"""``mapf-lake watch PATH --terminal``: the replay viewer in the terminal (Textual), for machines without a display.

Same state and keys as the pygame window (``render.watch_state.WatchState``): space play/pause, left/right
step, home/end first/last step, up/down speed, n/p next/previous episode, f failures only, q quit. The board is
the terminal board of ``render.term``; moves show step by step (a cell cannot glide), and the completion
scrolls to the tokens of the step shown.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Static

from render.source import Fact
from render.term import LEGEND, board_text, cell_shape, completion_text
from render.watch_state import WatchState

TICK_SECONDS = 1 / 20


def facts_text(facts: list[Fact]) -> Text:
    tones = {"good": "bold green", "bad": "bold red"}
    width = max((len(label) for label, _, _ in facts), default=0) + 2
    text = Text()
    for label, value, tone in facts:
        text.append(label.ljust(width), style="dim")
        text.append(value + "\n", style=tones.get(tone, ""))
    return text


class WatchApp(App[None]):
    """Replays in the terminal. ``state`` is built (and its first episode loaded) before the app starts, so a
    bad file fails before any screen is drawn."""

    TITLE = "mapf-lake watch"
    CSS = """
    #board-pane { width: auto; padding: 1 2; }
    #board { width: auto; height: auto; }
    #legend { width: 100%; height: auto; margin-top: 1; }
    #events { height: auto; padding: 0 1; }
    #side { width: 1fr; border-left: solid $primary; }
    #facts { padding: 0 1; height: auto; }
    #completion-box { height: 1fr; border-top: solid $primary; padding: 0 1; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit", priority=True),  # first, so the footer always shows how to quit
        Binding("space", "toggle_play", "Play/pause", priority=True),
        Binding("left", "step(-1)", "Back", priority=True),
        Binding("right", "step(1)", "Forward", priority=True),
        Binding("home", "go(0)", "First", show=False, priority=True),
        Binding("end", "go(-1)", "Last", show=False, priority=True),
        Binding("up", "speed(1)", "Faster", priority=True),
        Binding("down", "speed(-1)", "Slower", priority=True),
        Binding("n", "episode(1)", "Next", priority=True),
        Binding("p", "episode(-1)", "Previous", priority=True),
        Binding("f", "failures", "Failures only", priority=True),
        Binding("s", "snapshot", "PNG", priority=True),
        Binding("h", "help", "Help", priority=True),
    ]

    def __init__(self, state: WatchState) -> None:
        super().__init__()
        self.state = state
        self._last_tick = time.perf_counter()
        self._shown: tuple[object, ...] | None = None  # what the view shows (see refresh_view), None: redraw

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="board-pane"):
                yield Static(id="board")
                yield Static(Text(LEGEND, style="dim"), id="legend")
            with Vertical(id="side"):
                yield Static(id="events")  # the plain sentence of each failure, where there is room for it
                yield Static(id="facts")
                with VerticalScroll(id="completion-box"):
                    yield Static(id="completion")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(TICK_SECONDS, self._tick)
        self.refresh_view()

    def _tick(self) -> None:
        now = time.perf_counter()
        changed = self.state.advance(now - self._last_tick)
        self._last_tick = now
        if changed:
            self.refresh_view()

    def on_resize(self) -> None:
        self._shown = None
        self.refresh_view()

    def refresh_view(self) -> None:
        state = self.state
        # The terminal shows steps at rest: the step being entered appears once the move is half done.
        step = state.step if state.alpha >= 0.5 else max(0, state.step - 1)
        key = (state.index, step, state.playing, state.speed_index, state.failures_only, state.message)
        if key == self._shown:
            return
        try:  # a tick can land while the app closes, after its widgets are gone: nothing to draw then
            board_widget, pane = self.query_one("#board", Static), self.query_one("#board-pane")
            events_widget, facts_widget = self.query_one("#events", Static), self.query_one("#facts", Static)
            box, completion = self.query_one("#completion-box", VerticalScroll), self.query_one("#completion", Static)
        except NoMatches:
            return
        self._shown = key
        scene = state.loaded.timeline.scene(step)
        # The board gets about half the terminal; cells grow while the map still fits.
        shape = cell_shape(scene.instance, max(20, self.size.width // 2 - 6), max(6, self.size.height - 8))
        board = board_text(scene, cell=shape)
        board_widget.update(board)
        # the pane is as wide as the map (the legend and events wrap inside it), so the panel gets the rest
        width = max((len(line) for line in board.plain.splitlines()), default=20)
        pane.styles.width = max(width + 4, 26)
        events = Text()
        for sentence, is_failure in scene.sentences():  # every failure of the step, each in its own sentence
            events.append(sentence + "\n", style="bold red" if is_failure else "yellow")
        events_widget.update(events)
        facts = facts_text(state.facts())
        facts.append(state.status_line(), style="italic")
        if state.message:
            facts.append("\n" + state.message, style="yellow")
        facts_widget.update(facts)
        if state.completion:
            width = max(20, box.size.width - 3) if box.size.width else 60
            text, first = completion_text(state.completion, step, width)
            completion.update(text)
            if first is not None:
                box.scroll_to(y=max(0, first - 3), animate=False)
        else:
            completion.update(Text("no completion text recorded", style="dim"))

    # --- actions: one WatchState call each, then a redraw --------------------------------------------------
    def _after(self) -> None:
        self._shown = None
        self.refresh_view()

    def action_toggle_play(self) -> None:
        self.state.toggle_play()
        self._after()

    def action_step(self, delta: int) -> None:
        self.state.step_by(delta)
        self._after()

    def action_go(self, step: int) -> None:
        self.state.go_to_step(self.state.n_steps if step < 0 else step)
        self._after()

    def action_speed(self, direction: int) -> None:
        if direction > 0:
            self.state.faster()
        else:
            self.state.slower()
        self._after()

    def action_episode(self, direction: int) -> None:
        self.state.message = None
        if direction > 0:
            self.state.next_episode()
        else:
            self.state.previous_episode()
        self._after()

    def action_snapshot(self) -> None:
        """The frame shown, as the window's ``s`` saves it: a PNG beside the working folder."""
        from render.export import export_png
        from render.viewer import snapshot_path

        path = snapshot_path(self.state)
        try:
            export_png(self.state.source, self.state.index, self.state.step, path)
        except (OSError, ValueError) as exc:
            self.notify(str(exc), title="not saved", severity="error")
            return
        self.notify(f"saved {path}", title="snapshot")

    def action_help(self) -> None:
        self.notify("space play/pause · ←/→ step · home/end first/last · ↑/↓ speed · n/p next/previous episode · "
                    "f failures only · s save a PNG of this step · q quit", title="keys", timeout=8)

    def action_failures(self) -> None:
        self.state.message = None
        self.state.toggle_failures_only()
        self._after()
