"""The state of a replay viewer, shared by the pygame window and the Textual ``--terminal`` viewer.

Which episode, which step, how far the animation is into it, playing or paused, the speed, the failures-only
filter, the path trails, the completion's scroll. The two front ends map their keys to these methods and draw what
:meth:`WatchState.scene` and :meth:`WatchState.facts` return; neither keeps state of its own.

Time is one number, ``clock`` in steps: at rest on step ``t`` it equals ``t``; while playing it grows by
``speed * seconds``. The scene shown is the transition into ``ceil(clock)`` at ``alpha = clock - (ceil - 1)``.
"""

from __future__ import annotations

import math

from replays.errors import ReplayError
from render.completion import CompletionText
from render.source import Fact, ReplaySource, episode_facts
from render.timeline import Scene
from simulator.errors import ConfigError
from simulator.text import counted

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # steps per second
DEFAULT_SPEED_INDEX = 3  # 2 steps/s
END_HOLD_STEPS = 1.5  # while playing, an episode's last step stays this long (in steps) before the next one


def check_timing(fps: float, tween: int = 0) -> None:
    """ConfigError unless an exported animation's ``fps`` (frames, or steps, per second) and ``tween`` (in-between
    frames per step) are in range; the GIF, the MP4 and the SVG take the same."""
    if not 0.1 <= fps <= 60:
        raise ConfigError("--fps", fps, "0.1 <= frames per second <= 60")
    if not 0 <= tween <= 30:
        raise ConfigError("--tween", tween, "0..30 in-between frames per step")


class WatchState:
    """A viewer's state over a :class:`ReplaySource`.

    Args:
        source: the episodes.
        index: the episode shown first (the caller has checked the range).
        step: the step shown first; None = step 0; negative counts from the end (-1 = the last step).
        playing: start playing.
        trails: draw each agent's path so far (the window's ``t`` toggles it; exports draw it by default).

    Loading the first episode raises :class:`ReplayError` for a bad record; later episodes that fail to load
    are skipped with a message instead (a viewer should not die on one bad record).
    """

    def __init__(self, source: ReplaySource, index: int = 0, step: int | None = None, playing: bool = False,
                 trails: bool = True) -> None:
        self.source = source
        self.trails = trails  # draw each agent's path so far
        self.speed_index = DEFAULT_SPEED_INDEX
        self.playing = playing
        self.failures_only = False
        self.show_help = False
        self.message: str | None = None
        self.scroll = 0  # first wrapped line of the completion shown
        self.follow = True  # scroll the completion to the step's tokens on every step change
        self._hold = 0.0
        self.loaded = source.load(index)
        self.completion = CompletionText(self.loaded.episode.completion, self.loaded.episode.instance.n_agents)
        self.clock = 0.0
        if step is not None:
            self.clock = float(max(0, self.n_steps + 1 + step) if step < 0 else min(step, self.n_steps))

    # --- reading ------------------------------------------------------------------------------------------
    @property
    def index(self) -> int:
        return self.loaded.index

    @property
    def n_steps(self) -> int:
        return self.loaded.n_steps

    @property
    def step(self) -> int:
        """The step being shown (the transition being animated ends on it)."""
        return min(self.n_steps, max(0, math.ceil(self.clock - 1e-9)))

    @property
    def alpha(self) -> float:
        step = self.step
        return 1.0 if step == 0 else min(1.0, max(0.0, self.clock - (step - 1)))

    @property
    def speed(self) -> float:
        return SPEEDS[self.speed_index]

    def scene(self) -> Scene:
        return self.loaded.timeline.scene(self.step)

    def facts(self) -> list[Fact]:
        return episode_facts(self.loaded, self.step, len(self.source))

    def status_line(self) -> str:
        state = "playing" if self.playing else "paused"
        line = f"{state} · {self.speed:g} steps/s"
        if self.failures_only:
            line += " · failures only"
        return line

    # --- time -------------------------------------------------------------------------------------------
    def advance(self, seconds: float) -> bool:
        """Move the animation on by ``seconds`` of wall time; True when what is shown changed."""
        if not self.playing or seconds <= 0:
            return False
        if self.clock < self.n_steps:
            before = self.step
            self.clock = min(float(self.n_steps), self.clock + seconds * self.speed)
            if self.step != before:
                self.follow = True
            return True
        self._hold += seconds * self.speed
        if self._hold < END_HOLD_STEPS:
            return False
        self._hold = 0.0
        if not self.next_episode():
            self.playing = False
        return True

    def toggle_play(self) -> None:
        if not self.playing and self.clock >= self.n_steps:
            self.clock = 0.0  # play again from the start
        self.playing = not self.playing
        self._hold = 0.0

    def step_by(self, delta: int) -> None:
        """Pause and show step ``current + delta`` at rest (clamped to the episode).

        Mid-animation the current step is the one being entered, so "forward" first lands on it."""
        self.playing = False
        target = self.step if delta > 0 and self.alpha < 1.0 else self.step + delta
        self.clock = float(min(self.n_steps, max(0, target)))
        self.follow = True

    def go_to_step(self, step: int) -> None:
        self.playing = False
        self.clock = float(min(self.n_steps, max(0, step)))
        self.follow = True

    def faster(self) -> None:
        self.speed_index = min(len(SPEEDS) - 1, self.speed_index + 1)

    def slower(self) -> None:
        self.speed_index = max(0, self.speed_index - 1)

    # --- episodes -----------------------------------------------------------------------------------------
    def _candidates(self, direction: int) -> list[int]:
        """Episode indices after (direction +1) or before (-1) the current one, nearest first, wrapping around."""
        total = len(self.source)
        if self.failures_only:
            pool = self.source.failure_indices()
            after = [i for i in pool if i > self.index]
            before = [i for i in pool if i < self.index]
            return after + before if direction > 0 else before[::-1] + after[::-1]
        return [(self.index + direction * step) % total for step in range(1, total)]

    def _show(self, index: int) -> bool:
        try:
            loaded = self.source.load(index)
        except ReplayError as exc:
            self.message = f"skipped: {exc}"
            return False
        self.loaded = loaded
        self.completion = CompletionText(loaded.episode.completion, loaded.episode.instance.n_agents)
        self.clock = 0.0
        self.scroll = 0
        self.follow = True
        self._hold = 0.0
        return True

    def next_episode(self) -> bool:
        """Show the next episode (the next failure under the filter), from its step 0; playing goes on."""
        return self._move(+1)

    def previous_episode(self) -> bool:
        return self._move(-1)

    def _move(self, direction: int) -> bool:
        for index in self._candidates(direction)[:50]:  # a run of bad records should not freeze the viewer
            if self._show(index):
                return True
        if not self.message:
            self.message = "no other episode" + (" that failed" if self.failures_only else "")
        return False

    def toggle_failures_only(self) -> None:
        """Show only episodes that are not valid; jumps to the next one when the current episode is valid."""
        if self.failures_only:
            self.failures_only = False
            self.message = "showing all episodes"
            return
        failures = self.source.failure_indices()
        if not failures:
            self.message = "no failed episodes in this replay"
            return
        self.failures_only = True
        self.message = f"failures only: {len(failures)} of {counted(len(self.source), 'episode')}"
        if self.loaded.episode.outcome.valid:
            self._move(+1)

    def toggle_trails(self) -> None:
        self.trails = not self.trails
        self.message = "path trails " + ("on" if self.trails else "off")

    def scroll_by(self, lines: int) -> None:
        """Scroll the completion (the viewers clamp it); stops following the step until the step changes."""
        self.scroll = max(0, self.scroll + lines)
        self.follow = False
