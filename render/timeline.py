"""What a view shows at one step: scenes and failure markers, read from a recorded trace (no pygame, no Textual).

A :class:`Scene` is one transition of the board: the agents' cells before and after a step, their status after
it, and the :class:`Marker` of every failure of that step placed where it happened. The pygame drawing, the
terminal board and the image export all draw scenes, so the three show the same thing.

Nothing here applies the rules: positions, status and events come from the replay (or from ``MapfEnv`` in
play mode); this module only reads them. Status over time is the running record of the ``EV_HOLE`` and
``EV_GOAL`` flags from the instance's initial status (``simulator.rules.initial_status``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from simulator import constants as C
from simulator.rules import initial_status
from simulator.types import Instance

if TYPE_CHECKING:
    from replays.types import Episode

Cell = tuple[int, int]

# Marker kinds are the names of the failure table's rows (``simulator.failures.KINDS``) that have a marker.
ILLEGAL = C.FAILURE_NAMES[C.ILLEGAL_MOVE]
HOLE = C.FAILURE_NAMES[C.FELL_IN_HOLE]
VERTEX = C.FAILURE_NAMES[C.VERTEX_CONFLICT]
EDGE = C.FAILURE_NAMES[C.EDGE_CONFLICT]
NOT_REACHED = C.FAILURE_NAMES[C.GOAL_NOT_REACHED]
SLIP = C.EVENT_NAMES[C.EV_SLIP]
# The kinds a step's event flags mark, in the order the markers are listed: failures by reporting priority,
# then the events that are no failure (slips).
_FLAGGED = tuple(sorted((kind for kind in C.KINDS if kind.event_bit and kind.placement is not None),
                        key=lambda kind: (kind.priority is None, kind.priority or 0, kind.event_bit)))


@dataclass(frozen=True)
class Marker:
    """One event drawn where it happened.

    Fields:
        kind: the name of a failure table row that has a marker (``simulator.failures.KINDS``):
            ``"illegal_move"``, ``"hole"``, ``"vertex_conflict"``, ``"edge_conflict"``, ``"goal_not_reached"``
            or ``"slip"``.
        agents: the agents involved, ascending (two or more for a conflict).
        cell: where to draw it: the hole fallen into, the shared cell, the cell of the agent that tried to
            leave the map (or that did not reach its goal).
        other: for an edge conflict the other end of the swapped edge; for an illegal move the off-grid cell
            it tried to enter (outside the map); else None.
    """

    kind: str
    agents: tuple[int, ...]
    cell: Cell
    other: Cell | None = None

    @property
    def is_failure(self) -> bool:
        return C.KIND_BY_NAME[self.kind].is_failure

    def describe(self) -> str:
        """One line for logs and panels, e.g. ``"agents 0 and 2 swapped cells (0, 1) and (0, 2) (edge conflict)"``
        (the ``sentence`` template of the kind's row of the failure table)."""
        sentence = C.KIND_BY_NAME[self.kind].sentence
        assert sentence is not None  # every kind with a marker has its sentence (the failure table's rule)
        return sentence.format(
            who=_agents_text(self.agents), cell=self.cell, other=self.other,
            goal="its goal" if len(self.agents) == 1 else "their goals",
        )


def event_sentence(step: int, marker: Marker) -> str:
    """The plain sentence every viewer shows for ``marker`` at ``step``, e.g.
    ``"step 3: agents 0 and 2 collided in cell (1, 2) (vertex conflict)"``."""
    return f"step {step}: {marker.describe()}"


def _agents_text(agents: tuple[int, ...]) -> str:
    if len(agents) == 1:
        return f"agent {agents[0]}"
    return "agents " + ", ".join(str(k) for k in agents[:-1]) + f" and {agents[-1]}"


def _cell(point: np.ndarray) -> Cell:  # (2,) row, column
    return int(point[0]), int(point[1])


def markers_for_step(
    before: np.ndarray, after: np.ndarray, events: np.ndarray, actions: np.ndarray | None = None
) -> tuple[Marker, ...]:
    """The markers of one step from its trace.

    Args:
        before, after: ``(K, 2)`` cells before and after the step.
        events: ``(K,)`` event flags of the step (``constants.EV_*``).
        actions: ``(K,)`` the joint action taken, when known: it gives the direction of an illegal move.

    Returns markers in reporting priority (illegal move, hole, vertex, edge, then slips); conflicts are grouped
    (one marker per shared cell, one per swapped pair).
    """
    flags = [int(flag) for flag in events]
    markers: list[Marker] = []
    for kind in _FLAGGED:
        assert kind.placement is not None  # _FLAGGED keeps the kinds that have one
        flagged = [k for k, flag in enumerate(flags) if flag & kind.event_bit]
        markers.extend(_PLACE[kind.placement](kind.name, flagged, before, after, actions))
    return tuple(markers)


def _place_agent(name: str, flagged: list[int], before: np.ndarray, after: np.ndarray,
                 actions: np.ndarray | None) -> list[Marker]:
    """One marker per flagged agent, at its cell after the step."""
    return [Marker(name, (k,), _cell(after[k])) for k in flagged]


def _place_attempt(name: str, flagged: list[int], before: np.ndarray, after: np.ndarray,
                   actions: np.ndarray | None) -> list[Marker]:
    """One marker per flagged agent that stayed put, with the cell it tried to enter when the action is known."""
    markers = []
    for k in flagged:
        target = None
        if actions is not None:
            delta = C.ACTION_DELTAS[int(actions[k])]
            target = (int(before[k][0] + delta[0]), int(before[k][1] + delta[1]))
        markers.append(Marker(name, (k,), _cell(after[k]), target))
    return markers


def _place_cell(name: str, flagged: list[int], before: np.ndarray, after: np.ndarray,
                actions: np.ndarray | None) -> list[Marker]:
    """One marker per cell the flagged agents share after the step."""
    cells: dict[Cell, list[int]] = {}
    for k in flagged:
        cells.setdefault(_cell(after[k]), []).append(k)
    return [Marker(name, tuple(agents), cell) for cell, agents in cells.items()]


def _place_pair(name: str, flagged: list[int], before: np.ndarray, after: np.ndarray,
                actions: np.ndarray | None) -> list[Marker]:
    """One marker per pair of flagged agents that swapped cells (from the first's cell to the second's)."""
    markers = []
    paired: set[int] = set()
    for i in flagged:
        for j in flagged:
            if j <= i or i in paired or j in paired:
                continue
            if _cell(after[i]) == _cell(before[j]) and _cell(after[j]) == _cell(before[i]):
                paired.update((i, j))
                markers.append(Marker(name, (i, j), _cell(before[i]), _cell(after[i])))
    for k in flagged:  # a flag whose partner the trace does not show: still mark the agent
        if k not in paired:
            markers.append(Marker(name, (k,), _cell(before[k]), _cell(after[k])))
    return markers


# How a step's flags place each kind's markers (the table's ``placement``).
_PLACE: dict[str, Callable[[str, list[int], np.ndarray, np.ndarray, np.ndarray | None], list[Marker]]] = {
    "agent": _place_agent, "attempt": _place_attempt, "cell": _place_cell, "pair": _place_pair,
}


@dataclass(frozen=True, eq=False)
class Scene:
    """One transition of the board, ready to draw at any interpolation ``alpha`` in [0, 1].

    Fields:
        instance: the map, starts and goals.
        before: ``(K, 2) int32`` cells before the step (equal to ``after`` at step 0).
        after: ``(K, 2) int32`` cells after the step.
        status_before, status_after: ``(K,) int8`` agent status (``constants.MOVING / ON_GOAL / FALLEN``).
        markers: the step's events, placed (see :class:`Marker`).
        step: the step shown (0 = the starts).
        n_steps: steps in the episode (or taken so far, in play).
        actions: ``(K,)`` the joint action of this step when known (illegal moves bump toward it), else None.
        trail: ``(step + 1, K, 2) int32`` every agent's cell after each step so far (row 0 = starts, the last row
            equals ``after``) when the history is known, else None; the viewers draw it as path trails.
    """

    instance: Instance
    before: np.ndarray  # (K, 2) int32
    after: np.ndarray  # (K, 2) int32
    status_before: np.ndarray  # (K,) int8
    status_after: np.ndarray  # (K,) int8
    markers: tuple[Marker, ...]
    step: int
    n_steps: int
    actions: np.ndarray | None = None  # (K,) int8
    trail: np.ndarray | None = None  # (step + 1, K, 2) int32

    def sentences(self) -> list[tuple[str, bool]]:
        """``(sentence, is_failure)`` for every event of this step, in the markers' order (see
        :func:`event_sentence`): a step with several failures names each of them."""
        return [(event_sentence(self.step, marker), marker.is_failure) for marker in self.markers]

    def marked_agents(self) -> tuple[int, ...]:
        """Agents that take part in a failure of this step (drawn as ``!k`` on the terminal board)."""
        return tuple(sorted({k for marker in self.markers if marker.is_failure for k in marker.agents}))


def status_trace(instance: Instance, events: np.ndarray) -> np.ndarray:
    """``(T+1, K) int8`` each agent's status after each step, from the initial status and the event flags."""
    n_steps = int(events.shape[0])
    status = np.empty((n_steps + 1, instance.n_agents), dtype=np.int8)
    status[0] = initial_status(instance)
    for t in range(n_steps):
        row = status[t].copy()
        flags = events[t]
        row[(flags & C.EV_HOLE) != 0] = C.FALLEN
        row[(flags & C.EV_GOAL) != 0] = C.ON_GOAL
        status[t + 1] = row
    return status


class EpisodeTimeline:
    """The scenes of one recorded episode, step by step.

    Args:
        instance: the episode's instance.
        positions: ``(T+1, K, 2)`` cells after each step (row 0 = starts).
        events: ``(T, K)`` event flags.
        actions: ``(K, horizon)`` the plan's actions, or None (no plan): step ``t`` used column ``t - 1``.
        unreached_at_end: when the episode failed with ``goal_not_reached``, mark the agents not on their goal
            at the last step.
    """

    def __init__(
        self,
        instance: Instance,
        positions: np.ndarray,
        events: np.ndarray,
        actions: np.ndarray | None = None,
        unreached_at_end: bool = False,
    ) -> None:
        self.instance = instance
        self.positions = np.asarray(positions, dtype=np.int32)
        self.events = np.asarray(events, dtype=np.int8)
        self.n_steps = int(self.positions.shape[0]) - 1
        self.actions = actions
        self.status = status_trace(instance, self.events)
        self._unreached_at_end = unreached_at_end
        self._scenes: dict[int, Scene] = {}

    @classmethod
    def from_episode(cls, episode: Episode) -> "EpisodeTimeline":
        """From a ``replays.types.Episode`` (decoding a lazy episode's arrays may raise ``ReplayError``)."""
        plan = episode.plan
        return cls(
            episode.instance,
            episode.positions,
            episode.events,
            None if plan is None else plan.actions,
            unreached_at_end=episode.outcome.failure == C.GOAL_NOT_REACHED,
        )

    def joint_action(self, step: int) -> np.ndarray | None:
        """``(K,)`` the actions of step ``step`` (1..T) from the plan, or None."""
        if self.actions is None or step < 1 or step > self.actions.shape[1]:
            return None
        return self.actions[:, step - 1]

    def scene(self, step: int) -> Scene:
        """The transition into ``step`` (0..T); step 0 shows the starts at rest."""
        if not 0 <= step <= self.n_steps:
            raise IndexError(f"step {step} of an episode with {self.n_steps} steps")
        scene = self._scenes.get(step)
        if scene is None:
            scene = self._scenes[step] = self._build(step)
        return scene

    def _build(self, step: int) -> Scene:
        after = self.positions[step]
        markers: tuple[Marker, ...]
        if step == 0:
            before, status_before, markers, actions = after, self.status[0], (), None
        else:
            before, status_before = self.positions[step - 1], self.status[step - 1]
            actions = self.joint_action(step)
            markers = markers_for_step(before, after, self.events[step - 1], actions)
        if self._unreached_at_end and step == self.n_steps:
            goals = self.instance.goals
            unreached = [k for k in range(self.instance.n_agents) if self.status[step][k] != C.ON_GOAL]
            markers = markers + tuple(Marker(NOT_REACHED, (k,), _cell(after[k]), _cell(goals[k])) for k in unreached)
        return Scene(
            self.instance, before, after, status_before, self.status[step], markers, step, self.n_steps, actions,
            self.positions[: step + 1],
        )


def spread(scene: Scene, points: np.ndarray) -> np.ndarray:
    """``points`` ``(K, 2)`` with the agents that share a cell (a vertex conflict of this step) moved apart by a
    fifth of a cell around it, so every one of them shows (the window, the images and the SVG alike)."""
    points = np.asarray(points, dtype=np.float64).copy()
    for marker in scene.markers:
        if marker.kind == VERTEX and len(marker.agents) > 1:
            count = len(marker.agents)
            for i, k in enumerate(marker.agents):
                angle = np.pi + 2 * np.pi * i / count
                points[k, 0] += 0.2 * np.sin(angle)
                points[k, 1] += 0.2 * np.cos(angle)
    return points


# What each marker means, in the legends' order (the window's, the images' and the SVG's): the failure table's.
# (Every kind in the legends has its few words: the filter only tells the type checker so.)
MARKER_MEANINGS: tuple[tuple[str, str], ...] = tuple(
    (kind.name, kind.meaning) for kind in C.LEGEND if kind.meaning is not None
)
# Glyphs (``simulator.failures.Kind.glyph``) drawn from a marker's cell to its ``other`` cell: a legend gives
# their sample a second cell, one icon to the right.
TWO_CELL_GLYPHS = frozenset({"swap", "off_map"})


def interpolate(scene: Scene, alpha: float) -> np.ndarray:
    """``(K, 2) float`` cell coordinates of every agent at ``alpha`` in [0, 1] through the scene's step.

    Moves glide in a straight line. An illegal move bumps toward the map's edge and comes back (the agent
    stays where it was); everything else is a straight interpolation of the recorded cells.
    """
    alpha = min(max(alpha, 0.0), 1.0)
    before = scene.before.astype(np.float64)
    points = before + (scene.after - before) * alpha
    for marker in scene.markers:
        if marker.kind == ILLEGAL and marker.other is not None:
            k = marker.agents[0]
            bump = 0.35 * float(np.sin(np.pi * alpha))
            points[k, 0] += (marker.other[0] - marker.cell[0]) * bump
            points[k, 1] += (marker.other[1] - marker.cell[1]) * bump
    return points
