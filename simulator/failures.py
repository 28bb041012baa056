"""The failure table: every failure category and step event, with all that is said and drawn about it.

One :class:`Kind` row per category or event. Everything else reads its facts from here: the codes and event
bits (``simulator.constants`` re-exports them), the reporting priority (``rules.first_failure`` and the
kernels), the replay format's known codes and bits (``replays.codec_v1``), the failure summary's sentences
(``replays.mining``), and the viewers' markers, sentences and legends (``render.timeline``, ``render.draw``,
``render.svg``). Adding a failure kind means a row here and its rule in ``simulator.rules`` and the kernels.

Codes and bits are bytes of the replay format (``replays/FORMAT.md``): never renumber a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from operator import attrgetter


@dataclass(frozen=True)
class Kind:
    """One failure category, or one step event that is no failure (``code`` None).

    Fields:
        name: the metric, marker and event name used everywhere (``"vertex_conflict"``).
        code: the failure category code of a judged plan (``outcome.failure``); None for an event that is no
            failure (reaching a goal, a slip).
        event_bit: the per-agent ``EV_*`` flag a step sets for it; 0 when no step flags it (parse error, goal
            not reached).
        priority: among one step's failures the lowest is reported (its lowest agent); None when it is no step
            failure.
        sentence: what the viewers write for its marker (``render.timeline.Marker.describe``), a ``str.format``
            template over ``who`` (``"agents 0 and 2"``), ``cell``, ``other`` and ``goal`` (``"its goal"`` or
            ``"their goals"``); None when it has no marker.
        summary: what the failure summary says of an episode that failed so (``replays.mining``), a template over
            ``step``, ``steps`` (the step count with its noun: ``1 step``, ``4 steps``), ``agent``, ``where`` (the
            agent's cell after the failing step), ``final`` (its last cell),
            ``goal`` (its goal), ``other`` (another agent flagged with it) and ``error`` (the parse error);
            None for no failure.
        glyph: the marker's shape in the viewers (``render.draw`` and ``render.svg`` draw each); None: no marker.
        placement: how the viewers place its markers from a step's trace (``render.timeline.markers_for_step``):
            ``"agent"`` one per flagged agent at its cell, ``"attempt"`` the same plus the cell it tried to enter,
            ``"cell"`` one per shared cell, ``"pair"`` one per swapped pair, ``"unreached"`` one per agent off its
            goal at the episode's end; None: no marker.
        meaning: the legends' few words for its marker; None: not in the legends.
        legend: its place in the legends (0 first); None: not in the legends.
    """

    name: str
    code: int | None
    event_bit: int
    priority: int | None
    sentence: str | None
    summary: str | None
    glyph: str | None
    placement: str | None
    meaning: str | None
    legend: int | None

    @property
    def is_failure(self) -> bool:
        """A failure category other than ``none`` (a slip or a goal is an event, not a failure)."""
        return bool(self.code)


KINDS: tuple[Kind, ...] = (
    Kind("none", 0, 0, None, None, None, None, None, None, None),
    Kind("parse_error", 1, 0, None, None, "the answer did not parse: {error}", None, None, None, None),
    Kind("illegal_move", 2, 1, 0,
         "{who} tried to step off the map at {cell} (illegal move)",
         "step {step}: agent {agent} tried to move off the grid from {where}",
         "off_map", "attempt", "off the map", 3),
    Kind("hole", 3, 2, 1,
         "{who} fell into the hole at {cell}",
         "step {step}: agent {agent} fell into the hole at {where}",
         "ring_cross", "agent", "fell in a hole", 0),
    Kind("vertex_conflict", 4, 4, 2,
         "{who} collided in cell {cell} (vertex conflict)",
         "step {step}: agents {agent} and {other} share cell {where}",
         "burst", "cell", "collision", 1),
    Kind("edge_conflict", 5, 8, 3,
         "{who} swapped cells {cell} and {other} (edge conflict)",
         "step {step}: agents {agent} and {other} swap cells at {where}",
         "swap", "pair", "swap", 2),
    Kind("goal_not_reached", 6, 0, None,
         "{who} did not reach {goal} (goal not reached)",
         "the plan ended after {steps} with agent {agent} at {final}, not on its goal {goal}",
         "dashed_ring", "unreached", "goal not reached", 4),
    Kind("goal", None, 16, None, None, None, None, None, None, None),
    Kind("slip", None, 32, None, "{who} slipped sideways", None, "arc", "agent", "slip (no failure)", 5),
)

KIND_BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}
# Failure categories by code: ``FAILURES[code]``; the codes run 0..n-1 (checked below).
FAILURES: tuple[Kind, ...] = tuple(sorted((kind for kind in KINDS if kind.code is not None), key=attrgetter("code")))
# Step failures in reporting priority order.
STEP_FAILURES: tuple[Kind, ...] = tuple(
    sorted((kind for kind in KINDS if kind.priority is not None), key=attrgetter("priority"))
)
# Kinds the viewers draw, in the legends' order.
LEGEND: tuple[Kind, ...] = tuple(sorted((kind for kind in KINDS if kind.legend is not None), key=attrgetter("legend")))

EV_ALL = reduce(int.__or__, (kind.event_bit for kind in KINDS), 0)  # every bit a step may set
EV_FAILURE_MASK = reduce(int.__or__, (kind.event_bit for kind in STEP_FAILURES), 0)


def _check() -> None:
    if [kind.code for kind in FAILURES] != list(range(len(FAILURES))):
        raise AssertionError("failure codes must run 0..n-1")
    if [kind.priority for kind in STEP_FAILURES] != list(range(len(STEP_FAILURES))):
        raise AssertionError("step failure priorities must run 0..n-1")
    bits = [kind.event_bit for kind in KINDS if kind.event_bit]
    if any(bit & (bit - 1) for bit in bits) or len(set(bits)) != len(bits) or EV_ALL > 127:
        raise AssertionError("event bits must be distinct single bits of an int8")
    if any(kind.event_bit == 0 for kind in STEP_FAILURES):
        raise AssertionError("a step failure needs an event bit")


_check()
