"""numba kernels: the batched step, the batched plan judge and the Monte Carlo judge under slippery ice.

Free functions over plain arrays, compiled with ``@njit(cache=True)``, serial (one thread). They trust their
inputs: shapes, dtypes and codes are checked once by the Python wrappers in ``simulator.step`` and
``simulator.judge``, never here (a bad code inside numba would read out of bounds instead of raising).
Their twin is ``simulator.rules``; the tests hold the two equal.

Layout inside the kernels: environments are processed in *lanes* of ``LANES`` at a time, with per-agent scratch
arrays shaped ``(K, LANES)`` (structure of arrays), so that the inner loops run over lanes without branches that
depend on the data; that layout is what lets LLVM vectorise the conflict checks, and it made the step about 4x
faster than an environment-at-a-time loop on the benchmark machine.

Array conventions (B environments, K agent slots, maps padded to H x W with ``OFF_GRID``):
    grids:   (B, H, W) int8      tile codes
    pos:     (B, K, 2) int32     (row, col)
    goals:   (B, K, 2) int32
    status:  (B, K)    int8      MOVING / ON_GOAL / FALLEN / ABSENT
    actions: (B, K)    int8      one joint action per environment
    events:  (B, K)    int8      event flag bits of the step
"""

from __future__ import annotations

import numpy as np

from simulator import constants as C
from simulator.grid_kernels import DCOL, DROW
from simulator.jit import BoolArray, Float64Array, Int8Array, Int32Array, Int64Array, UInt16Array, njit

# Plain ints so numba freezes them as compile-time constants.
_ICE, _HOLE, _OFF_GRID = C.ICE, C.HOLE, C.OFF_GRID
_WAIT, _UP, _DOWN, _LEFT, _RIGHT = C.WAIT, C.UP, C.DOWN, C.LEFT, C.RIGHT
_MOVING, _ON_GOAL, _FALLEN, _ABSENT = C.MOVING, C.ON_GOAL, C.FALLEN, C.ABSENT
_EV_ILLEGAL, _EV_HOLE, _EV_VERTEX, _EV_EDGE, _EV_GOAL, _EV_SLIP = (
    C.EV_ILLEGAL,
    C.EV_HOLE,
    C.EV_VERTEX,
    C.EV_EDGE,
    C.EV_GOAL,
    C.EV_SLIP,
)
_EV_FAILURE_MASK = C.EV_FAILURE_MASK
_NO_FAILURE, _GOAL_NOT_REACHED = C.NO_FAILURE, C.GOAL_NOT_REACHED
# The failure table's step failures in reporting priority order (``constants.FAILURE_PRIORITY``): flag, category.
_PRIORITY_FLAGS = np.array([flag for flag, _ in C.FAILURE_PRIORITY], dtype=np.int8)
_PRIORITY_CATEGORIES = np.array([category for _, category in C.FAILURE_PRIORITY], dtype=np.int8)


LANES = 128  # environments advanced together; 32..256 measured within a few percent of each other

_DROW, _DCOL = DROW, DCOL  # row and col delta per action code (constants.ACTION_DELTAS)
_SLIP_FIRST = np.array([C.WAIT, C.LEFT, C.RIGHT, C.DOWN, C.UP], dtype=np.int8)  # constants.SLIP_SIDEWAYS[:, 0]
_SLIP_SECOND = np.array([C.WAIT, C.RIGHT, C.LEFT, C.UP, C.DOWN], dtype=np.int8)  # constants.SLIP_SIDEWAYS[:, 1]


@njit(cache=True, inline="always")
def _step_lanes(grids: Int8Array, goals: Int32Array, env_base: int, env_stride: int, slot_base: int, n: int,
                n_agents: int, pos: Int32Array, status: Int8Array, actions: Int8Array, slip: float,
                draws: Float64Array, out_pos: Int32Array, out_status: Int8Array, out_events: Int8Array,
                new_row: Int32Array, new_col: Int32Array, old_cell: UInt16Array, new_cell: UInt16Array,
                live: BoolArray, slips: BoolArray, taken: Int8Array, ev: Int8Array, with_slip: bool) -> None:
    """One simultaneous step of ``n`` lanes; the rules of ``simulator.rules.step``.

    Lane ``i`` plays on environment ``e = env_base + i * env_stride`` (``grids[e]``, ``goals[e]``); its state is
    row ``slot_base + i`` of ``pos (N, K, 2)``, ``status (N, K)`` and ``actions (N, K)``, and its result goes to
    the same row of ``out_pos / out_status / out_events`` (which may alias the inputs). ``draws`` is
    ``(K, LANES)``, read only when ``with_slip`` (pass the literal ``slip > 0``); the rest are ``(K, LANES)``
    scratch arrays. Cells are uint16 (``MAX_SIDE**2`` cells fit) and events int8, so the vectorised conflict loop
    holds 2-4x more lanes per register than with int32. Lanes map to rows by
    arithmetic, not index arrays: LLVM then sees unit strides, which measured ~25% faster than a gather.
    """
    height = grids.shape[1]
    width = grids.shape[2]
    if with_slip:  # a pass of its own: a slip test inside the move loop below cost 25% of the step's speed
        for k in range(n_agents):
            for i in range(n):
                a = actions[slot_base + i, k]
                u = draws[k, i]
                slipped = (status[slot_base + i, k] == _MOVING) & (a != _WAIT) & (u < slip)
                taken[k, i] = (_SLIP_FIRST[a] if u < slip * 0.5 else _SLIP_SECOND[a]) if slipped else a
                slips[k, i] = slipped
    for k in range(n_agents):
        for i in range(n):
            slot = slot_base + i
            r = pos[slot, k, 0]
            c = pos[slot, k, 1]
            s = status[slot, k]
            # ``with_slip`` is a compile-time constant at each call site: the no-slip copy reads no slip state.
            slipped = slips[k, i] if with_slip else False
            a = taken[k, i] if with_slip else actions[slot, k]
            a = a if s == _MOVING else _WAIT
            nr = r + _DROW[a]
            nc = c + _DCOL[a]
            # Branch-free bounds test (unsigned compare) and a tile read that never leaves the array.
            inside = (np.uint32(nr) < np.uint32(height)) & (np.uint32(nc) < np.uint32(width))
            tile = grids[env_base + i * env_stride, nr if inside else r, nc if inside else c]
            blocked = (not inside) | (tile == _OFF_GRID)
            new_row[k, i] = r if blocked else nr
            new_col[k, i] = c if blocked else nc
            old_cell[k, i] = r * width + c
            new_cell[k, i] = r * width + c if blocked else nr * width + nc
            live[k, i] = (s == _MOVING) | (s == _ON_GOAL)
            ev[k, i] = (
                (_EV_SLIP if slipped else 0)
                | (_EV_ILLEGAL if blocked & (not slipped) & (s == _MOVING) else 0)
                | (_EV_HOLE if (not blocked) & (tile == _HOLE) & (s == _MOVING) else 0)
            )
    # Conflicts among agents on the board (moving or parked on their goal).
    for k1 in range(n_agents):
        for k2 in range(k1 + 1, n_agents):
            for i in range(n):
                both = live[k1, i] & live[k2, i]
                a1 = new_cell[k1, i]
                a2 = new_cell[k2, i]
                vertex = (a1 == a2) & both
                edge = (a1 == old_cell[k2, i]) & (a2 == old_cell[k1, i]) & (a1 != old_cell[k1, i]) & both
                flags = (_EV_VERTEX if vertex else 0) | (_EV_EDGE if edge else 0)
                ev[k1, i] |= flags
                ev[k2, i] |= flags
    for k in range(n_agents):
        for i in range(n):
            slot = slot_base + i
            env = env_base + i * env_stride
            s = status[slot, k]
            e = ev[k, i]
            r = new_row[k, i]
            c = new_col[k, i]
            moving = s == _MOVING
            fallen = moving & ((e & _EV_HOLE) != 0)
            arrived = (
                moving
                & ((e & _EV_FAILURE_MASK) == 0)
                & (r == goals[env, k, 0])
                & (c == goals[env, k, 1])
            )
            e = e | (_EV_GOAL if arrived else 0)
            ev[k, i] = e
            out_pos[slot, k, 0] = r
            out_pos[slot, k, 1] = c
            out_status[slot, k] = _FALLEN if fallen else (_ON_GOAL if arrived else s)
            out_events[slot, k] = e


@njit(cache=True)
def _lane_scratch(n_agents: int) -> tuple[Int32Array, Int32Array, UInt16Array, UInt16Array, BoolArray, BoolArray,
                                          Int8Array, Int8Array, Float64Array]:
    """The ``(K, LANES)`` scratch arrays of :func:`_step_lanes`, in its argument order (new_row, new_col,
    old_cell, new_cell, live, slips, ev, taken, draws); ``slips`` starts False, draws start at 1."""
    shape = (n_agents, LANES)
    return (np.empty(shape, np.int32), np.empty(shape, np.int32), np.empty(shape, np.uint16),
            np.empty(shape, np.uint16), np.empty(shape, np.bool_), np.zeros(shape, np.bool_),
            np.empty(shape, np.int8), np.empty(shape, np.int8), np.ones(shape, np.float64))


@njit(cache=True)
def step_batch(grids: Int8Array, pos: Int32Array, goals: Int32Array, status: Int8Array, actions: Int8Array,
               slip: float, draws: Float64Array, out_pos: Int32Array, out_status: Int8Array,
               out_events: Int8Array) -> None:
    """Batched simultaneous step: B environments x K agents, one joint action each.

    Args:
        grids (B, H, W) int8, pos (B, K, 2) int32, goals (B, K, 2) int32, status (B, K) int8,
        actions (B, K) int8, slip float, draws (B, K) float64 uniform in [0, 1) (read only when slip > 0).
    Writes out_pos (B, K, 2) int32, out_status (B, K) int8, out_events (B, K) int8 (may alias pos/status).
    """
    n_envs = pos.shape[0]
    n_agents = pos.shape[1]
    new_row, new_col, old_cell, new_cell, live, slips, ev, taken, u = _lane_scratch(n_agents)
    for b0 in range(0, n_envs, LANES):
        n = min(LANES, n_envs - b0)
        if slip > 0.0:
            for k in range(n_agents):
                for i in range(n):
                    u[k, i] = draws[b0 + i, k]
            _step_lanes(grids, goals, b0, 1, b0, n, n_agents, pos, status, actions, slip, u,
                        out_pos, out_status, out_events, new_row, new_col, old_cell, new_cell, live, slips, taken, ev,
                        True)
        else:
            _step_lanes(grids, goals, b0, 1, b0, n, n_agents, pos, status, actions, slip, u,
                        out_pos, out_status, out_events, new_row, new_col, old_cell, new_cell, live, slips, taken, ev,
                        False)


@njit(cache=True, inline="always")
def _mix64(z: np.uint64) -> np.uint64:
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def slip_draw(seed: int, sample: int, step: int, agent: int) -> float:
    """Counter-based uniform in [0, 1); equal to ``simulator.rules.slip_draw`` for the same integers."""
    key = np.uint64(seed)
    key = _mix64(key ^ np.uint64(sample))
    key = _mix64(key ^ np.uint64(step))
    key = _mix64(key ^ np.uint64(agent))
    return np.float64(key >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _judge_lanes(grids: Int8Array, starts: Int32Array, goals: Int32Array, n_agents: Int32Array,
                 plans: Int8Array, horizons: Int32Array, env_base: int, env_stride: int, sample_base: int,
                 n: int, slip: float, seed: int, out_failure: Int8Array, out_step: Int32Array,
                 out_agent: Int32Array, out_makespan: Int32Array, out_sum_of_costs: Int32Array,
                 out_on_goal: Int32Array, trace_pos: Int32Array, trace_events: Int8Array) -> None:
    """Judge ``n`` lanes: lane i runs plan ``env_base + i * env_stride`` (slip draws from sample
    ``sample_base + i * (1 - env_stride)``: one plan's samples side by side, or one sample of many plans).

    Results go to ``out_*[i]`` (lane-indexed). When ``trace_pos`` is non-empty, lane i's per-step record goes to
    ``trace_pos[plan]`` / ``trace_events[plan]``.
    """
    k_max = starts.shape[1]
    record = trace_pos.shape[0] > 0
    pos = np.empty((LANES, k_max, 2), np.int32)
    st = np.empty((LANES, k_max), np.int8)
    events = np.empty((LANES, k_max), np.int8)
    act = np.empty((LANES, k_max), np.int8)
    arrival = np.empty((k_max, LANES), np.int32)
    new_row, new_col, old_cell, new_cell, live, slips, ev, taken, u = _lane_scratch(k_max)
    done = np.zeros(LANES, np.bool_)
    last_step = 0
    for i in range(n):
        b = env_base + i * env_stride
        on_goal = 0
        for k in range(k_max):
            pos[i, k, 0] = starts[b, k, 0]
            pos[i, k, 1] = starts[b, k, 1]
            arrival[k, i] = -1
            if k >= n_agents[b]:
                st[i, k] = _ABSENT
            elif starts[b, k, 0] == goals[b, k, 0] and starts[b, k, 1] == goals[b, k, 1]:
                st[i, k] = _ON_GOAL
                arrival[k, i] = 0
                on_goal += 1
            else:
                st[i, k] = _MOVING
            if record and k < n_agents[b]:
                trace_pos[b, 0, k, 0] = starts[b, k, 0]
                trace_pos[b, 0, k, 1] = starts[b, k, 1]
        out_on_goal[i] = on_goal
        done[i] = False
        if on_goal == n_agents[b]:
            done[i] = True
            _finish_valid(arrival, i, n_agents[b], out_failure, out_step, out_agent, out_makespan, out_sum_of_costs)
        elif horizons[b] == 0:
            done[i] = True
            _finish_unreached(st, i, n_agents[b], 0, out_failure, out_step, out_agent, out_makespan, out_sum_of_costs)
        if done[i]:
            for k in range(k_max):
                st[i, k] = _ABSENT
        if horizons[b] > last_step:
            last_step = horizons[b]
    for t in range(1, last_step + 1):
        remaining = 0
        for i in range(n):
            if not done[i]:
                remaining += 1
        if remaining == 0:
            break
        for k in range(k_max):
            for i in range(n):
                act[i, k] = _WAIT if done[i] else plans[env_base + i * env_stride, k, t - 1]
                if slip > 0.0:
                    u[k, i] = slip_draw(seed + env_base + i * env_stride, sample_base + i * (1 - env_stride), t, k)
        if slip > 0.0:
            _step_lanes(grids, goals, env_base, env_stride, 0, n, k_max, pos, st, act, slip, u,
                        pos, st, events, new_row, new_col, old_cell, new_cell, live, slips, taken, ev, True)
        else:
            _step_lanes(grids, goals, env_base, env_stride, 0, n, k_max, pos, st, act, slip, u,
                        pos, st, events, new_row, new_col, old_cell, new_cell, live, slips, taken, ev, False)
        for i in range(n):
            if done[i]:
                continue
            b = env_base + i * env_stride
            agents = n_agents[b]
            flags = 0
            for k in range(agents):
                flags |= ev[k, i]
                if record:
                    trace_pos[b, t, k, 0] = pos[i, k, 0]
                    trace_pos[b, t, k, 1] = pos[i, k, 1]
                    trace_events[b, t - 1, k] = ev[k, i]
            if flags & _EV_GOAL:
                for k in range(agents):
                    if ev[k, i] & _EV_GOAL:
                        arrival[k, i] = t
                        out_on_goal[i] += 1
            if flags & _EV_FAILURE_MASK:
                done[i] = True
                p = 0
                while not flags & _PRIORITY_FLAGS[p]:  # the first step failure present (the mask says one is)
                    p += 1
                flag, category = _PRIORITY_FLAGS[p], _PRIORITY_CATEGORIES[p]
                for k in range(agents):
                    if ev[k, i] & flag:
                        out_failure[i] = category
                        out_step[i] = t
                        out_agent[i] = k
                        out_makespan[i] = -1
                        out_sum_of_costs[i] = -1
                        break
            elif out_on_goal[i] == agents:
                done[i] = True
                _finish_valid(arrival, i, agents, out_failure, out_step, out_agent, out_makespan, out_sum_of_costs)
            elif t == horizons[b]:
                done[i] = True
                _finish_unreached(st, i, agents, t, out_failure, out_step, out_agent, out_makespan, out_sum_of_costs)
            if done[i]:  # a finished lane leaves the board: no more work or conflicts in it
                for k in range(k_max):
                    st[i, k] = _ABSENT


@njit(cache=True, inline="always")
def _finish_valid(arrival: Int32Array, i: int, agents: int, out_failure: Int8Array, out_step: Int32Array,
                  out_agent: Int32Array, out_makespan: Int32Array, out_sum_of_costs: Int32Array) -> None:
    makespan = 0
    total = 0
    for k in range(agents):
        total += arrival[k, i]
        if arrival[k, i] > makespan:
            makespan = arrival[k, i]
    out_failure[i] = _NO_FAILURE
    out_step[i] = -1
    out_agent[i] = -1
    out_makespan[i] = makespan
    out_sum_of_costs[i] = total


@njit(cache=True, inline="always")
def _finish_unreached(st: Int8Array, i: int, agents: int, t: int, out_failure: Int8Array, out_step: Int32Array,
                      out_agent: Int32Array, out_makespan: Int32Array, out_sum_of_costs: Int32Array) -> None:
    out_failure[i] = _GOAL_NOT_REACHED
    out_step[i] = t
    out_makespan[i] = -1
    out_sum_of_costs[i] = -1
    out_agent[i] = 0
    for k in range(agents):
        if st[i, k] != _ON_GOAL:
            out_agent[i] = k
            break


@njit(cache=True)
def judge_batch(grids: Int8Array, starts: Int32Array, goals: Int32Array, n_agents: Int32Array, plans: Int8Array,
                horizons: Int32Array, out_failure: Int8Array, out_step: Int32Array, out_agent: Int32Array,
                out_makespan: Int32Array, out_sum_of_costs: Int32Array, out_on_goal: Int32Array,
                trace_pos: Int32Array, trace_events: Int8Array) -> None:
    """Batched plan judge (slip 0).

    Args:
        grids (B, H, W) int8, starts (B, K, 2) int32, goals (B, K, 2) int32, n_agents (B,) int32,
        plans (B, K, T) int8 padded with WAIT, horizons (B,) int32 (steps to run for each plan, <= T),
        trace_pos (B, T+1, K, 2) int32 and trace_events (B, T, K) int8, or arrays with a zero first dimension
        to skip recording.
    Writes out_failure (B,) int8, out_step, out_agent, out_makespan, out_sum_of_costs, out_on_goal (B,) int32.
    A plan is valid exactly when out_failure == NO_FAILURE.
    """
    n_envs = starts.shape[0]
    for b0 in range(0, n_envs, LANES):
        n = min(LANES, n_envs - b0)
        _judge_lanes(grids, starts, goals, n_agents, plans, horizons, b0, 1, 0, n, 0.0, 0,
                     out_failure[b0:b0 + n], out_step[b0:b0 + n], out_agent[b0:b0 + n],
                     out_makespan[b0:b0 + n], out_sum_of_costs[b0:b0 + n], out_on_goal[b0:b0 + n],
                     trace_pos, trace_events)


@njit(cache=True)
def mc_judge_batch(grids: Int8Array, starts: Int32Array, goals: Int32Array, n_agents: Int32Array,
                   plans: Int8Array, horizons: Int32Array, slip: float, n_samples: int, seed: int,
                   out_successes: Int64Array) -> None:
    """Monte Carlo judge under slippery ice: out_successes[b] = how many of n_samples runs of plan b are valid.

    Sample s of plan b uses draws ``slip_draw(seed + b, s, step, agent)``, so results do not depend on batching.
    """
    n_envs = starts.shape[0]
    k_max = starts.shape[1]
    failure = np.empty(LANES, np.int8)
    scratch = np.empty((5, LANES), np.int32)
    no_trace_pos = np.empty((0, 1, k_max, 2), np.int32)
    no_trace_events = np.empty((0, 1, k_max), np.int8)
    for b in range(n_envs):
        successes = 0
        for s0 in range(0, n_samples, LANES):
            n = min(LANES, n_samples - s0)
            _judge_lanes(grids, starts, goals, n_agents, plans, horizons, b, 0, s0, n, slip, seed,
                         failure, scratch[0], scratch[1], scratch[2], scratch[3], scratch[4],
                         no_trace_pos, no_trace_events)
            for i in range(n):
                if failure[i] == _NO_FAILURE:
                    successes += 1
        out_successes[b] = successes
