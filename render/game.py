"""A game of MAPF-FrozenLake played by hand: the session behind ``mapf-lake play`` (no Textual in here).

The board's state is the simulator's: :class:`PlayGame` holds a ``simulator.env.MapfEnv`` and steps it; the
only things kept beside it are what a player's session needs and the env does not hold: the joint action being
composed (one pending action per agent, and which agent is selected), the env states after each step (for undo
and for the replay), and the actions played. Outcomes are the judge's (``simulator.judge.judge_plan`` on the
actions played), so a saved game scores exactly like a rollout.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replays.container import MAGIC
from replays.errors import ReplayError
from replays.types import Episode, InstanceLabels, Outcome, ReplayHeader
from render.timeline import Marker, Scene, event_sentence, markers_for_step
from simulator import constants as C
from simulator.config import StageConfig
from simulator.env import MapfEnv
from simulator.errors import ConfigError
from simulator.files import MAX_INSTANCES_BYTES, load_json, open_regular, read_text_bounded
from simulator.generator import LabelledInstance, certify_labelled, generate
from simulator.judge import judge_plan
from simulator.solver import solve
from simulator.text import counted, parse_instances
from simulator.types import Instance, JointPlan

HINT_TIME_LIMIT = 5.0  # seconds the solver may take for a hint or for the optimal makespan of a loaded map


@dataclass(frozen=True)
class SetupValues:
    """What the play app's setup form starts with: the map to generate, or the file to load."""

    size: int = 6
    agents: int = 2
    holes: float = 0.2
    """Hole ratio."""
    wait_ratio: float = 0.3
    seed: int = 0
    load: str | None = None
    """An instance file to load (the form's path field), or None."""
    episode: int = 0
    """Which instance of that file."""


@dataclass(frozen=True)
class Hint:
    """An optimal way to finish from the current state: ``sequences[k]`` are agent k's actions."""

    sequences: list[list[int]]
    makespan: int  # steps still needed


class PlayGame:
    """One instance played a joint step at a time.

    Args:
        instance: the map, starts and goals.
        labels: the generator's labels when it came from the generator or a replay (else None).
        optimal_makespan: known optimum; None = take it from ``labels`` or ask the solver (within
            ``HINT_TIME_LIMIT``; None when the solver gives up).
        origin: where the instance came from, for the replay's metadata.

    Flow: :meth:`select` an agent, :meth:`set_action` for it (the selection moves on to the next agent still
    on its way), :meth:`commit` the joint step. After a failure or when everyone is home the game is over:
    :meth:`undo` or :meth:`restart`.
    """

    pending: np.ndarray  # (K,) int8: the joint action being composed (set by restart)

    def __init__(
        self,
        instance: Instance,
        labels: InstanceLabels | None = None,
        optimal_makespan: int | None = None,
        origin: str = "",
    ) -> None:
        self.instance = instance
        self.labels = labels
        self.origin = origin
        self.env = MapfEnv(instance)
        if optimal_makespan is None and labels is not None:
            optimal_makespan = labels.optimal_makespan
        if optimal_makespan is None:
            solution = solve(instance, time_limit=HINT_TIME_LIMIT)
            optimal_makespan = solution.makespan if solution.solved else None
        self.optimal_makespan = optimal_makespan
        self.restart()

    # --- reading ------------------------------------------------------------------------------------------
    @property
    def n_agents(self) -> int:
        return self.instance.n_agents

    @property
    def steps(self) -> int:
        return len(self._actions)

    @property
    def positions(self) -> np.ndarray:
        return self._states[-1].pos

    @property
    def status(self) -> np.ndarray:
        return self._states[-1].status

    @property
    def over(self) -> bool:
        return self.env.done

    @property
    def won(self) -> bool:
        return bool((self.status == C.ON_GOAL).all())

    def moving_agents(self) -> list[int]:
        return [k for k in range(self.n_agents) if self.status[k] == C.MOVING]

    def scene(self) -> Scene:
        """The last step taken (at rest), with its failure markers; the starts before the first step."""
        after = self._states[-1]
        if self.steps == 0:
            return Scene(self.instance, after.pos, after.pos, after.status, after.status, (), 0, 0,
                         trail=after.pos[None])
        before = self._states[-2]
        return Scene(self.instance, before.pos, after.pos, before.status, after.status, self.last_markers,
                     self.steps, self.steps, self._actions[-1], np.stack([state.pos for state in self._states]))

    @property
    def last_markers(self) -> tuple[Marker, ...]:
        if self.steps == 0:
            return ()
        before, after = self._states[-2], self._states[-1]
        return markers_for_step(before.pos, after.pos, after.events, self._actions[-1])

    def log(self) -> list[str]:
        """One line per event of the steps taken so far: arrivals, slips and failures, oldest first."""
        lines = []
        for t in range(1, self.steps + 1):
            before, after = self._states[t - 1], self._states[t]
            for k in np.flatnonzero(after.events & C.EV_GOAL).tolist():
                lines.append(f"step {t}: agent {k} reached its goal")
            for marker in markers_for_step(before.pos, after.pos, after.events, self._actions[t - 1]):
                lines.append(event_sentence(t, marker))
        return lines

    def verdict(self) -> str:
        """One line on how the game stands."""
        optimum = "?" if self.optimal_makespan is None else str(self.optimal_makespan)
        if self.won:
            tag = "optimal!" if self.optimal_makespan == self.steps else f"optimal is {optimum}"
            return f"solved in {counted(self.steps, 'step')} ({tag})"
        failures = [marker for marker in self.last_markers if marker.is_failure]
        if failures:
            return "failed: " + "; ".join(marker.describe() for marker in failures)
        if self.over:
            return f"out of time: the step limit is {self.env.horizon}"
        if self.n_agents == 1:
            return "in play: the agent is on its way"
        return f"in play: {len(self.moving_agents())} of {self.n_agents} agents on their way"

    # --- composing a joint action -------------------------------------------------------------------------
    def select(self, agent: int) -> None:
        if not 0 <= agent < self.n_agents:
            raise ConfigError("agent", agent, f"0..{self.n_agents - 1}")
        self.selected = agent

    def select_next(self, direction: int = 1) -> None:
        """Select the next agent (cycling), preferring agents still on their way."""
        moving = self.moving_agents() or list(range(self.n_agents))
        later = [k for k in moving if (k - self.selected) * direction > 0]
        if later:
            self.selected = min(later) if direction > 0 else max(later)
        else:
            self.selected = min(moving) if direction > 0 else max(moving)

    def set_action(self, action: int, advance: bool = True) -> None:
        """Give the selected agent ``action`` for the next step; then select the next agent on its way."""
        if not 0 <= action < C.N_ACTIONS:
            raise ConfigError("action", action, f"0..{C.N_ACTIONS - 1} {C.ACTION_NAMES}")
        self.pending[self.selected] = action
        if advance:
            self.select_next()

    # --- stepping -----------------------------------------------------------------------------------------
    def commit(self) -> tuple[Marker, ...]:
        """Step the env with the pending joint action; returns the step's markers. Raises ConfigError when the
        game is over."""
        if self.over:
            raise ConfigError("step", self.steps, "a game that is not over (undo or restart)")
        actions = self.pending.copy()
        self.env.step(actions)
        self._states.append(self.env.state)
        self._actions.append(actions)
        self.pending = np.zeros(self.n_agents, np.int8)
        moving = self.moving_agents()
        if moving and self.selected not in moving:
            self.selected = moving[0]
        return self.last_markers

    def undo(self) -> bool:
        """Take the last step back (the env is set to the state before it); False when at the start."""
        if not self._actions:
            return False
        self._actions.pop()
        self._states.pop()
        self.env.set_state(self._states[-1])
        self.pending = np.zeros(self.n_agents, np.int8)
        return True

    def restart(self) -> None:
        self.env.reset()
        self._states = [self.env.state]  # state after each step; [0] = the starts
        self._actions: list[np.ndarray] = []  # (K,) int8 per step
        self.pending = np.zeros(self.n_agents, np.int8)  # (K,) the joint action being composed
        moving = self.moving_agents()
        self.selected = moving[0] if moving else 0

    def hint(self) -> Hint | str:
        """An optimal way to finish from here (and its first joint action put in the pending actions), or why
        there is none."""
        if self.won:
            return "everyone is home already"
        if self.over:
            return "the game is over: undo (u) or restart (r) first"
        # Agents on their goal stay there for good: as solver starts on their own goals they never move, the
        # same rule as in play. Nobody has fallen (that ends the game), so the cells are distinct.
        here = Instance(grid=self.instance.grid, starts=self.positions, goals=self.instance.goals)
        solution = solve(here, time_limit=HINT_TIME_LIMIT)
        if not solution.solved:
            return "no way to finish from here: undo (u) or restart (r)" if solution.status == "unsolvable" else (
                f"the solver gave up ({solution.reason})")
        assert solution.plan is not None  # a solved Solution carries its plan
        sequences = solution.plan.sequences()
        self.pending = np.array([seq[0] if seq else C.WAIT for seq in sequences], dtype=np.int8)
        return Hint(sequences, solution.makespan)

    # --- recording ----------------------------------------------------------------------------------------
    def to_episode(self) -> Episode:
        """The game so far as a replay episode, judged like any plan (``simulator.judge.judge_plan``)."""
        steps = self.steps
        actions = np.stack(self._actions, axis=1) if steps else np.zeros((self.n_agents, 0), np.int8)
        plan = JointPlan(actions=actions, lengths=np.full(self.n_agents, steps))
        verdict = judge_plan(self.instance, plan)
        return Episode(
            instance=self.instance,
            labels=self.labels,
            plan=plan,
            parse_error=None,
            positions=np.stack([state.pos for state in self._states]),
            events=(np.stack([state.events for state in self._states[1:]]) if steps
                    else np.zeros((0, self.n_agents), np.int8)),
            outcome=Outcome.from_judgement(verdict, self.optimal_makespan),
            extra={"mode": "play", "origin": self.origin},
        )


def play_header(stage_config: dict[str, Any] | None = None) -> ReplayHeader:
    """The header of a file of hand-played games."""
    return ReplayHeader.new(run_id="play", stage=0, split="play", policy={"name": "human", "spec": "play"},
                            stage_config=stage_config)


# --- where a game's instance comes from -----------------------------------------------------------------------
def generate_instance(
    size: int, agents: int, holes: float, wait_ratio: float, seed: int
) -> tuple[Instance, InstanceLabels, dict[str, Any]]:
    """One certified instance from the generator; returns it, its labels and the stage config used.

    ``wait_ratio`` is the chance that the instance needs a wait: a seeded draw decides it, so over many seeds
    that share of games needs one (the generator's own ratio is per stage, and a stage of one would round it).
    """
    if isinstance(wait_ratio, bool) or not isinstance(wait_ratio, (int, float)) or not 0 <= wait_ratio <= 1:
        raise ConfigError("wait ratio", wait_ratio, "a share in [0, 1]")
    wants_wait = random.Random(seed).random() < wait_ratio
    document = {
        "agents": agents,
        "samples": 1,
        "seed": seed,
        "sizes": {size: {"data_ratio": 1.0, "hole_ratio": holes, "wait_ratio": 1.0 if wants_wait else 0.0}},
    }
    config = StageConfig.from_dict(document)
    item = generate(config).instances[0]
    return item.instance, InstanceLabels.from_labelled(item), config.to_dict()


def load_instance(path: str | os.PathLike[str], episode: int = 0) -> tuple[Instance, InstanceLabels | None]:
    """The instance in ``path``: a replay file (its episode ``episode``), JSON lines from ``mapf-lake gen --out``
    (line ``episode``), one instance as JSON (``{grid, starts, goals}``), or map text (``A0 . H`` ...) such as
    what ``mapf-lake gen`` prints (its instance ``episode``).

    Raises ReplayError for a bad replay file, ConfigError for anything else that is wrong.
    """
    from replays.reader import ReplayReader

    path = Path(path)
    name = os.fspath(path)
    what = "an instance file: a replay, JSON lines from gen --out, one instance as JSON, or map text"
    with open_regular(path, what, "--load") as handle:  # a FIFO or device is refused, never waited on
        head = handle.read(len(MAGIC))
    if head == MAGIC:
        with ReplayReader(path) as reader:
            if not 0 <= episode < len(reader):
                raise ConfigError("--episode", episode, f"0..{len(reader) - 1} (the file has {counted(len(reader), 'episode')})")
            chosen = reader[episode]
            return chosen.instance, chosen.labels
    text = read_text_bounded(path, MAX_INSTANCES_BYTES, what, "--load")
    try:
        return _text_instance(text, name, episode)
    except ConfigError as error:
        if not error.args[0].startswith((name, "--")):  # say which file (--episode errors name the flag)
            error.args = (f"{name}: {error.args[0]}",)
        raise


def _text_instance(text: str, name: str, episode: int) -> tuple[Instance, InstanceLabels | None]:
    """:func:`load_instance` of a file that is not a replay: JSON lines, one instance as JSON, or map text."""
    if text.lstrip().startswith(("{", "[")):  # JSON (map text starts with a tile, never a bracket)
        # split at line feeds only, as eval --instances reads the file (str.splitlines also breaks at a lone CR
        # and at U+2028 inside a JSON string): both commands read the same records under the same line numbers
        lines = [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
        if len(lines) > 1 or "optimal_makespan" in text:
            if not 0 <= episode < len(lines):
                raise ConfigError("--episode", episode, f"0..{len(lines) - 1} (the file has {counted(len(lines), 'instance')})")
            number, line = lines[episode]
            data = load_json(line, name, "an instance record (a JSON object)", line=number, object_only=True)
            where = f"{name} line {number}"
            try:
                if "optimal_makespan" not in data:
                    return Instance.from_dict(data), None
                item = LabelledInstance.from_dict(data)
            except ConfigError as exc:
                key = exc.field.removeprefix("instance record").lstrip(".") or "record"
                raise ConfigError(f"{where}: {key}", exc.value, exc.allowed) from None
            certify_labelled(item, where)  # the file's labels are shown beside the game: never taken on trust
            return item.instance, InstanceLabels.from_labelled(item)
        return Instance.from_dict(load_json(text, name, "an instance as JSON", object_only=True)), None
    instances = parse_instances(text)  # map text, or what gen prints: instance ``episode`` of it
    if not 0 <= episode < len(instances):
        raise ConfigError("--episode", episode, f"0..{len(instances) - 1} (the file has {counted(len(instances), 'instance')})")
    return instances[episode], None


def read_saved_games(path: str | os.PathLike[str]) -> tuple[ReplayHeader | None, list[Episode]]:
    """The header and games of a save file that already exists, which saving adds to (``(None, [])`` when there is
    none yet). Anything else at ``path`` (not a replay, damaged, a replay of another kind whose header saving would
    lose) raises ConfigError naming it, before anything is played."""
    from replays.reader import read_replay

    where = Path(path)
    if not where.exists():
        return None, []
    allowed = "a new file, or a replay of played games (split 'play') to add the games to"
    if not where.is_file():
        raise ConfigError("--save", os.fspath(path), allowed, "it is not a regular file")
    try:
        header, episodes = read_replay(where)
    except ReplayError as exc:
        raise ConfigError("--save", os.fspath(path), allowed, str(exc)) from None
    if header.split != "play":
        raise ConfigError("--save", os.fspath(path), allowed, f"it is a {header.split!r} replay")
    return header, episodes


def save_games(path: str | os.PathLike[str], episodes: list[Episode],
               stage_config: dict[str, Any] | None = None) -> None:
    """Write hand-played games to a replay file (atomically: the file appears whole or not at all). ``episodes``
    is the file's whole content: callers adding to a file pass its earlier games first (``read_saved_games``)."""
    from replays.writer import ReplayWriter

    if not episodes:
        raise ReplayError(os.fspath(path), "file", "no games to save")
    with ReplayWriter(path, play_header(stage_config)) as writer:
        for episode in episodes:
            writer.write(episode)
