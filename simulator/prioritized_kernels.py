"""Prioritized planning: one valid (not necessarily optimal) joint plan, found fast, whose makespan bounds the
optimal makespan from above.

Free functions over plain arrays, ``@njit(cache=True)``, serial; array conventions are those of
``simulator.grid_kernels``. ``simulator.prioritized`` is the validating wrapper. The plan's contract (valid under
the rules, so its makespan is at least the optimum) is checked by the tests against the plain-Python rules
(``simulator.rules.judge``) and the optimal solver, which are this kernel's reference.

Reservations of the agents planned so far (times ``0..horizon``, ``horizon`` = their latest arrival):
    occupied:     (horizon + 1, N) bool   a planned agent stands on the cell at that time (up to its arrival)
    came_from:    (horizon + 1, N) int32  the cell that agent stood on one step earlier (-1 at time 0)
    blocked_from: (N,) int64              a planned agent's goal: the time it arrives there and stays for good
                                          (``INF`` for other cells)
After ``horizon`` every planned agent stands on its goal, so the map is static from then on.
"""

from __future__ import annotations

import numpy as np

from simulator.astar_kernels import LIMIT_NODES, LIMIT_TIME, SOLVED, UNSOLVABLE_AGENT, UNSOLVABLE_GROUP, _heap_pop, \
    _heap_push
from simulator.grid_kernels import INF, bfs_distances, flat_instance, grow1, grow2, neighbor_table, now
from simulator.independence_kernels import _plan_actions
from simulator.jit import BoolArray, Int8Array, Int32Array, Int64Array, IntScalar, njit

# Most (time, cell) states one agent's search may index (8 bytes each in each of two arrays): beyond it the
# planner gives up rather than allocate (only maps far larger than the generator's reach it).
MAX_STATES = 1 << 24


@njit(cache=True)
def _reserve(occupied: BoolArray, came_from: Int32Array, blocked_from: Int64Array, path: Int32Array,
             arrival: IntScalar) -> None:
    """Add one planned agent's path (cells at times ``0..arrival``) to the reservations."""
    for t in range(arrival + 1):
        occupied[t, path[t]] = True
        came_from[t, path[t]] = path[t - 1] if t > 0 else -1
    blocked_from[path[arrival]] = arrival


@njit(cache=True)
def space_time_astar(nbr: Int32Array, dist_row: Int32Array, start: IntScalar, goal: IntScalar,
                     occupied: BoolArray, came_from: Int32Array, blocked_from: Int64Array, horizon: IntScalar,
                     best: Int64Array, parent: Int64Array, closed: BoolArray, touched: Int64Array, max_expand: IntScalar,
                     deadline: float, path_out: Int32Array) -> tuple[int, IntScalar, IntScalar, Int64Array]:
    """Earliest arrival of one agent at its goal around the reservations (see the module docstring).

    A state is ``(min(t, horizon), cell)``, numbered ``tag * N + cell``: past the horizon the map is static, so
    later times of one cell are one state. The agent waits or moves to a free neighbour; it may not end a step
    where a planned agent stands, swap cells with one, or step on its goal (where it would stay) before the last
    time a planned agent stands there. The heuristic ``max(dist, goal_free - t)`` is consistent; among equal
    ``f`` the deeper state goes first, so a free run is a straight dive.

    ``best``, ``parent`` (``(horizon + 1) * N`` entries or more) and ``closed`` must hold ``INF``, anything and
    False; ``touched`` is scratch. The states this search wrote are reset on return, so the arrays serve the
    next call as they are.

    Returns:
        ``(status, arrival, expanded, touched)`` with the path (cells at times ``0..arrival``) in
        ``path_out[:arrival + 1]`` (``path_out`` must have room for ``arrival + 1`` cells: ``horizon`` plus the
        number of cells, a bound on any earliest arrival) and ``touched`` the scratch array, grown when needed.
        ``status``: ``SOLVED``; ``UNSOLVABLE_GROUP`` when no path exists around the reservations;
        ``LIMIT_NODES`` or ``LIMIT_TIME``.
    """
    n_cells = nbr.shape[0]
    goal_free = 0  # the agent may arrive from this time on: no planned agent stands on its goal again
    for t in range(horizon + 1):
        if occupied[t, goal]:
            goal_free = t + 1
    heap_capacity = 256
    keys1 = np.empty(heap_capacity, np.int64)
    keys2 = np.empty(heap_capacity, np.int64)
    heap_nodes = np.empty(heap_capacity, np.int32)
    n_touched = 0
    root = start  # tag 0
    best[root] = 0
    parent[root] = -1
    touched[n_touched] = root
    n_touched += 1
    h = max(np.int64(dist_row[start]), np.int64(goal_free))
    heap_size = _heap_push(keys1, keys2, heap_nodes, 0, h, -0, root)
    expanded = 0
    status = UNSOLVABLE_GROUP
    goal_node = -1
    while heap_size > 0:
        node = heap_nodes[0]
        heap_size = _heap_pop(keys1, keys2, heap_nodes, heap_size)
        if closed[node]:
            continue
        closed[node] = True
        cell = node % n_cells
        g = best[node]
        if cell == goal:
            goal_node = node
            status = SOLVED
            break
        if expanded >= max_expand:
            status = LIMIT_NODES
            break
        expanded += 1
        if deadline > 0.0 and (expanded & 255) == 0 and now() > deadline:
            status = LIMIT_TIME
            break
        t_next = g + 1
        tag_next = t_next if t_next < horizon else horizon
        for action in range(5):
            target = nbr[cell, action]
            if target < 0:
                continue
            if target == goal and t_next < goal_free:
                continue
            if t_next >= blocked_from[target]:
                continue
            if t_next <= horizon:
                if occupied[t_next, target]:
                    continue
                if target != cell and came_from[t_next, cell] == target:
                    continue  # the agent standing there next came from our target: a swap
            child = tag_next * n_cells + target
            if closed[child] or best[child] <= t_next:
                continue
            if best[child] >= INF:
                if n_touched >= touched.shape[0]:
                    touched = grow1(touched, 2 * touched.shape[0])
                touched[n_touched] = child
                n_touched += 1
            best[child] = t_next
            parent[child] = node
            h = max(np.int64(dist_row[target]), np.int64(goal_free - t_next))
            if heap_size >= heap_capacity:
                heap_capacity *= 2
                keys1 = grow1(keys1, heap_capacity)
                keys2 = grow1(keys2, heap_capacity)
                heap_nodes = grow1(heap_nodes, heap_capacity)
            heap_size = _heap_push(keys1, keys2, heap_nodes, heap_size, t_next + h, -t_next, child)
    arrival = -1
    if goal_node >= 0:
        arrival = best[goal_node]
        node = goal_node
        for t in range(arrival, -1, -1):
            path_out[t] = node % n_cells
            node = parent[node]
    for i in range(n_touched):
        best[touched[i]] = INF
        closed[touched[i]] = False
    return status, arrival, expanded, touched


@njit(cache=True)
def prioritized_kernel(grid: Int8Array, starts_rc: Int32Array, goals_rc: Int32Array, max_expand: IntScalar,
                       deadline: float) -> tuple[int, IntScalar, IntScalar, Int8Array, Int32Array]:
    """Plan the agents one after another, farthest from its goal first (ties: lower index first).

    Each agent gets its earliest arrival in space and time (``space_time_astar``) around the agents planned
    before it: no vertex or swap conflict with their paths, and it arrives on its goal (where it stays, goals
    are absorbing) only once none of them will stand there again; they stand on their goals after arriving.
    Agents that start on their goal never move; their cells are blocked, as in the solver. Each pair of agents
    is conflict-free because the later one avoided the earlier, so the union is a valid joint plan and its
    makespan is at least the optimal one. When an agent finds no path around the ones before it, planning starts
    over with that agent first (at most one start per agent): crowded small maps box in a late agent often, and
    one that goes first is never boxed in.

    Args:
        grid: ``(H, W) int8`` tiles; ``starts_rc``/``goals_rc``: ``(K, 2) int32``.
        max_expand: node budget over all the agents' searches; ``deadline``: ``perf_counter`` value (<= 0: none).

    Returns:
        ``(status, makespan, expanded, actions (K, makespan) int8, lengths (K,) int32)``. ``status`` is
        ``SOLVED`` with a plan; else no plan was found (``UNSOLVABLE_AGENT``: an agent cannot reach its goal even
        alone; ``UNSOLVABLE_GROUP``: the last start also boxed an agent in; or a limit). Only ``UNSOLVABLE_AGENT``
        proves the instance unsolvable: otherwise another order or the optimal solver may still find a plan.
    """
    height, width = grid.shape
    n_cells = height * width
    n_agents = starts_rc.shape[0]
    no_plan = (np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32))
    starts, goals, blocked = flat_instance(grid, starts_rc, goals_rc)
    active = np.empty(n_agents, np.bool_)
    for k in range(n_agents):
        active[k] = starts[k] != goals[k]
        if not active[k]:
            blocked[starts[k]] = True  # on its goal from time 0, and there forever
    nbr = neighbor_table(blocked, height, width)
    dist = np.full((n_agents, n_cells), INF, np.int32)
    queue = np.empty(n_cells, np.int32)
    remaining = np.zeros(n_agents, np.int64)
    for k in range(n_agents):
        if not active[k]:
            continue
        bfs_distances(nbr, goals[k], dist[k], queue)
        remaining[k] = dist[k, starts[k]]
        if remaining[k] >= INF:
            return UNSOLVABLE_AGENT, -1, 0, no_plan[0], no_plan[1]
    # Farthest first: the agent that sets the makespan keeps a shortest path. A stable sort keeps the index order
    # among equals, so the plan is a function of the instance alone.
    order = np.argsort(-remaining, kind="mergesort")
    horizon: IntScalar = 0
    rows = remaining.max() + 1 if n_agents else 1  # reservation rows (times) allocated so far
    occupied = np.zeros((rows, n_cells), np.bool_)
    came_from = np.full((rows, n_cells), -1, np.int32)
    blocked_from = np.full(n_cells, INF, np.int64)
    best = np.full(rows * n_cells, INF, np.int64)
    parent = np.empty(rows * n_cells, np.int64)
    closed = np.zeros(rows * n_cells, np.bool_)
    touched = np.empty(1024, np.int64)
    plan = np.empty((n_agents, rows), np.int32)
    arrival = np.zeros(n_agents, np.int64)
    for k in range(n_agents):
        plan[k, 0] = starts[k]
    expanded = 0
    for attempt in range(n_agents):
        if attempt > 0:  # a fresh start with the agent that found no path promoted to the front
            occupied[:] = False
            came_from[:] = -1
            blocked_from[:] = INF
            arrival[:] = 0
        horizon = 0
        status = SOLVED
        failed = -1
        for i in range(n_agents):
            k = order[i]
            if not active[k]:
                continue
            if (horizon + 1) * n_cells > MAX_STATES:
                return LIMIT_NODES, -1, expanded, no_plan[0], no_plan[1]
            if best.shape[0] < (horizon + 1) * n_cells:  # fresh search arrays for the longer horizon
                best = np.full(2 * (horizon + 1) * n_cells, INF, np.int64)
                parent = np.empty(best.shape[0], np.int64)
                closed = np.zeros(best.shape[0], np.bool_)
            if plan.shape[1] < horizon + n_cells + 1:  # room for any earliest arrival (see space_time_astar)
                wider = np.empty((n_agents, horizon + n_cells + 1), np.int32)
                wider[:, : plan.shape[1]] = plan
                plan = wider
            path = plan[k]
            status, arrival_k, used, touched = space_time_astar(
                nbr, dist[k], starts[k], goals[k], occupied, came_from, blocked_from, horizon, best, parent, closed,
                touched, max_expand - expanded, deadline, path,
            )
            expanded += used
            if status != SOLVED:
                failed = i
                break
            arrival[k] = arrival_k
            if arrival_k > horizon:
                horizon = arrival_k
                if horizon + 1 > occupied.shape[0]:
                    rows = occupied.shape[0]
                    occupied = grow2(occupied, 2 * (horizon + 1))
                    occupied[rows:] = False  # grow2 leaves the new rows unset
                    came_from = grow2(came_from, 2 * (horizon + 1))
                    came_from[rows:] = -1
            _reserve(occupied, came_from, blocked_from, path, arrival_k)
        if status == SOLVED:
            break
        if status != UNSOLVABLE_GROUP or attempt == n_agents - 1:
            return status, -1, expanded, no_plan[0], no_plan[1]
        boxed_in = order[failed]
        for i in range(failed, 0, -1):
            order[i] = order[i - 1]
        order[0] = boxed_in
    actions, lengths = _plan_actions(plan, arrival, width, horizon)
    return SOLVED, horizon, expanded, actions, lengths
