"""Joint A* of one group of agents (operator decomposition), the search core of the optimal MAPF solver.

Free functions over plain arrays, ``@njit(cache=True)``, serial; array conventions are those of
``simulator.grid_kernels``. ``simulator.independence_kernels`` calls ``group_astar`` once per group.
"""

from __future__ import annotations

import numpy as np

from simulator.grid_kernels import INF, grow1, grow2, now
from simulator.jit import BoolScalar, Int32Array, Int64Array, IntScalar, njit
from simulator.pair_tables import MATCHINGS, MAX_MATCHED_GROUP, N_MATCHINGS

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

_FIELD_MAX = (1 << 21) - 1  # one tie-break field of the second heap key


@njit(cache=True)
def _heap_push(keys1: Int64Array, keys2: Int64Array, nodes: Int32Array, size: IntScalar, key1: IntScalar,
               key2: IntScalar, node: IntScalar) -> IntScalar:
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
def _heap_pop(keys1: Int64Array, keys2: Int64Array, nodes: Int32Array, size: IntScalar) -> IntScalar:
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
def _node_hash(nd: Int32Array, node: IntScalar, width: int) -> np.int64:
    """Hash of a node's search state: columns ``[0, 2G + 2)`` of its row (cells, came-from cells, tag, next)."""
    h = np.int64(0)
    for c in range(width):
        h = (h * np.int64(1000003)) ^ nd[node, c]
    # SplitMix64's finaliser: the slot takes the low bits and the fingerprint the high ones.
    h = (h ^ ((h >> 30) & np.int64(0x3FFFFFFFF))) * np.int64(-4658895280553007687)
    h = (h ^ ((h >> 27) & np.int64(0x1FFFFFFFFF))) * np.int64(-7723592293110705685)
    return h ^ ((h >> 31) & np.int64(0x1FFFFFFFF))


@njit(cache=True)
def _table_find(table: Int64Array, nd: Int32Array, node: IntScalar,
                width: int) -> tuple[IntScalar, IntScalar, IntScalar]:
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
def _table_rehash(table: Int64Array, nd: Int32Array, width: int) -> Int64Array:
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
def _keys(mode: IntScalar, g1: IntScalar, g2: IntScalar, g3: IntScalar, h1: IntScalar,
          h2: IntScalar) -> tuple[IntScalar, IntScalar]:
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


@njit(cache=True)
def _evaluate(nd: Int32Array, node: IntScalar, assigned: IntScalar, dist: Int32Array, goals: Int64Array,
              nbr: Int32Array, use_pairs: BoolScalar, free_index: Int64Array, n_free: int, table_soc: Int32Array,
              table_makespan: Int32Array, pair_row: Int64Array, matchings: Int64Array, n_matchings: IntScalar,
              single: Int64Array, pair_value: Int64Array) -> tuple[IntScalar, IntScalar]:
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
def group_astar(nbr: Int32Array, dist: Int32Array, starts: Int64Array, goals: Int64Array, order: IntScalar,
                max_expand: IntScalar, deadline: float, use_pairs: BoolScalar, free_index: Int64Array, n_free: int,
                table_soc: Int32Array, table_makespan: Int32Array, pair_row: Int64Array, bound_makespan: IntScalar,
                bound_soc: IntScalar, reserved: Int32Array, reserved_arrival: Int64Array,
                reserved_hard: BoolScalar) -> tuple[int, Int32Array, IntScalar, IntScalar]:
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
    n_group: int = starts.shape[0]
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
                nd = grow2(nd, capacity)
            child: IntScalar = n_nodes
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
                keys1 = grow1(keys1, heap_capacity)
                keys2 = grow1(keys2, heap_capacity)
                heap_nodes = grow1(heap_nodes, heap_capacity)
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
