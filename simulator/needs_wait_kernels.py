"""numba kernels of ``simulator.needs_wait``: does an instance need a wait to resolve a conflict?

Free functions over plain arrays, ``@njit(cache=True)``, serial; array conventions are those of
``simulator.grid_kernels``. The plain-Python twin is ``simulator.needs_wait.needs_wait_reference``.
"""

from __future__ import annotations

import numpy as np

from simulator.grid_kernels import INF, bfs_distances, flat_instance, grow1, grow2, neighbor_table, now
from simulator.jit import Int8Array, Int32Array, Int64Array, IntScalar, njit

CLOCK_EVERY = 65_535  # the search reads the clock once per this many steps (plus one): a step is a few nanoseconds


@njit(cache=True)
def _state_hash(state: Int64Array) -> np.int64:
    h = np.int64(0)
    for i in range(state.shape[0]):
        h = (h * np.int64(1000003)) ^ state[i]
    h = (h ^ ((h >> 30) & np.int64(0x3FFFFFFFF))) * np.int64(-4658895280553007687)
    h = (h ^ ((h >> 27) & np.int64(0x1FFFFFFFFF))) * np.int64(-7723592293110705685)
    return h ^ ((h >> 31) & np.int64(0x1FFFFFFFF))


@njit(cache=True)
def no_wait_plan_exists(nbr: Int32Array, dist: Int32Array, starts: Int64Array, goals: Int64Array, max_states: IntScalar,
                        max_steps: IntScalar, deadline: float) -> tuple[int, int]:
    """Is there a conflict-free joint plan where every agent walks one of its shortest paths without waiting?

    ``nbr``/``dist`` are over the bare map (holes only: other agents are ignored when defining "shortest").
    Every agent's distance must be finite. Depth-first search over joint states in which, at time t, each agent
    with ``t < d_k`` moves one layer down its own distance map and every other agent stands on its goal. Within
    a step the agents choose one after the other, so a conflict prunes all completions of the choices so far;
    a joint state from which no completion exists is remembered, so each is expanded at most once.

    The dead states bound the memory but not the time: within one step the agents' choices multiply (up to
    ``2**K`` completions of a state that is not yet known dead), so ``max_steps`` bounds the choices tried and
    ``deadline`` (a ``perf_counter`` value, <= 0 for none) the wall clock.

    Returns ``(verdict, steps)``: verdict 1 (such a plan exists), 0 (none exists), -1 (more than ``max_states``
    dead states were recorded), -2 (more than ``max_steps`` choices were tried) or -3 (past the deadline);
    ``steps`` is the number of choices tried.
    """
    n_agents = starts.shape[0]
    horizon = 0
    lengths = np.empty(n_agents, np.int64)
    for k in range(n_agents):
        lengths[k] = dist[k, starts[k]]
        if lengths[k] > horizon:
            horizon = lengths[k]
    if horizon == 0:
        return 1, 0
    steps = 0
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
        steps += 1
        if steps > max_steps:
            return -2, steps
        if deadline > 0.0 and (steps & CLOCK_EVERY) == 0 and now() > deadline:
            return -3, steps
        choice[level, agent] += 1
        if choice[level, agent] >= n_options[level, agent]:
            # This agent has no choice left: back to the previous agent, or the whole state is dead.
            choice[level, agent] = -1
            if agent > 0:
                agent -= 1
                continue
            if level == 0:
                return 0, steps
            if n_dead >= max_states:
                return -1, steps
            if n_dead >= dead_states.shape[0]:
                dead_states = grow2(dead_states, dead_states.shape[0] * 2)
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
            return 1, steps
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
def _find_root(parent: Int64Array, a: IntScalar) -> IntScalar:
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@njit(cache=True)
def interacting_groups(nbr: Int32Array, dist: Int32Array, starts: Int64Array, goals: Int64Array) -> Int64Array:
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
                entry_agent = grow1(entry_agent, 2 * n_entries)
                entry_next = grow1(entry_next, 2 * n_entries)
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
def needs_wait_kernel(grid: Int8Array, starts_rc: Int32Array, goals_rc: Int32Array, max_states: IntScalar,
                      max_steps: IntScalar, deadline: float) -> tuple[int, IntScalar]:
    """``(verdict, sum of bare-map distances)``: verdict 1 = a wait is needed, 0 = not, -1 = state limit hit,
    -2 = step limit hit, -3 = past the deadline (the last limit hit when several groups ran out).

    Distances are over the bare map (ice, 4-connected), ignoring every agent; an agent that cannot reach its
    goal at all has no shortest path, so the verdict is 1 (and the sum is -1). Independent groups of agents
    (``interacting_groups``) are searched separately, each with the ``max_states`` budget; ``max_steps`` (choices
    tried, see ``no_wait_plan_exists``) is shared by all groups, and so is ``deadline`` (<= 0: none).
    """
    height, width = grid.shape
    n_cells = height * width
    n_agents = starts_rc.shape[0]
    starts, goals, blocked = flat_instance(grid, starts_rc, goals_rc)
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
        found, steps = no_wait_plan_exists(
            nbr, dist[members], starts[members], goals[members], max_states, max_steps, deadline
        )
        max_steps -= steps
        if found == 0:
            return 1, total
        if found < 0:
            verdict = found
            if found != -1:
                return verdict, total  # the shared step or time budget is spent: no later group can run
    return verdict, total
