"""Independence detection around the joint A*, and ``solve_kernel``: the whole optimal MAPF solver in one kernel.

Free functions over plain arrays, ``@njit(cache=True)``, serial; array conventions are those of
``simulator.grid_kernels``. ``simulator.solver.solve`` is the validating wrapper.
"""

from __future__ import annotations

import numpy as np

from simulator import constants as C
from simulator.astar_kernels import (
    INCONSISTENT,
    LIMIT_NODES,
    LIMIT_TIME,
    MODE_MAKESPAN,
    MODE_SOC,
    SOLVED,
    UNSOLVABLE_AGENT,
    UNSOLVABLE_GROUP,
    group_astar,
)
from simulator.grid_kernels import INF, bfs_distances, flat_instance, neighbor_table
from simulator.jit import BoolArray, BoolScalar, Int8Array, Int32Array, Int64Array, IntScalar, njit
from simulator.pair_tables import pair_cost_to_go

_WAIT, _UP, _DOWN, _LEFT, _RIGHT = C.WAIT, C.UP, C.DOWN, C.LEFT, C.RIGHT

# Effort knobs: they change how the search gets there, never the answer. ``solver.solve`` passes the first two
# at call time (the tests force every route with them); the rest are compiled in.
ESCALATE_AFTER = 2000  # expansions a group of 3+ agents gets with the plain heuristic before pair tables are built
REPLAN_BUDGET = 2000  # expansions one independence-detection re-plan attempt may use before the groups merge
# A sum-of-costs re-plan may also use twice what the group's own solve took (merging costs far more); makespan
# re-plans have slack up to the makespan bound and either succeed fast or not at all.
_REPLAN_EFFORT_FACTOR_SOC = 2
_REPLAN_EFFORT_FACTOR_MAKESPAN = 0
MAX_PAIR_TABLE_ENTRIES = 1 << 24  # per table kind: beyond that (64 MiB) groups search without pairwise tables


# -------------------------------------------------------------------------------------- agent paths over time
@njit(cache=True)
def _pos_at(plan: Int32Array, arrival: Int64Array, agent: IntScalar, t: IntScalar) -> IntScalar:
    """Cell of ``agent`` at time ``t``: its path, then its goal forever (goals are absorbing)."""
    cell: IntScalar = plan[agent, arrival[agent]] if t >= arrival[agent] else plan[agent, t]
    return cell


@njit(cache=True)
def _step_conflicts(plan: Int32Array, arrival: Int64Array, planned: BoolArray, agent: IntScalar, src: IntScalar,
                    dst: IntScalar, t: IntScalar) -> int:
    """How many planned agents (other than ``agent``) conflict with ``agent`` moving ``src -> dst`` into time t."""
    count = 0
    for other in range(planned.shape[0]):
        if not planned[other] or other == agent:
            continue
        other_now = _pos_at(plan, arrival, other, t)
        if other_now == dst:
            count += 1
        elif src != dst and other_now == src and _pos_at(plan, arrival, other, t - 1) == dst:
            count += 1
    return count


@njit(cache=True)
def shortest_path_avoiding(nbr: Int32Array, dist_row: Int32Array, start: IntScalar, goal: IntScalar, plan: Int32Array,
                           arrival: Int64Array, planned: BoolArray, agent: IntScalar, best: Int64Array,
                           prev: Int32Array, queue: Int32Array) -> None:
    """Write into ``plan[agent]`` a shortest path (no waits) that has the fewest conflicts with planned agents.

    A shortest path moves one layer down the distance map per step, so the cells at time t are exactly those
    with ``dist = d - t``: a DP over that layered DAG picks, among all shortest paths, one with the fewest
    vertex/edge conflicts with the ``planned`` agents' current paths. Any shortest path is optimal for a lone
    agent under both objectives; choosing a conflict-poor one only spares independence detection merges.
    Sets ``arrival[agent] = d``. ``plan`` must have at least ``d + 1`` columns.
    """
    length = dist_row[start]
    best[:] = INF
    best[start] = 0
    prev[start] = -1
    queue[0] = start
    head = 0
    tail = 1
    while head < tail:
        cell = queue[head]
        head += 1
        if cell == goal:
            continue
        t_next = length - dist_row[cell] + 1
        for action in range(1, 5):
            target = nbr[cell, action]
            if target < 0 or dist_row[target] != dist_row[cell] - 1:
                continue
            cost = best[cell] + _step_conflicts(plan, arrival, planned, agent, cell, target, t_next)
            if best[target] == INF:
                queue[tail] = target
                tail += 1
            if cost < best[target]:
                best[target] = cost
                prev[target] = cell
    cell = goal
    for t in range(length, -1, -1):
        plan[agent, t] = cell
        cell = prev[cell]
    arrival[agent] = length


@njit(cache=True)
def first_conflict(plan: Int32Array, arrival: Int64Array, active: BoolArray, group_of: Int64Array) -> tuple[int, int]:
    """Earliest vertex or edge conflict between agents of different groups: ``(a, b)`` or ``(-1, -1)``."""
    n_agents = arrival.shape[0]
    horizon = 0
    for k in range(n_agents):
        if active[k] and arrival[k] > horizon:
            horizon = arrival[k]
    # After the last arrival every agent stands still on its own (distinct) goal: nothing more can conflict.
    for t in range(1, horizon + 1):
        for a in range(n_agents):
            if not active[a]:
                continue
            a_now = _pos_at(plan, arrival, a, t)
            a_before = _pos_at(plan, arrival, a, t - 1)
            for b in range(a + 1, n_agents):
                if not active[b] or group_of[a] == group_of[b]:
                    continue
                b_now = _pos_at(plan, arrival, b, t)
                if a_now == b_now:
                    return a, b
                if a_now != a_before and a_now == _pos_at(plan, arrival, b, t - 1) and b_now == a_before:
                    return a, b
    return -1, -1


# ------------------------------------------------------------------------------- independence detection
@njit(cache=True)
def _members_of(group_of: Int64Array, group: IntScalar) -> Int64Array:
    count = 0
    for k in range(group_of.shape[0]):
        if group_of[k] == group:
            count += 1
    members = np.empty(count, np.int64)
    i = 0
    for k in range(group_of.shape[0]):
        if group_of[k] == group:
            members[i] = k
            i += 1
    return members


@njit(cache=True)
def _others_of(group_of: Int64Array, group: IntScalar, active: BoolArray) -> Int64Array:
    count = 0
    for k in range(group_of.shape[0]):
        if active[k] and group_of[k] != group:
            count += 1
    others = np.empty(count, np.int64)
    i = 0
    for k in range(group_of.shape[0]):
        if active[k] and group_of[k] != group:
            others[i] = k
            i += 1
    return others


@njit(cache=True)
def _install(plan: Int32Array, arrival: Int64Array, members: Int64Array, goals: Int64Array,
             path: Int32Array) -> Int32Array:
    """Copy a group's path into the plan (widening it if needed); returns the plan."""
    length = path.shape[0] - 1
    if length + 1 > plan.shape[1]:
        wider = np.empty((plan.shape[0], length + 1), np.int32)
        for k in range(plan.shape[0]):
            for t in range(arrival[k] + 1):
                wider[k, t] = plan[k, t]
        plan = wider
    for i in range(members.shape[0]):
        k = members[i]
        t_arrive = 0
        while path[t_arrive, i] != goals[k]:
            t_arrive += 1
        for t in range(t_arrive + 1):
            plan[k, t] = path[t, i]
        arrival[k] = t_arrive
    return plan


@njit(cache=True)
def _pair_rows(members: Int64Array, pair_row_global: Int64Array, compute: BoolScalar, nbr: Int32Array,
               free_index: Int64Array, free_cells: Int64Array, goals: Int64Array, table_soc: Int32Array,
               table_makespan: Int32Array) -> Int64Array:
    """Local ``(G, G)`` rows of the group's pair tables; fills missing tables when ``compute``, else -1 if any is
    missing (then the caller searches without pairs)."""
    n_members = members.shape[0]
    n_agents = pair_row_global.shape[0]
    pair_row = np.full((n_members, n_members), -1, np.int64)
    for i in range(n_members):
        for j in range(i + 1, n_members):
            ka = members[i]
            kb = members[j]
            if pair_row_global[ka, kb] < 0:
                if not compute:
                    pair_row[0, 0] = -2
                    return pair_row
                row = 0
                for x in range(n_agents):
                    for y in range(n_agents):
                        if pair_row_global[x, y] >= row:
                            row = pair_row_global[x, y] + 1
                pair_cost_to_go(nbr, free_index, free_cells, goals[ka], goals[kb], table_soc[row], table_makespan[row])
                pair_row_global[ka, kb] = row
            pair_row[i, j] = pair_row_global[ka, kb]
    return pair_row


@njit(cache=True)
def solve_independent(nbr: Int32Array, dist: Int32Array, starts: Int64Array, goals: Int64Array, active: BoolArray,
                      mode: IntScalar, max_expand: IntScalar, deadline: float, free_index: Int64Array,
                      free_cells: Int64Array, table_soc: Int32Array, table_makespan: Int32Array,
                      pair_row_global: Int64Array, upper_arrival: Int64Array, escalate_after: IntScalar,
                      replan_budget: IntScalar) -> tuple[int, Int32Array, Int64Array, Int64Array, IntScalar, IntScalar]:
    """Independence detection (Standley's ID) around ``group_astar``, for one objective (``mode``).

    Every active agent starts alone on a shortest path (chosen to dodge the agents planned before it). When two
    groups' plans conflict for the first time, each in turn (smaller first) tries a new plan around all other
    agents' current plans that is still optimal for it: in ``MODE_SOC`` one with its own optimal sum of costs,
    in ``MODE_MAKESPAN`` any plan with makespan at most ``L``, the largest optimal makespan among the groups
    (``L`` is a lower bound of the instance's optimum, so such plans cost nothing). Failing that (a re-plan gets
    ``replan_budget`` expansions, in ``MODE_SOC`` at least twice what the group's own solve took), the two groups
    merge and the merged group is planned optimally alone, steering ties away from the other groups' plans (a
    conflict-avoidance table, in ``MODE_SOC`` only). When no conflict is left, the union of the group plans is
    valid and meets the lower bound (sum of the groups' optimal sums of costs, or ``L``), so it is optimal. A
    group with no plan alone proves the instance unsolvable (more agents only add constraints).

    Groups of three or more agents search first with the plain heuristic for ``escalate_after`` expansions, then
    with pairwise tables (``table_soc`` rows, filled on first use and indexed by ``pair_row_global (K, K)``, -1
    = not yet computed; an empty table means no pairs). ``upper_arrival (K,)``, when not empty, holds the
    arrivals of a known valid plan: its restriction to a group is a valid plan of that group alone, so its sum
    of costs bounds the group's search.

    Returns ``(status, plan (K, L), arrival (K,), group_of (K,), expanded, soc_bound)``; on failure ``group_of``
    marks the group at fault with the value ``-1``. ``soc_bound`` sums the final groups' root lower bounds on the
    sum of costs (a lower bound on the instance's optimal sum of costs, as the groups are disjoint).
    """
    n_agents = starts.shape[0]
    n_cells = nbr.shape[0]
    n_free = free_cells.shape[0]
    pairs_available = table_soc.shape[0] > 0
    horizon = 0
    for k in range(n_agents):
        if active[k] and dist[k, starts[k]] > horizon:
            horizon = dist[k, starts[k]]
    plan = np.empty((n_agents, horizon + 1), np.int32)
    arrival = np.zeros(n_agents, np.int64)
    group_of = np.arange(n_agents)
    planned = np.zeros(n_agents, np.bool_)
    best = np.empty(n_cells, np.int64)
    prev = np.empty(n_cells, np.int32)
    queue = np.empty(n_cells, np.int32)
    for k in range(n_agents):
        plan[k, 0] = starts[k]
        if active[k]:
            shortest_path_avoiding(nbr, dist[k], starts[k], goals[k], plan, arrival, planned, k, best, prev, queue)
            planned[k] = True
    # By group id (the id is one member's index): optimal cost of the group alone in this mode's objective,
    # and the root lower bound on its sum of costs.
    optimum = np.zeros(n_agents, np.int64)
    group_bound = np.zeros(n_agents, np.int64)
    makespan_bound = 0
    for k in range(n_agents):
        if active[k]:
            optimum[k] = dist[k, starts[k]]
            group_bound[k] = dist[k, starts[k]]
            if optimum[k] > makespan_bound:
                makespan_bound = optimum[k]
    effort = np.zeros(n_agents, np.int64)  # by group id: expansions its last solve alone took
    tried = np.zeros((n_agents, n_agents), np.bool_)
    unbounded = np.int64(INF)
    no_pairs = np.full((1, 1), -1, np.int64)
    expanded = 0
    while True:
        a, b = first_conflict(plan, arrival, active, group_of)
        if a < 0:
            break
        group_a = group_of[a]
        group_b = group_of[b]
        if not tried[group_a, group_b]:
            tried[group_a, group_b] = True
            tried[group_b, group_a] = True
            size_a = _members_of(group_of, group_a).shape[0]
            size_b = _members_of(group_of, group_b).shape[0]
            replanned = False
            for attempt in range(2):
                group = group_a if (size_a <= size_b) == (attempt == 0) else group_b
                factor = _REPLAN_EFFORT_FACTOR_SOC if mode == MODE_SOC else _REPLAN_EFFORT_FACTOR_MAKESPAN
                budget = min(max(replan_budget, factor * effort[group]), max_expand - expanded)
                if budget <= 0:
                    break
                members = _members_of(group_of, group)
                others = _others_of(group_of, group, active)
                pair_row = no_pairs
                use_pairs = False
                if pairs_available and members.shape[0] >= 3:
                    pair_row = _pair_rows(members, pair_row_global, np.bool_(False), nbr, free_index, free_cells, goals,
                                          table_soc, table_makespan)
                    use_pairs = pair_row[0, 0] != -2
                if mode == MODE_MAKESPAN:
                    bound_makespan = makespan_bound
                    bound_soc = INF
                else:
                    bound_makespan = INF
                    bound_soc = optimum[group]
                status, path, used, _ = group_astar(
                    nbr, dist[members], starts[members], goals[members], mode, budget, deadline, use_pairs,
                    free_index, n_free, table_soc, table_makespan, pair_row, bound_makespan, bound_soc,
                    plan[others], arrival[others], np.bool_(True),
                )
                expanded += used
                if status == LIMIT_TIME:
                    return status, plan, arrival, group_of, expanded, 0
                if status == SOLVED:
                    plan = _install(plan, arrival, members, goals, path)
                    replanned = True
                    break
            if replanned:
                continue
        # Merge b's group into a's and plan the merged group optimally alone.
        for k in range(n_agents):
            if group_of[k] == group_b:
                group_of[k] = group_a
        tried[group_a, :] = False
        tried[:, group_a] = False
        members = _members_of(group_of, group_a)
        n_members = members.shape[0]
        bound_soc = INF
        if upper_arrival.shape[0] > 0:
            bound_soc = 0
            for i in range(n_members):
                bound_soc += upper_arrival[members[i]]
        group_dist = dist[members]
        group_starts = starts[members]
        group_goals = goals[members]
        # The other groups' plans as a conflict-avoidance table, in the sum-of-costs pass only: under the
        # makespan objective the plateau of equal makespans is so wide that steering ties through it costs more
        # than the re-plans with slack that settle conflicts there anyway.
        if mode == MODE_SOC:
            others = _others_of(group_of, group_a, active)
        else:
            others = np.empty(0, np.int64)
        soft = plan[others]
        soft_arrival = arrival[others]
        use_pairs = pairs_available and n_members >= 3
        budget = max_expand - expanded
        spent_before = expanded
        status = -1
        if use_pairs and budget > escalate_after:
            # Most groups are easy: try the cheap heuristic first and pay for the pair tables only when needed.
            status, path, used, root_bound = group_astar(
                nbr, group_dist, group_starts, group_goals, mode, escalate_after, deadline, np.bool_(False),
                free_index, n_free, table_soc, table_makespan, no_pairs, unbounded, bound_soc, soft, soft_arrival,
                np.bool_(False),
            )
            expanded += used
            budget -= used
            if status == LIMIT_NODES:
                status = -1
        if status == -1:
            pair_row = no_pairs
            if use_pairs:
                pair_row = _pair_rows(members, pair_row_global, np.bool_(True), nbr, free_index, free_cells, goals,
                                      table_soc, table_makespan)
            status, path, used, root_bound = group_astar(
                nbr, group_dist, group_starts, group_goals, mode, budget, deadline, use_pairs, free_index, n_free,
                table_soc, table_makespan, pair_row, unbounded, bound_soc, soft, soft_arrival, np.bool_(False),
            )
            expanded += used
        if status != SOLVED:
            for k in range(n_agents):
                if group_of[k] == group_a:
                    group_of[k] = -1
            return status, plan, arrival, group_of, expanded, 0
        plan = _install(plan, arrival, members, goals, path)
        effort[group_a] = expanded - spent_before
        group_bound[group_a] = root_bound
        group_bound[group_b] = 0
        cost = 0
        for i in range(n_members):
            k = members[i]
            if mode == MODE_MAKESPAN:
                if arrival[k] > cost:
                    cost = arrival[k]
            else:
                cost += arrival[k]
        optimum[group_a] = cost
        if cost > makespan_bound:
            makespan_bound = cost
    soc_bound = 0
    for k in range(n_agents):
        soc_bound += group_bound[k]
    return SOLVED, plan, arrival, group_of, expanded, soc_bound


@njit(cache=True)
def _plan_actions(plan: Int32Array, arrival: Int64Array, width: int,
                  makespan: IntScalar) -> tuple[Int8Array, Int32Array]:
    """``(K, makespan) int8`` action codes and ``(K,) int32`` lengths (= arrival times) of a cell plan."""
    n_agents = arrival.shape[0]
    actions = np.zeros((n_agents, makespan), np.int8)
    lengths = np.zeros(n_agents, np.int32)
    for k in range(n_agents):
        lengths[k] = arrival[k]
        for t in range(arrival[k]):
            delta = plan[k, t + 1] - plan[k, t]
            if delta == 0:
                actions[k, t] = _WAIT
            elif delta == -width:
                actions[k, t] = _UP
            elif delta == width:
                actions[k, t] = _DOWN
            elif delta == -1:
                actions[k, t] = _LEFT
            else:
                actions[k, t] = _RIGHT
    return actions, lengths


@njit(cache=True)
def _costs(arrival: Int64Array, n_agents: IntScalar) -> tuple[IntScalar, IntScalar]:
    """The makespan and the sum of costs of a plan whose agents arrive at ``arrival``."""
    makespan = 0
    sum_of_costs = 0
    for k in range(n_agents):
        sum_of_costs += arrival[k]
        if arrival[k] > makespan:
            makespan = arrival[k]
    return makespan, sum_of_costs


@njit(cache=True)
def _no_plan(
    status: int, expanded: IntScalar, culprits: BoolArray, lower_bound_soc: IntScalar
) -> tuple[int, int, int, IntScalar, Int8Array, Int32Array, BoolArray, IntScalar]:
    """``solve_kernel``'s answer when there is no plan to give (a proof, a limit or an inconsistency)."""
    n_agents = culprits.shape[0]
    return (
        status, -1, -1, expanded, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits,
        lower_bound_soc,
    )


@njit(cache=True)
def solve_kernel(grid: Int8Array, starts_rc: Int32Array, goals_rc: Int32Array, max_expand: IntScalar, deadline: float,
                 escalate_after: IntScalar, replan_budget: IntScalar
                 ) -> tuple[int, IntScalar, IntScalar, IntScalar, Int8Array, Int32Array, BoolArray, IntScalar]:
    """The whole solver: distance maps, unsolvability checks, ID in both objectives, the plan as actions.

    Args:
        grid: ``(H, W) int8`` tiles; ``starts_rc``/``goals_rc``: ``(K, 2) int32``.
        max_expand: node budget over all joint searches; ``deadline``: ``perf_counter`` value (<= 0: none).
        escalate_after, replan_budget: tuning of ``solve_independent`` (they change effort, never results).

    Returns:
        ``(status, makespan, sum_of_costs, expanded, actions (K, M) int8, lengths (K,) int32, culprits (K,) bool,
        lower_bound_soc)``. ``culprits`` marks the agent (``UNSOLVABLE_AGENT``) or group (``UNSOLVABLE_GROUP``)
        that proves unsolvability.

    The makespan pass (``MODE_MAKESPAN``) gives a makespan-optimal plan. Its sum of costs is the optimum
    whenever it meets a lower bound (the sum of distances, or the groups' pairwise root bounds); otherwise a
    second ID pass in ``MODE_SOC`` finds the optimal sum of costs, and its plan replaces the first when it is
    makespan-optimal too (then it is the best plan in both objectives at once).
    """
    height, width = grid.shape
    n_cells = height * width
    n_agents = starts_rc.shape[0]
    starts, goals, blocked = flat_instance(grid, starts_rc, goals_rc)
    active = np.empty(n_agents, np.bool_)
    n_active = 0
    for k in range(n_agents):
        active[k] = starts[k] != goals[k]
        if active[k]:
            n_active += 1
        else:
            blocked[starts[k]] = True  # on its goal from time 0, and there forever
    nbr = neighbor_table(blocked, height, width)
    free_index = np.full(n_cells, -1, np.int64)
    n_free = 0
    for cell in range(n_cells):
        if not blocked[cell]:
            free_index[cell] = n_free
            n_free += 1
    free_cells = np.empty(n_free, np.int64)
    for cell in range(n_cells):
        if free_index[cell] >= 0:
            free_cells[free_index[cell]] = cell
    dist = np.full((n_agents, n_cells), INF, np.int32)
    queue = np.empty(n_cells, np.int32)
    culprits = np.zeros(n_agents, np.bool_)
    lower_bound_soc: IntScalar = 0
    for k in range(n_agents):
        if not active[k]:
            dist[k, goals[k]] = 0
            continue
        bfs_distances(nbr, goals[k], dist[k], queue)
        if dist[k, starts[k]] >= INF:
            culprits[k] = True
            return _no_plan(UNSOLVABLE_AGENT, 0, culprits, -1)
        lower_bound_soc += dist[k, starts[k]]
    if n_active == 0:
        return SOLVED, 0, 0, 0, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits, 0
    # Pairwise tables (filled lazily, for groups of three or more) when they fit in memory.
    n_pairs = n_active * (n_active - 1) // 2
    if n_active >= 3 and n_pairs * n_free * n_free <= MAX_PAIR_TABLE_ENTRIES:
        table_soc = np.empty((n_pairs, n_free * n_free), np.int32)
        table_makespan = np.empty((n_pairs, n_free * n_free), np.int32)
    else:
        table_soc = np.empty((0, 0), np.int32)
        table_makespan = np.empty((0, 0), np.int32)
    pair_row_global = np.full((n_agents, n_agents), -1, np.int64)

    status, plan, arrival, group_of, expanded, soc_bound = solve_independent(
        nbr, dist, starts, goals, active, np.int64(MODE_MAKESPAN), max_expand, deadline, free_index, free_cells,
        table_soc, table_makespan, pair_row_global, np.empty(0, np.int64), escalate_after, replan_budget,
    )
    if status != SOLVED:
        for k in range(n_agents):
            culprits[k] = group_of[k] < 0
        return _no_plan(status, expanded, culprits, lower_bound_soc)
    makespan, sum_of_costs = _costs(arrival, n_agents)
    if soc_bound > lower_bound_soc:
        lower_bound_soc = soc_bound
    if sum_of_costs > lower_bound_soc:
        status, plan_soc, arrival_soc, group_of, used, _ = solve_independent(
            nbr, dist, starts, goals, active, np.int64(MODE_SOC), max_expand - expanded, deadline, free_index,
            free_cells, table_soc, table_makespan, pair_row_global, arrival, escalate_after, replan_budget,
        )
        expanded += used
        if status != SOLVED:
            # Only a limit can stop this pass (then there is no certified sum of costs): the makespan pass found a
            # plan, so a group without one here would contradict it. Say so rather than claim unsolvability.
            if status == UNSOLVABLE_GROUP:
                status = INCONSISTENT
            for k in range(n_agents):
                culprits[k] = group_of[k] < 0
            return _no_plan(status, expanded, culprits, lower_bound_soc)
        makespan_soc, sum_of_costs = _costs(arrival_soc, n_agents)
        if makespan_soc == makespan:
            plan = plan_soc
            arrival = arrival_soc
    actions, lengths = _plan_actions(plan, arrival, width, makespan)
    return SOLVED, makespan, sum_of_costs, expanded, actions, lengths, culprits, lower_bound_soc
