"""Does an instance need a wait? The label behind the stage config's ``wait_ratio``.

Definition (exact): ``needs_wait(instance)`` is ``False`` when a conflict-free joint plan exists in which every
agent follows one of its own shortest paths and never waits, and ``True`` otherwise. An agent's *shortest paths*
are those of a lone agent on the bare map: 4-connected moves over ice, ignoring every other agent (including
agents that sit on their goals). Following one without waiting means the agent steps one cell closer to its goal
at every time step until it arrives at time ``d_k`` (its bare-map distance); a shortest path never touches the
goal before its end, so "never passing its own goal early" holds by construction. Arrived agents stand on their
goals for good (goals are absorbing), so a later agent whose every shortest path crosses an arrived agent's goal
at a later time is blocked. Conflicts are those of the rules (vertex and swap; following is fine). An agent that
cannot reach its goal at all has no shortest path, so such an instance needs a wait (``True``).

Equivalently, since every valid plan has arrival ``>= d_k`` for each agent: ``needs_wait`` is ``False`` exactly
when the optimal sum of costs equals ``sum_k d_k``. The tests check the kernel against that characterisation and
against ``needs_wait_reference``, a plain-Python breadth-first twin.
"""

from __future__ import annotations

import math
import time
from collections import deque

from simulator import constants as C
from simulator import needs_wait_kernels as K
from simulator.grid_kernels import deadline_of, interruptible
from simulator.documents import is_integer, is_real
from simulator.errors import ConfigError
from simulator.solver import solve
from simulator.types import Instance

__all__ = ["needs_wait", "needs_wait_search", "needs_wait_reference", "NeedsWaitLimit", "MAX_STATES_LIMIT",
           "MAX_STEPS_LIMIT"]

MAX_STATES_LIMIT = 1_000_000_000
MAX_STEPS_LIMIT = 10**15  # choices one search may try (keeps the counter far inside int64)
DEFAULT_MAX_STEPS = 20_000_000  # under a second of search on a 256x256 map; the benchmark range needs thousands
FALLBACK_SOLVER_NODES = 200_000  # the solver's budget when the no-wait search runs out of budget
_LIMIT_NAMES = {-1: "dead-state limit ({max_states} states)", -2: "step limit ({max_steps} choices tried)",
                -3: "time limit ({time_limit} s)"}


class NeedsWaitLimit(RuntimeError):
    """``needs_wait`` ran out of every budget it was given (search and solver): no exact answer either way.

    Attributes:
        reason: the limits that were hit, in words.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"needs_wait: limit reached, no verdict: {reason}")


def _check_budget(max_states: object, max_steps: object, time_limit: object) -> None:
    for name, value, top in (("max_states", max_states, MAX_STATES_LIMIT), ("max_steps", max_steps, MAX_STEPS_LIMIT)):
        if not is_integer(value) or not 1 <= value <= top:
            raise ConfigError(f"needs_wait.{name}", value, f"an integer with 1 <= {name} <= {top}")
    if time_limit is not None and (
        not is_real(time_limit)
        or not (math.isfinite(time_limit) and time_limit > 0)
    ):
        raise ConfigError("needs_wait.time_limit", time_limit, "None or a finite number of seconds > 0")


def needs_wait_search(
    instance: Instance,
    *,
    max_states: int = 100_000,
    max_steps: int = DEFAULT_MAX_STEPS,
    time_limit: float | None = None,
) -> tuple[bool | None, str]:
    """The no-wait search alone: ``(verdict, reason)``, verdict ``None`` when a budget ran out (``reason`` says
    which). The generator uses it before the solver, which decides the undecided ones from its sum of costs.

    Raises:
        ConfigError: ``instance`` is not an ``Instance`` or a budget is out of range.
    """
    verdict, reason, _ = _search(instance, max_states, max_steps, time_limit)
    return verdict, reason


def _search(
    instance: object, max_states: int, max_steps: int, time_limit: float | None
) -> tuple[bool | None, str, int]:
    if not isinstance(instance, Instance):
        raise ConfigError("needs_wait.instance", type(instance).__name__, "a simulator.types.Instance")
    _check_budget(max_states, max_steps, time_limit)
    verdict, bare_sum = interruptible(
        K.needs_wait_kernel, instance.grid, instance.starts, instance.goals, int(max_states), int(max_steps),
        deadline_of(time_limit),  # far off without a limit, so a Ctrl-C still stops the search
    )
    if verdict >= 0:
        return bool(verdict), "", int(bare_sum)
    limit = _LIMIT_NAMES[int(verdict)].format(max_states=max_states, max_steps=max_steps, time_limit=time_limit)
    return None, limit, int(bare_sum)


def needs_wait(
    instance: Instance,
    *,
    max_states: int = 100_000,
    max_steps: int = DEFAULT_MAX_STEPS,
    time_limit: float | None = None,
    solver_nodes: int = FALLBACK_SOLVER_NODES,
) -> bool:
    """True when no joint plan lets every agent walk one of its shortest paths without waiting (module docstring).

    Agents whose shortest paths can never meet are split into independent groups
    (``needs_wait_kernels.interacting_groups``); each group is a depth-first search over joint states that remembers
    dead states (``needs_wait_kernels.no_wait_plan_exists``). Instances of the benchmark range (up to 6 agents on
    10x10) record well under a thousand dead states. Every call is bounded: if a group piles up more than
    ``max_states`` dead states, or the groups together try more than ``max_steps`` choices, or ``time_limit``
    seconds pass, the answer comes from the optimal solver instead (its sum of costs against the sum of bare-map
    distances) with ``solver_nodes`` expansions and what is left of ``time_limit``. A caller that has solved the
    instance already has the answer without a search: ``solution.sum_of_costs > sum of bare-map distances``.

    Raises:
        ConfigError: ``instance`` is not an ``Instance`` or a budget is out of range.
        NeedsWaitLimit: both the search and the solver ran out of budget (no exact answer); a ``RuntimeError``.
    """
    started = time.perf_counter()
    verdict, reason, bare_sum = _search(instance, max_states, max_steps, time_limit)
    if verdict is not None:
        return verdict
    left = None
    if time_limit is not None:
        left = float(time_limit) - (time.perf_counter() - started)
        if left <= 0:
            raise NeedsWaitLimit(f"the search hit its {reason}, no time left for the solver")
    solution = solve(instance, max_nodes=solver_nodes, time_limit=left)
    if solution.status == "unsolvable":
        return True
    if solution.status != "solved":
        raise NeedsWaitLimit(f"the search hit its {reason}, and the solver its own ({solution.reason})")
    return solution.sum_of_costs > bare_sum


def _bare_distances(instance: Instance, goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    dist = {goal: 0}
    frontier = deque([goal])
    while frontier:
        r, c = frontier.popleft()
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            cell = (r + dr, c + dc)
            if (
                0 <= cell[0] < instance.height
                and 0 <= cell[1] < instance.width
                and instance.grid[cell] == C.ICE
                and cell not in dist
            ):
                dist[cell] = dist[(r, c)] + 1
                frontier.append(cell)
    return dist


def needs_wait_reference(instance: Instance) -> bool:
    """Plain-Python twin of ``needs_wait``: breadth-first over time layers of no-wait shortest-path states."""
    starts = [(int(r), int(c)) for r, c in instance.starts]
    goals = [(int(r), int(c)) for r, c in instance.goals]
    dists = [_bare_distances(instance, goal) for goal in goals]
    if any(start not in dist for start, dist in zip(starts, dists)):
        return True
    lengths = [dist[start] for start, dist in zip(starts, dists)]
    layer: set[tuple[tuple[int, int], ...]] = {tuple(starts)}
    for t in range(max(lengths, default=0)):
        following = set()
        for state in layer:
            choices = []
            for k, cell in enumerate(state):
                if t >= lengths[k]:
                    choices.append([cell])
                    continue
                r, c = cell
                steps = [
                    (r + dr, c + dc)
                    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
                    if dists[k].get((r + dr, c + dc), -1) == dists[k][cell] - 1
                ]
                choices.append(steps)
            partial: list[tuple[tuple[int, int], ...]] = [()]
            for options in choices:
                partial = [prefix + (cell,) for prefix in partial for cell in options]
            for nxt in partial:
                if len(set(nxt)) < len(nxt):
                    continue
                if any(
                    nxt[a] == state[b] and nxt[b] == state[a] and nxt[a] != state[a]
                    for a in range(len(nxt))
                    for b in range(a + 1, len(nxt))
                ):
                    continue
                following.add(nxt)
        layer = following
        if not layer:
            return True
    return False
