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
INCONSISTENT = 5  # the two passes disagree: a bug, reported loudly instead of as a verdict

# Objectives of the joint search: the named cost is proved optimal; the other one only steers ties.
MODE_MAKESPAN = 0
MODE_SOC = 1

# Effort knobs: they change how the search gets there, never the answer. ``solver.solve`` passes the first two
# at call time (the tests force every route with them); the rest are compiled in.
ESCALATE_AFTER = 2000  # expansions a group of 3+ agents gets with the plain heuristic before pair tables are built
REPLAN_BUDGET = 2000  # expansions one independence-detection re-plan attempt may use before the groups merge
# A sum-of-costs re-plan may also use twice what the group's own solve took (merging costs far more); makespan
# re-plans have slack up to the makespan bound and either succeed fast or not at all.
_REPLAN_EFFORT_FACTOR_SOC = 2
_REPLAN_EFFORT_FACTOR_MAKESPAN = 0
MAX_PAIR_TABLE_ENTRIES = 1 << 24  # per table kind: beyond that (64 MiB) groups search without pairwise tables

_FIELD_MAX = (1 << 21) - 1  # one tie-break field of the second heap key


@njit(cache=True)
def now() -> float:
    """``time.perf_counter()`` from inside nopython code (objmode keeps the function cacheable)."""
    with objmode(t="float64"):
        t = time.perf_counter()
    return t


# ------------------------------------------------------------------------------------------------ map helpers
@njit(cache=True)
def _flat_instance(grid, starts_rc, goals_rc):
    """``(starts (K,) int64, goals (K,) int64, blocked (H*W,) bool)``: cells as ``row * width + col``."""
    height, width = grid.shape
    n_agents = starts_rc.shape[0]
    starts = np.empty(n_agents, np.int64)
    goals = np.empty(n_agents, np.int64)
    for k in range(n_agents):
        starts[k] = starts_rc[k, 0] * width + starts_rc[k, 1]
        goals[k] = goals_rc[k, 0] * width + goals_rc[k, 1]
    blocked = np.empty(height * width, np.bool_)
    for r in range(height):
        for c in range(width):
            blocked[r * width + c] = grid[r, c] != _ICE
    return starts, goals, blocked


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


@njit(cache=True)
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
        if right < size and (
            keys1[right] < keys1[child] or (keys1[right] == keys1[child] and keys2[right] < keys2[child])
        ):
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


@njit(cache=True)
def _node_hash(nd, node, width):
    """Hash of a node's search state: columns ``[0, 2G + 2)`` of its row (cells, came-from cells, tag, next)."""
    h = np.int64(0)
    for c in range(width):
        h = (h * np.int64(1000003)) ^ nd[node, c]
    # SplitMix64's finaliser: the slot takes the low bits and the fingerprint the high ones.
    h = (h ^ ((h >> 30) & np.int64(0x3FFFFFFFF))) * np.int64(-4658895280553007687)
    h = (h ^ ((h >> 27) & np.int64(0x1FFFFFFFFF))) * np.int64(-7723592293110705685)
    return h ^ ((h >> 31) & np.int64(0x1FFFFFFFF))


@njit(cache=True)
def _table_find(table, nd, node, width):
    """Slot of the node whose state equals row ``node``'s: ``(slot, existing node or -1, entry to store)``.

    An entry is ``(fingerprint << 32) | node`` with 31 high bits of the hash as fingerprint (the sign bit stays
    clear: -1 marks an empty slot), so probes past other states rarely touch their rows, which lie far apart in
    memory.
    """
    h = _node_hash(nd, node, width)
    fingerprint = (h >> 33) & np.int64(0x7FFFFFFF)
    mask = table.shape[0] - 1
    slot = h & mask
    while True:
        entry = table[slot]
        if entry < 0:
            return slot, -1, (fingerprint << 32) | node
        if (entry >> 32) == fingerprint:
            other = entry & np.int64(0xFFFFFFFF)
            same = True
            for c in range(width):
                if nd[other, c] != nd[node, c]:
                    same = False
                    break
            if same:
                return slot, other, entry
        slot = (slot + 1) & mask


@njit(cache=True)
def _table_rehash(table, nd, width):
    grown = np.full(table.shape[0] * 2, -1, np.int64)
    mask = grown.shape[0] - 1
    for i in range(table.shape[0]):
        entry = table[i]
        if entry < 0:
            continue
        slot = _node_hash(nd, entry & np.int64(0xFFFFFFFF), width) & mask
        while grown[slot] >= 0:
            slot = (slot + 1) & mask
        grown[slot] = entry
    return grown


@njit(cache=True)
def _keys(mode, g1, g2, g3, h1, h2):
    """Heap keys: the objective's ``f``, then fewer avoidance-table conflicts, then the smaller remaining
    heuristic (first the objective's own, then the other's), each field clipped to 21 bits."""
    if g3 > _FIELD_MAX:
        g3 = _FIELD_MAX
    if mode == MODE_MAKESPAN:
        own = h1
        other = h2
        primary = g1 + h1
    else:
        own = h2
        other = h1
        primary = g2 + h2
    if own > _FIELD_MAX:
        own = _FIELD_MAX
    if other > _FIELD_MAX:
        other = _FIELD_MAX
    return primary, (g3 << 42) | (own << 21) | other


# ------------------------------------------------------------------------------ pairwise cost-to-go tables
def _all_matchings(n_agents: int) -> list[list[int]]:
    """Every maximal matching of ``n_agents`` agents as a partner list (-1 = unmatched; at most one when odd)."""
    result = []

    def extend(partner, singles_left):
        free = [a for a in range(n_agents) if partner[a] == -2]
        if not free:
            result.append(list(partner))
            return
        first = free[0]
        for other in free[1:]:
            partner[first], partner[other] = other, first
            extend(partner, singles_left)
            partner[first] = partner[other] = -2
        if singles_left > 0:
            partner[first] = -1
            extend(partner, singles_left - 1)
            partner[first] = -2

    extend([-2] * n_agents, n_agents % 2)
    return result


MAX_MATCHED_GROUP = 8  # groups up to this size maximise over all matchings (105 of them for 7 or 8 agents)


def _matchings_table() -> tuple[np.ndarray, np.ndarray]:
    lists = [_all_matchings(n) for n in range(MAX_MATCHED_GROUP + 1)]
    most = max(len(m) for m in lists)
    table = np.full((MAX_MATCHED_GROUP + 1, most, MAX_MATCHED_GROUP), -1, np.int64)
    counts = np.zeros(MAX_MATCHED_GROUP + 1, np.int64)
    for n, matchings in enumerate(lists):
        counts[n] = len(matchings)
        for m, partner in enumerate(matchings):
            table[n, m, :n] = partner
    return table, counts


MATCHINGS, N_MATCHINGS = _matchings_table()  # (9, 105, 8) int64 partner lists, (9,) int64 counts


@njit(cache=True)
def _predecessors(nbr, cell, goal, out):
    """Cells an agent can have stood on one step before standing on ``cell`` (goals are absorbing).

    Staying is always a predecessor (a wait, or an agent already arrived); a neighbour is one unless it is the
    agent's goal, which it could not have left.
    """
    count = 1
    out[0] = cell
    for action in range(1, 5):
        target = nbr[cell, action]
        if target >= 0 and target != goal:
            out[count] = target
            count += 1
    return count


@njit(cache=True)
def pair_cost_to_go(nbr, free_index, free_cells, goal_a, goal_b, soc_out, makespan_out):
    """Exact cost-to-go of agents a and b alone, for every pair of free cells, by backward search from the goals.

    ``soc_out[ia * F + ib]`` is the least remaining sum of costs (a step costs the number of the two not yet
    on goal) and ``makespan_out[...]`` the least remaining steps, from a at free cell ``ia`` and b at ``ib``;
    ``INF`` where the two can never both arrive (a proof the joint state is dead). ``F = free_cells.shape[0]``.
    The exact optimum of a relaxation (two agents of a group, the others removed) is a consistent heuristic.
    """
    n_free = free_cells.shape[0]
    soc_out[:] = INF
    makespan_out[:] = INF
    goal_state = free_index[goal_a] * n_free + free_index[goal_b]
    queue = np.empty(n_free * n_free, np.int64)
    preds_a = np.empty(5, np.int64)
    preds_b = np.empty(5, np.int64)
    makespan_out[goal_state] = 0
    queue[0] = goal_state
    head = 0
    tail = 1
    while head < tail:
        state = queue[head]
        head += 1
        cell_a = free_cells[state // n_free]
        cell_b = free_cells[state % n_free]
        count_a = _predecessors(nbr, cell_a, goal_a, preds_a)
        count_b = _predecessors(nbr, cell_b, goal_b, preds_b)
        for x in range(count_a):
            before_a = preds_a[x]
            for y in range(count_b):
                before_b = preds_b[y]
                if before_a == before_b or (before_a == cell_b and before_b == cell_a):
                    continue
                if before_a == goal_a and before_b == goal_b:
                    continue  # the all-arrived state has no moves
                previous = free_index[before_a] * n_free + free_index[before_b]
                if makespan_out[previous] == INF:
                    makespan_out[previous] = makespan_out[state] + 1
                    queue[tail] = previous
                    tail += 1
    # Sum of costs: Dijkstra backwards; steps cost 1 or 2, so three FIFO buckets by cost modulo 3 suffice
    # (Dial's algorithm): while bucket c is drained, pushes go to buckets c + 1 and c + 2 only.
    buckets = np.empty((3, 2 * n_free * n_free + 2), np.int64)
    bucket_size = np.zeros(3, np.int64)
    soc_out[goal_state] = 0
    buckets[0, 0] = goal_state
    bucket_size[0] = 1
    cost = 0
    while bucket_size[0] + bucket_size[1] + bucket_size[2] > 0:
        current = cost % 3
        index = 0
        while index < bucket_size[current]:
            state = buckets[current, index]
            index += 1
            if soc_out[state] != cost:
                continue  # improved since it was queued
            cell_a = free_cells[state // n_free]
            cell_b = free_cells[state % n_free]
            count_a = _predecessors(nbr, cell_a, goal_a, preds_a)
            count_b = _predecessors(nbr, cell_b, goal_b, preds_b)
            for x in range(count_a):
                before_a = preds_a[x]
                for y in range(count_b):
                    before_b = preds_b[y]
                    if before_a == before_b or (before_a == cell_b and before_b == cell_a):
                        continue
                    if before_a == goal_a and before_b == goal_b:
                        continue
                    step = (1 if before_a != goal_a else 0) + (1 if before_b != goal_b else 0)
                    previous = free_index[before_a] * n_free + free_index[before_b]
                    if cost + step < soc_out[previous]:
                        soc_out[previous] = cost + step
                        target = (cost + step) % 3
                        buckets[target, bucket_size[target]] = previous
                        bucket_size[target] += 1
        bucket_size[current] = 0
        cost += 1


@njit(cache=True)
def _evaluate(nd, node, assigned, dist, goals, nbr, use_pairs, free_index, n_free, table_soc, table_makespan,
              pair_row, matchings, n_matchings, single, pair_value):
    """Heuristic ``(h1, h2)`` of a node: lower bounds on remaining makespan and sum of costs; ``(INF, INF)`` if dead.

    ``nd[node]`` is a node row of ``group_astar`` (cells in columns ``[0, G)``, came-from cells in ``[G, 2G)``).
    Agents ``< assigned`` stand on their new cells (time t+1; their step is paid), the others on their old cells
    (time t; step not yet paid). Without pairs: ``h1`` = the largest remaining
    distance (``dist - 1`` for an unassigned agent, which may still close one step this turn), ``h2`` = the sum of
    distances. With pairs (``pair_row[i, j]`` = row of the (i, j) tables, i < j): ``h1`` also covers each pair's
    exact remaining makespan, and ``h2`` is the best sum over disjoint pairs (``matchings``) of exact pair costs
    plus single distances. A pair with one agent placed and one not is valued at the best legal move of the
    latter, which keeps every component consistent across operator-decomposition steps.
    """
    n_group = goals.shape[0]
    h1 = 0
    h2 = 0
    for j in range(n_group):
        d = dist[j, nd[node, j]]
        single[j] = d
        h2 += d
        if j >= assigned:
            d -= 1
        if d > h1:
            h1 = d
    if not use_pairs:
        return h1, h2
    for i in range(n_group):
        for j in range(i + 1, n_group):
            row = pair_row[i, j]
            if j < assigned or i >= assigned:
                cell_i = free_index[nd[node, i]]
                cell_j = free_index[nd[node, j]]
                value_soc = table_soc[row, cell_i * n_free + cell_j]
                value_makespan = table_makespan[row, cell_i * n_free + cell_j]
                if i >= assigned and value_makespan > 0:
                    value_makespan -= 1
            else:
                placed = nd[node, i]
                placed_from = nd[node, n_group + i]  # set whenever ``placed`` is an unplaced agent's cell
                waiting = nd[node, j]
                cell_i = free_index[placed] * n_free
                value_soc = INF
                value_makespan = INF
                if waiting == goals[j]:
                    value_soc = table_soc[row, cell_i + free_index[waiting]]
                    value_makespan = table_makespan[row, cell_i + free_index[waiting]]
                else:
                    for action in range(5):
                        target = nbr[waiting, action]
                        if target < 0 or target == placed or (target == placed_from and placed == waiting):
                            continue
                        candidate = table_soc[row, cell_i + free_index[target]] + 1
                        if candidate < value_soc:
                            value_soc = candidate
                        candidate = table_makespan[row, cell_i + free_index[target]]
                        if candidate < value_makespan:
                            value_makespan = candidate
            if value_soc >= INF:
                return INF, INF
            pair_value[i, j] = value_soc
            if value_makespan > h1:
                h1 = value_makespan
    for m in range(n_matchings):
        total = 0
        for a in range(n_group):
            partner = matchings[m, a]
            if partner < 0:
                total += single[a]
            elif a < partner:
                total += pair_value[a, partner]
        if total > h2:
            h2 = total
    return h1, h2


@njit(cache=True)
def group_astar(nbr, dist, starts, goals, order, max_expand, deadline, use_pairs, free_index, n_free, table_soc,
                table_makespan, pair_row, bound_makespan, bound_soc, reserved, reserved_arrival, reserved_hard):
    """Best joint plan of one group: A* with operator decomposition over joint states.

    Args:
        nbr: ``(N, 5)`` move table (cells of agents sitting on their goals from the start are blocked).
        dist: ``(G, N)`` distance maps of the group's agents; ``starts``/``goals``: ``(G,)`` cells.
        order: ``MODE_MAKESPAN`` or ``MODE_SOC``: the objective proved optimal (see below).
        max_expand: most node expansions; ``deadline``: ``perf_counter`` value to stop at (<= 0: none).
        use_pairs: use the pairwise tables (``table_soc``/``table_makespan`` rows ``pair_row[i, j]``, indexed
            by ``free_index`` of the two cells over ``n_free`` free cells, see ``pair_cost_to_go``).
        bound_makespan, bound_soc: drop nodes whose ``f`` exceeds these (``INF``: no bound).
        reserved: ``(R, L)`` cells of other agents over time, each valid up to ``reserved_arrival[r]`` and on
            its goal after that. ``reserved_hard``: the group must not conflict with them; else they only form
            a conflict-avoidance table: among equally good nodes, fewer conflicts with them go first.

    Returns:
        ``(status, path (T+1, G) int32, expanded, root_bound)``. ``status`` is ``SOLVED``, ``UNSOLVABLE_GROUP``
        (no plan within the bounds and around the reserved agents: with neither, a proof that the group, and so
        the instance, is unsolvable), ``LIMIT_NODES`` or ``LIMIT_TIME``. ``root_bound`` is the heuristic's lower
        bound on the group's sum of costs at the start.

    Costs are pairs: a full step costs ``(1, agents not yet on goal)`` (makespan, sum of costs). Operator
    decomposition places one agent's move per node; the time cost is charged with the first agent's move and
    each moving agent's unit of sum of costs with its own move. The heuristic (``_evaluate``) is consistent in
    both components, so the first goal popped is optimal for the ``order`` objective among plans within the
    bounds. The heap orders by that objective's ``f``, then by fewer avoidance-table conflicts, then by the
    smaller remaining heuristic (a dive to the goal); duplicates keep the lexicographically better
    ``(primary, secondary, conflicts)`` cost, so the other objective and the table only steer ties.

    Every node is deduplicated, intermediate ones included. An intermediate node's future depends only on the
    placed agents' new cells, the unplaced agents' old cells, the next agent to place, and, for a placed agent
    that moved into a cell an unplaced agent still stands on, the cell it came from (the swap rule needs it);
    that is its key. With hard reservations the key also holds the time, clipped at the last reserved arrival
    (after it the reserved agents stand still). A node is one row of ``nd`` (see the column constants below):
    a search spends its time on memory latency, and one row keeps a node's fields together.
    """
    n_group = starts.shape[0]
    # Columns of a node row: cells, came-from cells, then the fields below. The key is columns [0, key_width).
    col_tag = 2 * n_group  # time clipped at ``horizon`` (0 without hard reservations)
    col_next = col_tag + 1  # 0 for a full node, else the next agent to place
    key_width = col_next + 1
    col_parent = key_width  # best predecessor
    col_g1 = col_parent + 1
    col_g2 = col_g1 + 1
    col_g3 = col_g2 + 1  # conflicts with soft reservations so far
    col_h1 = col_g3 + 1
    col_h2 = col_h1 + 1
    col_closed = col_h2 + 1
    row_width = col_closed + 1

    n_reserved = reserved.shape[0]
    horizon = 0  # time tags only matter when reservations are hard
    if reserved_hard:
        for r in range(n_reserved):
            if reserved_arrival[r] > horizon:
                horizon = reserved_arrival[r]
    # An agent may arrive only once no reserved agent will stand on its goal again (it never leaves).
    goal_free_from = np.zeros(n_group, np.int64)
    for i in range(n_group):
        for r in range(n_reserved):
            for t in range(reserved_arrival[r] + 1):
                if reserved[r, t] == goals[i] and t + 1 > goal_free_from[i]:
                    goal_free_from[i] = t + 1
    if use_pairs and n_group <= MAX_MATCHED_GROUP:
        matchings = MATCHINGS[n_group].copy()
        n_matchings = N_MATCHINGS[n_group]
    else:
        # Too many agents to enumerate matchings: one fixed matching is still a valid lower bound.
        matchings = np.full((1, n_group), -1, np.int64)
        for a in range(0, n_group - 1, 2):
            matchings[0, a] = a + 1
            matchings[0, a + 1] = a
        n_matchings = 1
    single = np.empty(n_group, np.int64)
    pair_value = np.empty((n_group, n_group), np.int64)

    capacity = 1024
    nd = np.empty((capacity, row_width), np.int32)
    table = np.full(2048, -1, np.int64)
    heap_capacity = 1024
    keys1 = np.empty(heap_capacity, np.int64)
    keys2 = np.empty(heap_capacity, np.int64)
    heap_nodes = np.empty(heap_capacity, np.int32)

    # Literal constants passed to jitted callees make numba compile one specialisation per value; np.int64 and
    # np.bool_ keep one.
    root = np.int64(0)
    for i in range(n_group):
        nd[0, i] = starts[i]
        nd[0, n_group + i] = -1
    nd[0, col_tag] = 0
    nd[0, col_next] = 0
    h1, h2 = _evaluate(nd, root, n_group, dist, goals, nbr, use_pairs, free_index, n_free, table_soc,
                       table_makespan, pair_row, matchings, n_matchings, single, pair_value)
    empty_path = np.empty((0, n_group), np.int32)
    if h2 >= INF:
        return UNSOLVABLE_GROUP, empty_path, 0, h2
    root_bound = h2
    if h1 > bound_makespan or h2 > bound_soc:
        return UNSOLVABLE_GROUP, empty_path, 0, root_bound
    nd[0, col_parent] = -1
    nd[0, col_g1] = 0
    nd[0, col_g2] = 0
    nd[0, col_g3] = 0
    nd[0, col_h1] = h1
    nd[0, col_h2] = h2
    nd[0, col_closed] = 0
    slot, _, entry = _table_find(table, nd, root, key_width)
    table[slot] = entry
    n_nodes = np.int64(1)
    key1, key2 = _keys(order, root, root, root, h1, h2)
    heap_size = _heap_push(keys1, keys2, heap_nodes, root, key1, key2, root)
    expanded = 0
    goal_node = -1

    while heap_size > 0:
        key1 = keys1[0]
        key2 = keys2[0]
        node = heap_nodes[0]
        heap_size = _heap_pop(keys1, keys2, heap_nodes, heap_size)
        if nd[node, col_closed]:
            continue
        g1 = np.int64(nd[node, col_g1])
        g2 = np.int64(nd[node, col_g2])
        g3 = np.int64(nd[node, col_g3])
        cur1, cur2 = _keys(order, g1, g2, g3, np.int64(nd[node, col_h1]), np.int64(nd[node, col_h2]))
        if cur1 != key1 or cur2 != key2:
            continue  # a stale heap entry: the node was reached again more cheaply
        nd[node, col_closed] = 1
        is_full = nd[node, col_next] == 0
        if is_full and nd[node, col_h2] == 0:
            goal_node = node
            break
        if expanded >= max_expand:
            return LIMIT_NODES, empty_path, expanded, root_bound
        expanded += 1
        if deadline > 0.0 and (expanded & 255) == 0 and now() > deadline:
            return LIMIT_TIME, empty_path, expanded, root_bound

        agent = nd[node, col_next]
        if is_full:
            while nd[node, agent] == goals[agent]:
                agent += 1  # arrived agents stay; the goal test above guarantees someone still moves
        step_cost = 1 if is_full else 0
        t_next = g1 + step_cost  # the time this step leads to
        old = nd[node, agent]
        for action in range(5):
            target = nbr[old, action]
            if target < 0:
                continue
            conflicts = 0
            if target == goals[agent] and t_next < goal_free_from[agent]:
                if reserved_hard:
                    continue
                conflicts += 1
            legal = True
            for j in range(agent):
                placed = nd[node, j]
                if placed == target or (target != old and placed == old and nd[node, n_group + j] == target):
                    legal = False
                    break
            if legal:
                for j in range(agent + 1, n_group):
                    waiting = nd[node, j]
                    if waiting == target and waiting == goals[j]:
                        legal = False  # an arrived agent will never leave that cell
                        break
            if legal:
                for r in range(n_reserved):
                    last = reserved_arrival[r]
                    other_next = reserved[r, t_next if t_next < last else last]
                    if other_next == target or (
                        target != old
                        and other_next == old
                        and reserved[r, t_next - 1 if t_next - 1 < last else last] == target
                    ):
                        if reserved_hard:
                            legal = False
                            break
                        conflicts += 1
            if not legal:
                continue
            if n_nodes >= capacity:
                capacity *= 2
                nd = _grow2(nd, capacity)
            child = n_nodes
            for j in range(n_group):
                nd[child, j] = nd[node, j]
            nd[child, agent] = target
            following = agent + 1
            while following < n_group and nd[node, following] == goals[following]:
                following += 1  # arrived agents are placed at once: they only stay
            # Keep the cell a placed agent came from only while an unplaced agent still stands where it went.
            for j in range(following):
                came_from = nd[node, n_group + j] if j < agent else (old if j == agent and target != old else -1)
                if came_from >= 0:
                    needed = False
                    for k in range(following, n_group):
                        if nd[node, k] == nd[child, j]:
                            needed = True
                            break
                    if not needed:
                        came_from = -1
                nd[child, n_group + j] = came_from
            for j in range(following, n_group):
                nd[child, n_group + j] = -1
            h1, h2 = _evaluate(nd, child, following, dist, goals, nbr, use_pairs, free_index, n_free,
                               table_soc, table_makespan, pair_row, matchings, n_matchings, single, pair_value)
            if h2 >= INF:
                continue  # two agents of this node can never both arrive
            child_g1 = g1 + step_cost
            child_g2 = g2 + 1
            child_g3 = g3 + conflicts
            if child_g1 + h1 > bound_makespan or child_g2 + h2 > bound_soc:
                continue
            nd[child, col_next] = following if following < n_group else 0
            nd[child, col_tag] = child_g1 if child_g1 < horizon else horizon
            slot, existing, entry = _table_find(table, nd, child, key_width)
            if existing >= 0:
                if nd[existing, col_closed]:
                    continue
                old1 = np.int64(nd[existing, col_g1])
                old2 = np.int64(nd[existing, col_g2])
                old3 = np.int64(nd[existing, col_g3])
                if order == MODE_MAKESPAN:
                    better = child_g1 < old1 or (
                        child_g1 == old1 and (child_g2 < old2 or (child_g2 == old2 and child_g3 < old3))
                    )
                else:
                    better = child_g2 < old2 or (
                        child_g2 == old2 and (child_g1 < old1 or (child_g1 == old1 and child_g3 < old3))
                    )
                if not better:
                    continue
                child = existing
            else:
                table[slot] = entry
                n_nodes += 1
                nd[child, col_closed] = 0
                if 2 * n_nodes > table.shape[0]:
                    table = _table_rehash(table, nd, key_width)
            nd[child, col_parent] = node
            nd[child, col_g1] = child_g1
            nd[child, col_g2] = child_g2
            nd[child, col_g3] = child_g3
            nd[child, col_h1] = h1
            nd[child, col_h2] = h2
            if heap_size >= heap_capacity:
                heap_capacity *= 2
                keys1 = _grow1(keys1, heap_capacity)
                keys2 = _grow1(keys2, heap_capacity)
                heap_nodes = _grow1(heap_nodes, heap_capacity)
            key1, key2 = _keys(order, child_g1, child_g2, child_g3, h1, h2)
            heap_size = _heap_push(keys1, keys2, heap_nodes, heap_size, key1, key2, child)

    if goal_node < 0:
        return UNSOLVABLE_GROUP, empty_path, expanded, root_bound
    # Walk back through the predecessors; each full node on the way is one time step.
    length = 0
    node = nd[goal_node, col_parent]
    while node >= 0:
        if nd[node, col_next] == 0:
            length += 1
        node = nd[node, col_parent]
    path = np.empty((length + 1, n_group), np.int32)
    node = goal_node
    t = length
    while node >= 0:
        if nd[node, col_next] == 0:
            for i in range(n_group):
                path[t, i] = nd[node, i]
            t -= 1
        node = nd[node, col_parent]
    return SOLVED, path, expanded, root_bound


# ------------------------------------------------------------------------------- independence detection
@njit(cache=True)
def _members_of(group_of, group):
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
def _others_of(group_of, group, active):
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
def _install(plan, arrival, members, goals, path):
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
def _pair_rows(members, pair_row_global, compute, nbr, free_index, free_cells, goals, table_soc, table_makespan):
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
def solve_independent(nbr, dist, starts, goals, active, mode, max_expand, deadline, free_index, free_cells,
                      table_soc, table_makespan, pair_row_global, upper_arrival, escalate_after, replan_budget):
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
def _no_plan(status, expanded, culprits, lower_bound_soc):
    """``solve_kernel``'s answer when there is no plan to give (a proof, a limit or an inconsistency)."""
    n_agents = culprits.shape[0]
    return (
        status, -1, -1, expanded, np.zeros((n_agents, 0), np.int8), np.zeros(n_agents, np.int32), culprits,
        lower_bound_soc,
    )


@njit(cache=True)
def solve_kernel(grid, starts_rc, goals_rc, max_expand, deadline, escalate_after, replan_budget):
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
    starts, goals, blocked = _flat_instance(grid, starts_rc, goals_rc)
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
    lower_bound_soc = 0
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
    makespan = 0
    sum_of_costs = 0
    for k in range(n_agents):
        sum_of_costs += arrival[k]
        if arrival[k] > makespan:
            makespan = arrival[k]
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
    h = np.int64(0)
    for i in range(state.shape[0]):
        h = (h * np.int64(1000003)) ^ state[i]
    h = (h ^ ((h >> 30) & np.int64(0x3FFFFFFFF))) * np.int64(-4658895280553007687)
    h = (h ^ ((h >> 27) & np.int64(0x1FFFFFFFFF))) * np.int64(-7723592293110705685)
    return h ^ ((h >> 31) & np.int64(0x1FFFFFFFF))


@njit(cache=True)
def no_wait_plan_exists(nbr, dist, starts, goals, max_states):
    """Is there a conflict-free joint plan where every agent walks one of its shortest paths without waiting?

    ``nbr``/``dist`` are over the bare map (holes only: other agents are ignored when defining "shortest").
    Every agent's distance must be finite. Depth-first search over joint states in which, at time t, each agent
    with ``t < d_k`` moves one layer down its own distance map and every other agent stands on its goal. Within
    a step the agents choose one after the other, so a conflict prunes all completions of the choices so far;
    a joint state from which no completion exists is remembered, so each is expanded at most once. Returns
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
    pos = np.empty((horizon + 1, n_agents), np.int64)  # cells at the start of each step
    new = np.empty((horizon, n_agents), np.int64)  # cells chosen so far in each step
    options = np.empty((horizon + 1, n_agents, 4), np.int64)
    n_options = np.empty((horizon + 1, n_agents), np.int64)
    choice = np.empty((horizon + 1, n_agents), np.int64)
    table = np.full(1024, -1, np.int64)  # slots -> index into dead_states
    dead_states = np.empty((512, n_agents), np.int64)
    n_dead = 0

    for k in range(n_agents):
        pos[0, k] = starts[k]
    level = 0
    agent = 0
    fresh = True
    while True:
        if fresh:
            # Each agent's moves down its distance map at this level (arrived agents only stay).
            for k in range(n_agents):
                cell = pos[level, k]
                choice[level, k] = -1
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
            agent = 0
            fresh = False
        choice[level, agent] += 1
        if choice[level, agent] >= n_options[level, agent]:
            # This agent has no choice left: back to the previous agent, or the whole state is dead.
            choice[level, agent] = -1
            if agent > 0:
                agent -= 1
                continue
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
            agent = n_agents - 1
            continue
        target = options[level, agent, choice[level, agent]]
        legal = True
        for j in range(agent):
            if new[level, j] == target or (
                target == pos[level, j] and new[level, j] == pos[level, agent] and target != pos[level, agent]
            ):
                legal = False
                break
        if not legal:
            continue
        new[level, agent] = target
        if agent + 1 < n_agents:
            agent += 1
            continue
        # Every agent has moved: a joint state at the next level.
        if level + 1 == horizon:
            return 1
        mask = table.shape[0] - 1
        slot = _state_hash(new[level]) & mask
        dead = False
        while table[slot] >= 0:
            other = table[slot]
            same = True
            for k in range(n_agents):
                if dead_states[other, k] != new[level, k]:
                    same = False
                    break
            if same:
                dead = True
                break
            slot = (slot + 1) & mask
        if dead:
            continue
        for k in range(n_agents):
            pos[level + 1, k] = new[level, k]
        level += 1
        fresh = True


@njit(cache=True)
def _find_root(parent, a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@njit(cache=True)
def interacting_groups(nbr, dist, starts, goals):
    """Label agents so that two agents whose no-wait shortest paths could ever conflict share a label.

    Agent k's shortest paths visit cell c only at time ``d_k - dist_k(c)`` (the distance map is layered), and
    after ``d_k`` it stands on its goal. Two agents can meet in a vertex or swap conflict only at a cell both
    use at times at most one step apart (or a goal the other uses from one step before its arrival on), so
    agents with no such cell in common are independent; labels are the connected components of that relation.
    """
    n_agents = starts.shape[0]
    n_cells = nbr.shape[0]
    # Each agent's cells with their time: forward over the shortest-path DAG from its start.
    time_at = np.full((n_agents, n_cells), -1, np.int32)
    queue = np.empty(n_cells, np.int64)
    head_of = np.full(n_cells, -1, np.int64)  # per cell, a linked list of (agent) entries touching it
    entry_agent = np.empty(4 * n_cells, np.int64)
    entry_next = np.empty(4 * n_cells, np.int64)
    n_entries = 0
    for k in range(n_agents):
        length = dist[k, starts[k]]
        time_at[k, starts[k]] = 0
        queue[0] = starts[k]
        head = 0
        tail = 1
        while head < tail:
            cell = queue[head]
            head += 1
            if n_entries >= entry_agent.shape[0]:
                entry_agent = _grow1(entry_agent, 2 * n_entries)
                entry_next = _grow1(entry_next, 2 * n_entries)
            entry_agent[n_entries] = k
            entry_next[n_entries] = head_of[cell]
            head_of[cell] = n_entries
            n_entries += 1
            for action in range(1, 5):
                target = nbr[cell, action]
                if target >= 0 and dist[k, target] == dist[k, cell] - 1 and time_at[k, target] < 0:
                    time_at[k, target] = length - dist[k, target]
                    queue[tail] = target
                    tail += 1
    parent = np.arange(n_agents)
    for cell in range(n_cells):
        a_entry = head_of[cell]
        while a_entry >= 0:
            a = entry_agent[a_entry]
            b_entry = entry_next[a_entry]
            while b_entry >= 0:
                b = entry_agent[b_entry]
                t_a = time_at[a, cell]
                t_b = time_at[b, cell]
                meet = abs(t_a - t_b) <= 1
                if cell == goals[a] and t_b >= dist[a, starts[a]] - 1:
                    meet = True
                if cell == goals[b] and t_a >= dist[b, starts[b]] - 1:
                    meet = True
                if meet:
                    root_a = _find_root(parent, a)
                    root_b = _find_root(parent, b)
                    if root_a != root_b:
                        parent[root_a] = root_b
                b_entry = entry_next[b_entry]
            a_entry = entry_next[a_entry]
    labels = np.empty(n_agents, np.int64)
    for k in range(n_agents):
        labels[k] = _find_root(parent, k)
    return labels


@njit(cache=True)
def needs_wait_kernel(grid, starts_rc, goals_rc, max_states):
    """``(verdict, sum of bare-map distances)``: verdict 1 = a wait is needed, 0 = not, -1 = state limit hit.

    Distances are over the bare map (ice, 4-connected), ignoring every agent; an agent that cannot reach its
    goal at all has no shortest path, so the verdict is 1 (and the sum is -1). Independent groups of agents
    (``interacting_groups``) are searched separately, each with the ``max_states`` budget.
    """
    height, width = grid.shape
    n_cells = height * width
    n_agents = starts_rc.shape[0]
    starts, goals, blocked = _flat_instance(grid, starts_rc, goals_rc)
    nbr = neighbor_table(blocked, height, width)
    dist = np.empty((n_agents, n_cells), np.int32)
    queue = np.empty(n_cells, np.int32)
    total = 0
    for k in range(n_agents):
        bfs_distances(nbr, goals[k], dist[k], queue)
        if dist[k, starts[k]] >= INF:
            return 1, -1
        total += dist[k, starts[k]]
    labels = interacting_groups(nbr, dist, starts, goals)
    verdict = 0
    for label in range(n_agents):
        count = 0
        for k in range(n_agents):
            if labels[k] == label:
                count += 1
        if count < 2:
            continue  # a lone agent always has its shortest path
        members = np.empty(count, np.int64)
        i = 0
        for k in range(n_agents):
            if labels[k] == label:
                members[i] = k
                i += 1
        found = no_wait_plan_exists(nbr, dist[members], starts[members], goals[members], max_states)
        if found == 0:
            return 1, total
        if found < 0:
            verdict = -1
    return verdict, total
