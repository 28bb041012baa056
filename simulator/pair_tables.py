"""Pairwise cost-to-go tables of the joint A* (``simulator.astar_kernels``): the exact optimum of two agents of a
group alone, for every pair of free cells, and the matchings that combine such tables into one heuristic.

Array conventions are those of ``simulator.grid_kernels``.
"""

from __future__ import annotations

import numpy as np

from simulator.grid_kernels import INF
from simulator.jit import Int32Array, Int64Array, IntScalar, njit


def _all_matchings(n_agents: int) -> list[list[int]]:
    """Every maximal matching of ``n_agents`` agents as a partner list (-1 = unmatched; at most one when odd)."""
    result: list[list[int]] = []

    def extend(partner: list[int], singles_left: int) -> None:
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


def _matchings_table() -> tuple[Int64Array, Int64Array]:
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
def _predecessors(nbr: Int32Array, cell: IntScalar, goal: IntScalar, out: Int64Array) -> int:
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
def pair_cost_to_go(nbr: Int32Array, free_index: Int64Array, free_cells: Int64Array, goal_a: IntScalar,
                    goal_b: IntScalar, soc_out: Int32Array, makespan_out: Int32Array) -> None:
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
