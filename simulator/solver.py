"""The built-in optimal MAPF solver: certifies instances and labels them with optimal makespan and sum of costs.

Contract:
    ``solve(instance)`` returns a :class:`Solution` whose status is
    - ``"solved"``: ``plan`` is a valid joint plan (``simulator.rules.judge`` accepts it) whose makespan is the
      instance's optimal makespan; ``sum_of_costs`` is the optimal sum of costs over *all* valid plans (it may
      belong to another plan than ``plan``). ``plan`` also has the optimal sum of costs whenever some plan is
      optimal in both at once and the search met one (always when the sum-of-costs pass's plan has the optimal
      makespan); otherwise it is a makespan-optimal plan whose ties were steered towards fewer costs;
    - ``"unsolvable"``: a proof exists and ``reason`` states it: an agent cannot reach its goal even alone, or
      a group of agents exhausted its whole joint state space (adding agents only adds constraints);
    - ``"limit"``: the node or time budget ran out first; no claim either way.

Rules modelled (rules v1, ``simulator.rules``): simultaneous moves on 4-connected ice; vertex and swap conflicts
fail, following and rotations are fine; goals are absorbing (an agent that steps on its goal stays there and
blocks the cell from then on, so it can never pass through its own goal early; an agent starting on its goal
never moves). Arrival time = first step on the goal; makespan = max arrival; sum of costs = sum of arrivals.

Method (numba, ``simulator.independence_kernels`` and ``simulator.astar_kernels``): both objectives are shortest paths in the graph of joint states (a
state is the agents' cells, since arrival is absorbing). A first pass proves the makespan, a second the sum of
costs, unless the first plan already meets a lower bound. Each pass is Standley's independence detection: agents
start alone on shortest paths; conflicting groups first try to re-plan around the others at no extra cost, and
merge when they cannot. A merged group is searched by A* with operator decomposition (one agent's move per node,
intermediate nodes deduplicated on exactly what their future depends on), with a consistent heuristic from
single-agent distances and, for larger groups, exact two-agent cost-to-go tables combined over disjoint pairs.
``brute_force_optimum`` is the plain-Python reference the tests compare with; ``random_instance`` draws the random
instances the tests and ``mapf-lake bench solver`` (``curriculum.benches.solver``) run it on.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from simulator import astar_kernels
from simulator import constants as C
from simulator import independence_kernels as K
from simulator.documents import is_integer, is_real
from simulator.errors import ConfigError
from simulator.grid_kernels import INF, bare_neighbor_table, deadline_of, distances_from, interruptible
from simulator.types import Instance, JointPlan

__all__ = ["Solution", "solve", "brute_force_optimum", "MAX_NODES_LIMIT"]

SOLVED = "solved"
UNSOLVABLE = "unsolvable"
LIMIT = "limit"
MAX_NODES_LIMIT = 1_000_000_000  # most node expansions one call may be allowed (keeps counters in int64 range)


@dataclass(frozen=True)
class Solution:
    """What ``solve`` found.

    Fields:
        status: ``"solved"``, ``"unsolvable"`` or ``"limit"``.
        plan: a makespan-optimal valid joint plan (``(K, makespan)`` actions, lengths = arrival steps); ``None``
            unless solved.
        makespan: the optimal makespan; -1 unless solved.
        sum_of_costs: the optimal sum of costs over all valid plans; -1 unless solved.
        reason: for ``"unsolvable"`` the proof in words; for ``"limit"`` the limit that was hit; else ``""``.
        expanded: joint-search nodes expanded (0 when every agent could keep its own shortest path).
    """

    status: str
    plan: JointPlan | None
    makespan: int
    sum_of_costs: int
    reason: str
    expanded: int

    @property
    def solved(self) -> bool:
        return self.status == SOLVED


# One (row, col) per agent: a joint state of the plain-Python reference search.
JointState = tuple[tuple[int, int], ...]


def _cell(point: Sequence[int] | npt.NDArray[Any]) -> tuple[int, int]:
    return int(point[0]), int(point[1])


def _check_limits(max_nodes: object, time_limit: object) -> None:
    if not is_integer(max_nodes) or not 1 <= max_nodes <= MAX_NODES_LIMIT:
        raise ConfigError("solve.max_nodes", max_nodes, f"an integer with 1 <= max_nodes <= {MAX_NODES_LIMIT}")
    if time_limit is not None:
        if not is_real(time_limit) or not (math.isfinite(time_limit) and time_limit > 0):
            raise ConfigError("solve.time_limit", time_limit, "None or a finite number of seconds > 0")


def _unsolvable_agent_reason(instance: Instance, agent: int) -> str:
    start, goal = _cell(instance.starts[agent]), _cell(instance.goals[agent])
    # Say whether holes alone cut the agent off, or agents standing on their goals from the start do.
    width = instance.width
    dist = distances_from(bare_neighbor_table(instance.grid), start[0] * width + start[1])
    if dist[goal[0] * width + goal[1]] >= INF:
        return f"agent {agent} cannot reach its goal {goal} from {start}: holes cut it off"
    sitting = [
        k
        for k in range(instance.n_agents)
        if k != agent and np.array_equal(instance.starts[k], instance.goals[k])
    ]
    cells = ", ".join(f"agent {k} at {_cell(instance.goals[k])}" for k in sitting)
    return (
        f"agent {agent} cannot reach its goal {goal} from {start}: every path crosses an agent that starts on its "
        f"goal and never leaves it ({cells})"
    )


def solve(instance: Instance, *, max_nodes: int = 200_000, time_limit: float | None = None) -> Solution:
    """Solve ``instance`` optimally (see the module docstring for the contract).

    Args:
        instance: a validated :class:`Instance`.
        max_nodes: budget of joint-search node expansions over the whole call (``1..MAX_NODES_LIMIT``).
        time_limit: wall-clock budget in seconds, or ``None`` for none.

    Raises:
        ConfigError: ``instance`` is not an ``Instance``, or a limit is out of range.
    """
    if not isinstance(instance, Instance):
        raise ConfigError("solve.instance", type(instance).__name__, "a simulator.types.Instance")
    _check_limits(max_nodes, time_limit)
    deadline = deadline_of(time_limit)  # far off without a limit, so a Ctrl-C still stops the search
    # The tuning knobs are read at call time so tests can force every code path (they never change results).
    status, makespan, sum_of_costs, expanded, actions, lengths, culprits, _ = interruptible(
        K.solve_kernel, instance.grid, instance.starts, instance.goals, int(max_nodes), deadline, K.ESCALATE_AFTER,
        K.REPLAN_BUDGET,
    )
    expanded = int(expanded)
    if status == astar_kernels.SOLVED:
        if makespan > C.MAX_PLAN_LENGTH:
            return Solution(
                LIMIT, None, -1, -1, f"the optimal plan has {makespan} steps, more than {C.MAX_PLAN_LENGTH}", expanded
            )
        # The kernel emits only legal codes and consistent lengths; the constructor re-checks them anyway.
        plan = JointPlan(actions=actions, lengths=lengths)
        return Solution(SOLVED, plan, int(makespan), int(sum_of_costs), "", expanded)
    if status == astar_kernels.UNSOLVABLE_AGENT:
        agent = int(np.argmax(culprits))
        return Solution(UNSOLVABLE, None, -1, -1, _unsolvable_agent_reason(instance, agent), expanded)
    if status == astar_kernels.UNSOLVABLE_GROUP:
        members = [int(k) for k in np.flatnonzero(culprits)]
        names = ", ".join(str(k) for k in members)
        moving = int(np.any(instance.starts != instance.goals, axis=1).sum())
        # A group that fails alone proves the whole instance unsolvable: more agents only add constraints.
        alone = "" if len(members) == moving else " even without the other agents"
        reason = (
            f"joint state space exhausted: agents {names} have no joint plan{alone} "
            f"({expanded} nodes expanded), so no joint plan exists"
        )
        return Solution(UNSOLVABLE, None, -1, -1, reason, expanded)
    if status == astar_kernels.INCONSISTENT:
        raise RuntimeError(
            f"solver inconsistency on {instance.to_dict()}: the sum-of-costs pass found no plan although the "
            "makespan pass did; please report this instance"
        )
    if status == astar_kernels.LIMIT_NODES:
        return Solution(LIMIT, None, -1, -1, f"node limit reached: max_nodes = {max_nodes} expansions", expanded)
    return Solution(LIMIT, None, -1, -1, f"time limit reached: time_limit = {time_limit} s", expanded)


# ------------------------------------------------------------------------------------ plain-Python reference
def _joint_successors(instance: Instance, state: JointState) -> list[JointState]:
    """Every joint state reachable in one failure-free step from ``state`` (a tuple of (row, col) per agent).

    Written straight from the rules, independently of the kernels: arrived agents (on their goal) stay; others
    wait or move to an in-grid ice neighbour; no two agents may end in one cell or swap cells.
    """
    goals = [_cell(g) for g in instance.goals]
    per_agent = []
    for k, (r, c) in enumerate(state):
        if (r, c) == goals[k]:
            per_agent.append([(r, c)])
            continue
        moves = [(r, c)]
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < instance.height and 0 <= nc < instance.width and instance.grid[nr, nc] == C.ICE:
                moves.append((nr, nc))
        per_agent.append(moves)
    result = []
    for combo in itertools.product(*per_agent):
        if len(set(combo)) < len(combo):
            continue
        swap = False
        for i in range(len(combo)):
            for j in range(i + 1, len(combo)):
                if combo[i] == state[j] and combo[j] == state[i] and combo[i] != state[i]:
                    swap = True
        if not swap:
            result.append(combo)
    return result


def brute_force_optimum(instance: Instance, max_horizon: int = 10_000) -> tuple[int, int] | None:
    """Reference optimum by exhaustive search over joint states (plain Python; for tests, small instances only).

    The optimal makespan is the breadth-first depth of the all-on-goal state; the optimal sum of costs is its
    Dijkstra distance with a step costing the number of agents not yet on their goal (a joint state's future
    depends only on the cells, since arrival is absorbing). Returns ``(makespan, sum_of_costs)``, or ``None``
    when the breadth-first search exhausts every reachable joint state without reaching the goals.

    Raises:
        RuntimeError: the breadth-first search passed ``max_horizon`` steps without a verdict.
    """
    start = tuple(_cell(s) for s in instance.starts)
    goal = tuple(_cell(g) for g in instance.goals)
    successors: dict[JointState, list[JointState]] = {}

    def next_states(state: JointState) -> list[JointState]:
        if state not in successors:
            successors[state] = _joint_successors(instance, state)
        return successors[state]

    depth = {start: 0}
    frontier = deque([start])
    makespan = None
    while frontier:
        state = frontier.popleft()
        if state == goal:
            makespan = depth[state]
            break
        if depth[state] >= max_horizon:
            raise RuntimeError(f"brute force passed max_horizon = {max_horizon} steps without a verdict")
        for nxt in next_states(state):
            if nxt not in depth:
                depth[nxt] = depth[state] + 1
                frontier.append(nxt)
    if makespan is None:
        return None
    best = {start: 0}
    heap = [(0, start)]
    while heap:
        cost, state = heapq.heappop(heap)
        if cost > best[state]:
            continue
        if state == goal:
            return makespan, cost
        step_cost = sum(1 for k in range(len(state)) if state[k] != goal[k])
        for nxt in next_states(state):
            if cost + step_cost < best.get(nxt, math.inf):
                best[nxt] = cost + step_cost
                heapq.heappush(heap, (cost + step_cost, nxt))
    raise AssertionError("the goal was reached by breadth-first search but not by Dijkstra")  # pragma: no cover


# ------------------------------------------------------------------------------------------ random instances
def random_instance(rng: np.random.Generator, side: int, n_agents: int, hole_ratio: float) -> Instance:
    """A benchmark instance: each cell a hole with probability ``hole_ratio``, distinct starts and distinct goals
    on ice, each goal reachable from its agent's start (drawn from the start's connected region)."""
    while True:
        grid = (rng.random((side, side)) < hole_ratio).astype(np.int8)
        free = [(int(r), int(c)) for r, c in np.argwhere(grid == C.ICE)]
        if len(free) < n_agents:
            continue
        region_of: dict[tuple[int, int], int] = {}
        for cell in free:  # label connected regions of ice
            if cell in region_of:
                continue
            region_of[cell] = len(region_of)
            label = region_of[cell]
            frontier = [cell]
            while frontier:
                r, c = frontier.pop()
                for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if nxt in region_of or not (0 <= nxt[0] < side and 0 <= nxt[1] < side) or grid[nxt] != C.ICE:
                        continue
                    region_of[nxt] = label
                    frontier.append(nxt)
        starts = [free[i] for i in rng.choice(len(free), n_agents, replace=False)]
        goals: list[tuple[int, int]] = []
        for start in starts:
            options = [cell for cell in free if region_of[cell] == region_of[start] and cell not in goals]
            if not options:
                break
            goals.append(options[int(rng.integers(len(options)))])
        if len(goals) == n_agents:
            return Instance(grid=grid, starts=starts, goals=goals)
