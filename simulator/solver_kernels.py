"""numba kernels of the optimal MAPF solver (``simulator.solver``) and of ``needs_wait``.

Free functions over plain arrays, ``@njit(cache=True)``, serial. They trust their inputs (the wrappers in
``simulator.solver`` and ``simulator.needs_wait`` validate through ``Instance``). Their plain-Python twins are
``simulator.solver.brute_force_optimum`` and ``simulator.needs_wait.needs_wait_reference``; the tests hold
them equal.

Array conventions (``H x W`` map, ``N = H * W`` cells, ``K`` agents, ``G`` agents of one group):
    cell index:  ``row * W + col``
    nbr:     (N, 5) int32   target cell of each action (``constants`` action order), -1 where the move leaves
                            the grid or enters a blocked cell; row ``c`` is all -1 when ``c`` itself is blocked
    dist:    (K, N) int32   single-agent distance to the agent's goal over free cells, ``INF`` if unreachable
    plan:    (K, L) int32   cell of each agent at each time; row k is valid up to ``arrival[k]``, after which
                            the agent stands on its goal (goals are absorbing)

The model of the rules (rules v1, see ``simulator.rules``) these kernels search in: a joint state is the tuple of
agent cells. An agent whose cell is its goal has arrived (it cannot have stood there earlier without arriving,
since arrival is absorbing), so it stays; every other agent waits or moves to a free 4-neighbour. A joint move
is legal when no two agents end in one cell (vertex conflict) and no two agents swap cells (edge conflict);
following and rotations of three or more agents are legal. An agent whose start is its goal never moves: its
cell is treated as blocked for everyone else (``blocked``), and it is left out of the search.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, objmode

from simulator import constants as C

_ICE = C.ICE
_WAIT, _UP, _DOWN, _LEFT, _RIGHT = C.WAIT, C.UP, C.DOWN, C.LEFT, C.RIGHT

INF = 1 << 28  # distance of an unreachable cell; far below int32 overflow when summed over 64 agents

# Outcome codes of ``solve_kernel`` / ``group_astar``.
SOLVED = 0
UNSOLVABLE_AGENT = 1  # one agent cannot reach its goal even alone: a proof of unsolvability
UNSOLVABLE_GROUP = 2  # a group's whole joint state space was exhausted: a proof of unsolvability
LIMIT_NODES = 3  # node budget used up: no verdict
LIMIT_TIME = 4  # time budget used up: no verdict

# Objectives of the joint search, both lexicographic pairs.
MODE_MAKESPAN = 0  # (makespan, sum of costs): a makespan-optimal plan, ties broken by least sum of costs
MODE_SOC = 1  # (sum of costs, makespan): a sum-of-costs-optimal plan

_TIEBREAK_BITS = 20
_TIEBREAK_MAX = (1 << _TIEBREAK_BITS) - 1


@njit(cache=True)
def now() -> float:
    """``time.perf_counter()`` from inside nopython code (objmode keeps the function cacheable)."""
    with objmode(t="float64"):
        t = time.perf_counter()
    return t


# ------------------------------------------------------------------------------------------------ map helpers
@njit(cache=True)
def neighbor_table(blocked, height, width):
    """``(N, 5) int32`` move targets per action; -1 for off-grid or blocked targets (see module docstring)."""
    n_cells = height * width
    nbr = np.full((n_cells, 5), -1, np.int32)
    for row in range(height):
        for col in range(width):
            cell = row * width + col
            if blocked[cell]:
                continue
            nbr[cell, _WAIT] = cell
            if row > 0 and not blocked[cell - width]:
                nbr[cell, _UP] = cell - width
            if row < height - 1 and not blocked[cell + width]:
                nbr[cell, _DOWN] = cell + width
            if col > 0 and not blocked[cell - 1]:
                nbr[cell, _LEFT] = cell - 1
            if col < width - 1 and not blocked[cell + 1]:
                nbr[cell, _RIGHT] = cell + 1
    return nbr


@njit(cache=True)
def bfs_distances(nbr, source, dist_out, queue):
    """Fill ``dist_out (N,)`` with BFS distances from ``source`` over ``nbr`` (moves are symmetric)."""
    dist_out[:] = INF
    dist_out[source] = 0
    queue[0] = source
    head = 0
    tail = 1
    while head < tail:
        cell = queue[head]
        head += 1
        next_dist = dist_out[cell] + 1
        for action in range(1, 5):
            target = nbr[cell, action]
            if target >= 0 and dist_out[target] == INF:
                dist_out[target] = next_dist
                queue[tail] = target
                tail += 1


@njit(cache=True, inline="always")
def _pos_at(plan, arrival, agent, t):
    """Cell of ``agent`` at time ``t``: its path, then its goal forever (goals are absorbing)."""
    if t >= arrival[agent]:
        return plan[agent, arrival[agent]]
    return plan[agent, t]


@njit(cache=True)
def _step_conflicts(plan, arrival, planned, agent, src, dst, t):
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
def shortest_path_avoiding(nbr, dist_row, start, goal, plan, arrival, planned, agent, best, prev, queue):
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
def first_conflict(plan, arrival, active, group_of):
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


# ------------------------------------------------------------------------------------- joint A* of one group
@njit(cache=True)
def _heap_push(keys1, keys2, nodes, size, key1, key2, node):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if keys1[parent] < key1 or (keys1[parent] == key1 and keys2[parent] <= key2):
            break
        keys1[i] = keys1[parent]
        keys2[i] = keys2[parent]
        nodes[i] = nodes[parent]
        i = parent
    keys1[i] = key1
    keys2[i] = key2
    nodes[i] = node
    return size + 1


@njit(cache=True)
def _heap_pop(keys1, keys2, nodes, size):
    """Remove the root (the caller has read it); returns the new size."""
    size -= 1
    if size == 0:
        return 0
    key1 = keys1[size]
    key2 = keys2[size]
    node = nodes[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and (keys1[right] < keys1[child] or (keys1[right] == keys1[child] and keys2[right] < keys2[child])):
            child = right
        if keys1[child] < key1 or (keys1[child] == key1 and keys2[child] < key2):
            keys1[i] = keys1[child]
            keys2[i] = keys2[child]
            nodes[i] = nodes[child]
            i = child
        else:
            break
    keys1[i] = key1
    keys2[i] = key2
    nodes[i] = node
    return size


@njit(cache=True)
def _grow1(array, capacity):
    grown = np.empty(capacity, array.dtype)
    grown[: array.shape[0]] = array
    return grown


@njit(cache=True)
def _grow2(array, capacity):
    grown = np.empty((capacity, array.shape[1]), array.dtype)
    grown[: array.shape[0]] = array
    return grown


@njit(cache=True, inline="always")
def _row_hash(npos, node, n_group):
    h = np.int64(-3750763034362895579)  # FNV-1a offset basis as a signed 64-bit integer
    for i in range(n_group):
        h = (h ^ npos[node, i]) * np.int64(1099511628211)
    return h ^ (h >> 29)


@njit(cache=True)
def _table_find(table, npos, node, n_group):
    """Slot of the full state equal to row ``node`` of ``npos``: ``(slot, existing node or -1)``."""
    mask = table.shape[0] - 1
    slot = _row_hash(npos, node, n_group) & mask
    while True:
        other = table[slot]
        if other < 0:
            return slot, -1
        same = True
        for i in range(n_group):
            if npos[other, i] != npos[node, i]:
                same = False
                break
        if same:
            return slot, other
        slot = (slot + 1) & mask


@njit(cache=True)
def _table_rehash(table, npos, n_group):
    grown = np.full(table.shape[0] * 2, -1, np.int32)
    mask = grown.shape[0] - 1
    for i in range(table.shape[0]):
        node = table[i]
        if node < 0:
            continue
        slot = _row_hash(npos, node, n_group) & mask
        while grown[slot] >= 0:
            slot = (slot + 1) & mask
        grown[slot] = node
    return grown


@njit(cache=True, inline="always")
def _keys(mode, g1, g2, h1, h2):
    tiebreak = h2 if h2 < _TIEBREAK_MAX else _TIEBREAK_MAX
    if mode == MODE_MAKESPAN:
        return g1 + h1, ((g2 + h2) << _TIEBREAK_BITS) | tiebreak
    return g2 + h2, ((g1 + h1) << _TIEBREAK_BITS) | tiebreak


@njit(cache=True)
def group_astar(nbr, dist, starts, goals, mode, max_expand, deadline):
    """Optimal joint plan of one group alone: A* with operator decomposition over joint states.

    Args:
        nbr: ``(N, 5)`` move table (cells of agents sitting on their goals from the start are blocked).
        dist: ``(G, N)`` distance maps of the group's agents; ``starts``/``goals``: ``(G,)`` cells.
        mode: ``MODE_MAKESPAN`` or ``MODE_SOC`` (lexicographic objective, see the module constants).
        max_expand: most node expansions; ``deadline``: ``perf_counter`` value to stop at (<= 0: none).

    Returns:
        ``(status, path (T+1, G) int32, expanded)``; ``status`` is ``SOLVED``, ``UNSOLVABLE_GROUP`` (every
        reachable joint state was closed without reaching the goals: a proof), ``LIMIT_NODES`` or ``LIMIT_TIME``.

    Costs are pairs: a full step costs ``(1, agents not yet on goal)`` (makespan, sum of costs). Operator
    decomposition assigns one agent's move per node; the time cost is charged with the first agent's move and
    each moving agent's unit of sum of costs with its own move. Heuristic: ``h1`` = the largest remaining
    distance (an unassigned agent may still gain one step this turn, hence ``dist - 1`` for it), ``h2`` = the sum
    of remaining distances. Both components are consistent, so the lexicographic pair is, and the first goal
    popped is optimal. Only full states are deduplicated (intermediate nodes hang off one full state each).
    """
    n_group = starts.shape[0]
    capacity = 1024
    npos = np.empty((capacity, n_group), np.int32)
    nprev = np.empty(capacity, np.int32)  # full node: the previous step's full node; intermediate: its base
    nnext = np.empty(capacity, np.int32)  # 0 for a full node, else the next agent to assign
    ng1 = np.empty(capacity, np.int64)
    ng2 = np.empty(capacity, np.int64)
    nh1 = np.empty(capacity, np.int64)
    nh2 = np.empty(capacity, np.int64)
    nclosed = np.zeros(capacity, np.bool_)
    table = np.full(2048, -1, np.int32)
    heap_capacity = 1024
    keys1 = np.empty(heap_capacity, np.int64)
    keys2 = np.empty(heap_capacity, np.int64)
    heap_nodes = np.empty(heap_capacity, np.int32)

    h1 = 0
    h2 = 0
    for i in range(n_group):
        npos[0, i] = starts[i]
        d = dist[i, starts[i]]
        h2 += d
        if d > h1:
            h1 = d
    nprev[0] = -1
    nnext[0] = 0
    ng1[0] = 0
    ng2[0] = 0
    nh1[0] = h1
    nh2[0] = h2
    slot, _ = _table_find(table, npos, 0, n_group)
    table[slot] = 0
    n_full = 1
    n_nodes = 1
    key1, key2 = _keys(mode, 0, 0, h1, h2)
    heap_size = _heap_push(keys1, keys2, heap_nodes, 0, key1, key2, 0)
    expanded = 0
    goal_node = -1

    while heap_size > 0:
        key1 = keys1[0]
        key2 = keys2[0]
        node = heap_nodes[0]
        heap_size = _heap_pop(keys1, keys2, heap_nodes, heap_size)
        is_full = nnext[node] == 0
        if is_full:
            if nclosed[node]:
                continue
            cur1, cur2 = _keys(mode, ng1[node], ng2[node], nh1[node], nh2[node])
            if cur1 != key1 or cur2 != key2:
                continue  # a stale heap entry: the node was reached again more cheaply
            nclosed[node] = True
            if nh2[node] == 0:
                goal_node = node
                break
        if expanded >= max_expand:
            return LIMIT_NODES, np.empty((0, n_group), np.int32), expanded
        expanded += 1
        if deadline > 0.0 and (expanded & 255) == 0 and now() > deadline:
            return LIMIT_TIME, np.empty((0, n_group), np.int32), expanded

        base = node if is_full else nprev[node]
        agent = nnext[node]
        if is_full:
            while npos[node, agent] == goals[agent]:
                agent += 1  # arrived agents stay; the goal test above guarantees someone still moves
        step_cost = 1 if is_full else 0
        old = npos[base, agent]
        for action in range(5):
            target = nbr[old, action]
            if target < 0:
                continue
            legal = True
            for j in range(agent):
                placed = npos[node, j]
                if placed == target or (target != old and placed == old and npos[base, j] == target):
                    legal = False
                    break
            if legal:
                for j in range(agent + 1, n_group):
                    waiting = npos[base, j]
                    if waiting == target and waiting == goals[j]:
                        legal = False  # an arrived agent will never leave that cell
                        break
            if not legal:
                continue
            if n_nodes >= capacity:
                capacity *= 2
                npos = _grow2(npos, capacity)
                nprev = _grow1(nprev, capacity)
                nnext = _grow1(nnext, capacity)
                ng1 = _grow1(ng1, capacity)
                ng2 = _grow1(ng2, capacity)
                nh1 = _grow1(nh1, capacity)
                nh2 = _grow1(nh2, capacity)
                grown_closed = np.zeros(capacity, np.bool_)
                grown_closed[: nclosed.shape[0]] = nclosed
                nclosed = grown_closed
            child = n_nodes
            for j in range(agent):
                npos[child, j] = npos[node, j]
            npos[child, agent] = target
            for j in range(agent + 1, n_group):
                npos[child, j] = npos[base, j]
            following = agent + 1
            while following < n_group and npos[base, following] == goals[following]:
                following += 1  # arrived agents are assigned at once: they only stay
            h1 = 0
            h2 = 0
            for j in range(n_group):
                d = dist[j, npos[child, j]]
                h2 += d
                if j >= following:
                    d -= 1
                if d > h1:
                    h1 = d
            g1 = ng1[node] + step_cost
            g2 = ng2[node] + 1
            if following == n_group:
                slot, existing = _table_find(table, npos, child, n_group)
                if existing >= 0:
                    if nclosed[existing]:
                        continue
                    if mode == MODE_MAKESPAN:
                        better = g1 < ng1[existing] or (g1 == ng1[existing] and g2 < ng2[existing])
                    else:
                        better = g2 < ng2[existing] or (g2 == ng2[existing] and g1 < ng1[existing])
                    if not better:
                        continue
                    child = existing
                else:
                    table[slot] = child
                    n_full += 1
                    n_nodes += 1
                    if 2 * n_full > table.shape[0]:
                        table = _table_rehash(table, npos, n_group)
                nnext[child] = 0
                nclosed[child] = False
            else:
                n_nodes += 1
                nnext[child] = following
            nprev[child] = base
            ng1[child] = g1
            ng2[child] = g2
            nh1[child] = h1
            nh2[child] = h2
            if heap_size >= heap_capacity:
                heap_capacity *= 2
                keys1 = _grow1(keys1, heap_capacity)
                keys2 = _grow1(keys2, heap_capacity)
                heap_nodes = _grow1(heap_nodes, heap_capacity)
            key1, key2 = _keys(mode, g1, g2, h1, h2)
            heap_size = _heap_push(keys1, keys2, heap_nodes, heap_size, key1, key2, child)

    if goal_node < 0:
        return UNSOLVABLE_GROUP, np.empty((0, n_group), np.int32), expanded
    length = 0
    node = goal_node
    while nprev[node] >= 0:
        length += 1
        node = nprev[node]
    path = np.empty((length + 1, n_group), np.int32)
    node = goal_node
    for t in range(length, -1, -1):
        for i in range(n_group):
            path[t, i] = npos[node, i]
        node = nprev[node]
    return SOLVED, path, expanded


# ------------------------------------------------------------------------------- independence detection
@njit(cache=True)
def solve_independent(nbr, dist, starts, goals, active, mode, max_expand, deadline):
    """Independence detection (simple ID) around ``group_astar``.

    Every active agent starts alone on a shortest path (chosen to dodge the agents planned before it). While
    two groups' plans conflict, the two groups merge and the merged group is re-planned optimally alone. When
    no conflict is left, the union of group-optimal plans is valid and its cost (max or sum over groups) meets
    the lower bound given by the groups' own optima, so it is optimal for the objective. A group that has no
    plan alone proves the whole instance unsolvable (more agents only add constraints).

    Returns ``(status, plan (K, L), arrival (K,), group_of (K,), expanded)``; on failure ``group_of`` marks the
    group at fault with the value ``-1``.
    """
    n_agents = starts.shape[0]
    n_cells = nbr.shape[0]
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
    expanded = 0
    while True:
        a, b = first_conflict(plan, arrival, active, group_of)
        if a < 0:
            break
        merged = group_of[a]
        absorbed = group_of[b]
        n_members = 0
        for k in range(n_agents):
            if group_of[k] == absorbed:
                group_of[k] = merged
            if group_of[k] == merged:
                n_members += 1
        members = np.empty(n_members, np.int64)
        i = 0
        for k in range(n_agents):
            if group_of[k] == merged:
                members[i] = k
                i += 1
        status, path, used = group_astar(
            nbr, dist[members], starts[members], goals[members], mode, max_expand - expanded, deadline
        )
        expanded += used
        if status != SOLVED:
            for k in range(n_agents):
                if group_of[k] == merged:
                    group_of[k] = -1
            return status, plan, arrival, group_of, expanded
        length = path.shape[0] - 1
        if length + 1 > plan.shape[1]:
            wider = np.empty((n_agents, length + 1), np.int32)
            for k in range(n_agents):
                for t in range(arrival[k] + 1):
                    wider[k, t] = plan[k, t]
            plan = wider
        for i in range(n_members):
            k = members[i]
            t_arrive = 0
            while path[t_arrive, i] != goals[k]:
                t_arrive += 1
            for t in range(t_arrive + 1):
                plan[k, t] = path[t, i]
            arrival[k] = t_arrive
    return SOLVED, plan, arrival, group_of, expanded


@njit(cache=True)
def _plan_actions(plan, arrival, width, makespan):
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
def solve_kernel(grid, starts_rc, goals_rc, max_expand, deadline):
    """The whole solver: distance maps, unsolvability checks, ID in both objectives, the plan as actions.

    Args:
        grid: ``(H, W) int8`` tiles; ``starts_rc``/``goals_rc``: ``(K, 2) int32``.
        max_expand: node budget over all joint searches; ``deadline``: ``perf_counter`` value (<= 0: none).

    Returns:
        ``(status, makespan, sum_of_costs, expanded, actions (K, M) int8, lengths (K,) int32, culprits (K,) bool,
        lower_bound_soc)``. ``culprits`` marks the agent (``UNSOLVABLE_AGENT``) or group (``UNSOLVABLE_GROUP``)
        that proves unsolvability.

    The makespan pass (``MODE_MAKESPAN``) gives a makespan-optimal plan with least sum of costs within each ID
    group. Its sum of costs is the optimum whenever it meets the lower bound ``sum of distances``; otherwise a
    second ID pass in ``MODE_SOC`` finds the optimal sum of costs, and its plan replaces the first when it is
    makespan-optimal too (then it is the lexicographically best plan).
    """
    height, width = grid.shape
    n_cells = height * width
    n_agents = starts_rc.shape[0]
    starts = np.empty(n_agents, np.int64)
    goals = np.empty(n_agents, np.int64)
    for k in range(n_agents):
        starts[k] = starts_rc[k, 0] * width + starts_rc[k, 1]
        goals[k] = goals_rc[k, 0] * width + goals_rc[k, 1]
    blocked = np.empty(n_cells, np.bool_)
    for r in range(height):
        for c in range(width):
            blocked[r * width + c] = grid[r, c] != _ICE
    active = np.empty(n_agents, np.bool_)
    n_active = 0
    for k in range(n_agents):
        active[k] = starts[k] != goals[k]
        if active[k]:
            n_active += 1
        else:
            blocked[starts[k]] = True  # on its goal from time 0, and there forever
    nbr = neighbor_table(blocked, height, width)
    dist = np.full((n_agents, n_cells), INF, np.int32)
    queue = np.empty(n_cells, np.int32)
    culprits = np.zeros(n_agents, np.bool_)
    lower_bound_soc = 0
    for k in range(n_agents):
        if not active[k]:
            dist[k, goals[k]] = 0
            continue
        bfs_distances(nbr, goals[k], dist[k], queue)
        if dist[k, starts[k]] >= INF:
            culprits[k] = True
            return UNSOLVABLE_AGENT, -1, -1, 0, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits, -1
        lower_bound_soc += dist[k, starts[k]]
    if n_active == 0:
        return SOLVED, 0, 0, 0, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits, 0

    status, plan, arrival, group_of, expanded = solve_independent(
        nbr, dist, starts, goals, active, MODE_MAKESPAN, max_expand, deadline
    )
    if status != SOLVED:
        for k in range(n_agents):
            culprits[k] = group_of[k] < 0
        return status, -1, -1, expanded, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits, lower_bound_soc
    makespan = 0
    sum_of_costs = 0
    for k in range(n_agents):
        sum_of_costs += arrival[k]
        if arrival[k] > makespan:
            makespan = arrival[k]
    if sum_of_costs > lower_bound_soc:
        status, plan_soc, arrival_soc, group_of, used = solve_independent(
            nbr, dist, starts, goals, active, MODE_SOC, max_expand - expanded, deadline
        )
        expanded += used
        if status != SOLVED:
            # The makespan pass already found a plan, so an exhausted group here would contradict it; only a
            # limit can stop this pass, and without the optimal sum of costs there is no certified answer.
            for k in range(n_agents):
                culprits[k] = group_of[k] < 0
            return status, -1, -1, expanded, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits, lower_bound_soc
        sum_of_costs = 0
        makespan_soc = 0
        for k in range(n_agents):
            sum_of_costs += arrival_soc[k]
            if arrival_soc[k] > makespan_soc:
                makespan_soc = arrival_soc[k]
        if makespan_soc == makespan:
            plan = plan_soc
            arrival = arrival_soc
    actions, lengths = _plan_actions(plan, arrival, width, makespan)
    return SOLVED, makespan, sum_of_costs, expanded, actions, lengths, culprits, lower_bound_soc


# ----------------------------------------------------------------------------------------------- needs_wait
@njit(cache=True)
def _state_hash(state):
    h = np.int64(-3750763034362895579)
    for i in range(state.shape[0]):
        h = (h ^ state[i]) * np.int64(1099511628211)
    return h ^ (h >> 29)


@njit(cache=True)
def no_wait_plan_exists(nbr, dist, starts, goals, max_states):
    """Is there a conflict-free joint plan where every agent walks one of its shortest paths without waiting?

    ``nbr``/``dist`` are over the bare map (holes only: other agents are ignored when defining "shortest").
    Every agent's distance must be finite. Depth-first search over joint states in which, at time t, each agent
    with ``t < d_k`` moves one layer down its own distance map and every other agent stands on its goal; a
    joint state from which no completion exists is remembered, so each state is expanded at most once. Returns
    1 (such a plan exists), 0 (none exists) or -1 (more than ``max_states`` dead states were recorded).
    """
    n_agents = starts.shape[0]
    horizon = 0
    lengths = np.empty(n_agents, np.int64)
    for k in range(n_agents):
        lengths[k] = dist[k, starts[k]]
        if lengths[k] > horizon:
            horizon = lengths[k]
    if horizon == 0:
        return 1
    pos = np.empty((horizon + 1, n_agents), np.int64)
    options = np.empty((horizon + 1, n_agents, 4), np.int64)
    n_options = np.empty((horizon + 1, n_agents), np.int64)
    choice = np.zeros((horizon + 1, n_agents), np.int64)
    table = np.full(1024, -1, np.int64)  # slots -> index into dead_states
    dead_states = np.empty((512, n_agents), np.int64)
    n_dead = 0
    candidate = np.empty(n_agents, np.int64)

    for k in range(n_agents):
        pos[0, k] = starts[k]
    level = 0
    fresh = True
    while True:
        if fresh:
            # Enumerate each agent's moves down its distance map at this level.
            for k in range(n_agents):
                cell = pos[level, k]
                choice[level, k] = 0
                if level >= lengths[k]:
                    options[level, k, 0] = cell
                    n_options[level, k] = 1
                    continue
                count = 0
                for action in range(1, 5):
                    target = nbr[cell, action]
                    if target >= 0 and dist[k, target] == dist[k, cell] - 1:
                        options[level, k, count] = target
                        count += 1
                n_options[level, k] = count
            fresh = False
        else:
            # Advance the odometer of choices at this level.
            k = 0
            while k < n_agents:
                choice[level, k] += 1
                if choice[level, k] < n_options[level, k]:
                    break
                choice[level, k] = 0
                k += 1
            if k == n_agents:
                # Every combination failed: this state is dead. Remember it and backtrack.
                if level == 0:
                    return 0
                if n_dead >= max_states:
                    return -1
                if n_dead >= dead_states.shape[0]:
                    dead_states = _grow2(dead_states, dead_states.shape[0] * 2)
                for k in range(n_agents):
                    dead_states[n_dead, k] = pos[level, k]
                if 2 * (n_dead + 1) > table.shape[0]:
                    table = np.full(table.shape[0] * 2, -1, np.int64)
                    mask = table.shape[0] - 1
                    for i in range(n_dead):
                        slot = _state_hash(dead_states[i]) & mask
                        while table[slot] >= 0:
                            slot = (slot + 1) & mask
                        table[slot] = i
                mask = table.shape[0] - 1
                slot = _state_hash(dead_states[n_dead]) & mask
                while table[slot] >= 0:
                    slot = (slot + 1) & mask
                table[slot] = n_dead
                n_dead += 1
                level -= 1
                continue
        # Try the current combination.
        for k in range(n_agents):
            candidate[k] = options[level, k, choice[level, k]]
        legal = True
        for a in range(n_agents):
            for b in range(a + 1, n_agents):
                if candidate[a] == candidate[b]:
                    legal = False
                    break
                if candidate[a] == pos[level, b] and candidate[b] == pos[level, a] and candidate[a] != pos[level, a]:
                    legal = False
                    break
            if not legal:
                break
        if not legal:
            continue
        if level + 1 == horizon:
            return 1
        mask = table.shape[0] - 1
        slot = _state_hash(candidate) & mask
        dead = False
        while table[slot] >= 0:
            other = table[slot]
            same = True
            for k in range(n_agents):
                if dead_states[other, k] != candidate[k]:
                    same = False
                    break
            if same:
                dead = True
                break
            slot = (slot + 1) & mask
        if dead:
            continue
        level += 1
        for k in range(n_agents):
            pos[level, k] = candidate[k]
        fresh = True
