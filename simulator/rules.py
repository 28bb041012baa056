"""The rules of MAPF-FrozenLake (rules v1) as plain Python: the reference the numba kernels must equal.

One step, all agents at once:

1. An agent that is ``ON_GOAL`` stays and ignores its action; a ``FALLEN`` or ``ABSENT`` agent is off the board.
2. A ``MOVING`` agent's action gives a target cell. Under slippery ice (probability ``p``) a move (not a wait)
   slips sideways: with draw ``u < p/2`` to the first perpendicular direction, ``p/2 <= u < p`` to the second
   (``constants.SLIP_SIDEWAYS``), flagged ``EV_SLIP``.
3. A target off the grid (or on ``OFF_GRID`` padding) leaves the agent where it was: an *illegal move*
   (``EV_ILLEGAL``), except after a slip, where staying put is what FrozenLake does and is no failure.
4. A target on a hole: the agent moves there and falls (``EV_HOLE``, status ``FALLEN``).
5. *Vertex conflict* (``EV_VERTEX``): two agents on the board (including those on goals and those falling this
   step) end the step in the same cell. *Edge conflict* (``EV_EDGE``): two agents swap cells. Following (moving
   into a cell its occupant leaves) and rotations of three or more agents are allowed.
6. A moving agent that ends the step on its own goal with no failure flag arrives (``EV_GOAL``, ``ON_GOAL``).

A joint plan is judged by stepping from the starts until every agent is on its goal or the plan's horizon is
used up; the first step with a failure ends it (category by ``constants.FAILURE_PRIORITY``, lowest agent).
"""

from __future__ import annotations

import numpy as np

from simulator import constants as C
from simulator.types import Instance, JointPlan, Judgement

_MASK64 = (1 << 64) - 1


def mix64(z: int) -> int:
    """SplitMix64 finaliser on a 64-bit integer (the kernels use the same arithmetic)."""
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def slip_draw(seed: int, sample: int, step: int, agent: int) -> float:
    """Counter-based uniform draw in [0, 1) for the Monte Carlo judge: same numbers in Python and numba."""
    key = (seed & _MASK64)
    key = mix64(key ^ (sample & _MASK64))
    key = mix64(key ^ (step & _MASK64))
    key = mix64(key ^ (agent & _MASK64))
    return (key >> 11) * (1.0 / 9007199254740992.0)


def step(
    grid: np.ndarray,
    pos: np.ndarray,
    goals: np.ndarray,
    status: np.ndarray,
    actions: np.ndarray,
    slip: float = 0.0,
    draws: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One simultaneous step of one environment.

    Args:
        grid: ``(H, W)`` tile codes.
        pos: ``(K, 2)`` positions before the step.
        goals: ``(K, 2)`` goals.
        status: ``(K,)`` agent status codes before the step.
        actions: ``(K,)`` action codes.
        slip: slip probability in [0, 1].
        draws: ``(K,)`` uniform draws in [0, 1) used when ``slip > 0``.

    Returns:
        ``(new_pos (K, 2), new_status (K,), events (K,))``.
    """
    height, width = len(grid), len(grid[0])
    n_agents = len(pos)
    old = [(int(pos[k][0]), int(pos[k][1])) for k in range(n_agents)]
    new = list(old)
    events = [0] * n_agents
    on_board = [int(status[k]) in (C.MOVING, C.ON_GOAL) for k in range(n_agents)]
    for k in range(n_agents):
        if int(status[k]) != C.MOVING:
            continue
        action = int(actions[k])
        slipped = False
        if slip > 0.0 and action != C.WAIT:
            if draws is None:  # as indexing None would: a TypeError
                raise TypeError("rules.step: slip > 0 needs draws, one uniform draw in [0, 1) per agent")
            u = float(draws[k])
            if u < slip:
                action = int(C.SLIP_SIDEWAYS[action][0 if u < slip / 2.0 else 1])
                slipped = True
                events[k] |= C.EV_SLIP
        row = old[k][0] + int(C.ACTION_DELTAS[action][0])
        col = old[k][1] + int(C.ACTION_DELTAS[action][1])
        if not (0 <= row < height and 0 <= col < width) or int(grid[row][col]) == C.OFF_GRID:
            if not slipped:
                events[k] |= C.EV_ILLEGAL
            continue
        new[k] = (row, col)
        if int(grid[row][col]) == C.HOLE:
            events[k] |= C.EV_HOLE
    for i in range(n_agents):
        if not on_board[i]:
            continue
        for j in range(i + 1, n_agents):
            if not on_board[j]:
                continue
            if new[i] == new[j]:
                events[i] |= C.EV_VERTEX
                events[j] |= C.EV_VERTEX
            elif new[i] == old[j] and new[j] == old[i] and new[i] != old[i]:
                events[i] |= C.EV_EDGE
                events[j] |= C.EV_EDGE
    new_status = [int(s) for s in status]
    for k in range(n_agents):
        if new_status[k] != C.MOVING:
            continue
        if events[k] & C.EV_HOLE:
            new_status[k] = C.FALLEN
        elif not events[k] & C.EV_FAILURE_MASK and new[k] == (int(goals[k][0]), int(goals[k][1])):
            new_status[k] = C.ON_GOAL
            events[k] |= C.EV_GOAL
    return (
        np.array(new, dtype=np.int32).reshape(n_agents, 2),
        np.array(new_status, dtype=np.int8),
        np.array(events, dtype=np.int8),
    )


def initial_status(instance: Instance) -> np.ndarray:
    """``ON_GOAL`` for agents that start on their goal, else ``MOVING``."""
    on_goal = np.all(instance.starts == instance.goals, axis=1)
    return np.where(on_goal, C.ON_GOAL, C.MOVING).astype(np.int8)


def first_failure(events: np.ndarray) -> tuple[int, int]:
    """(failure category, agent) of one step's events by reporting priority; ``(NO_FAILURE, -1)`` if none."""
    for flag, category in C.FAILURE_PRIORITY:
        for k, ev in enumerate(events):
            if int(ev) & flag:
                return category, k
    return C.NO_FAILURE, -1


def judge(instance: Instance, plan: JointPlan, slip: float = 0.0, seed: int = 0, sample: int = 0) -> Judgement:
    """Judge one joint plan by the rules (see the module docstring).

    With ``slip > 0`` the run is one random outcome, drawn from ``slip_draw(seed, sample, step, agent)``.
    """
    if plan.n_agents != instance.n_agents:
        from simulator.errors import ConfigError

        raise ConfigError("plan.agents", plan.n_agents, f"exactly {instance.n_agents} (the instance's agents)")
    pos = instance.starts.copy()
    status = initial_status(instance)
    arrival = np.where(status == C.ON_GOAL, 0, -1)
    horizon = plan.horizon
    for t in range(1, horizon + 1):
        if (status == C.ON_GOAL).all():
            break
        draws = None
        if slip > 0.0:
            draws = np.array([slip_draw(seed, sample, t, k) for k in range(instance.n_agents)])
        pos, status, events = step(instance.grid, pos, instance.goals, status, plan.actions[:, t - 1], slip, draws)
        category, agent = first_failure(events)
        if category != C.NO_FAILURE:
            return Judgement(False, category, t, agent, -1, -1, int((status == C.ON_GOAL).sum()))
        arrival[(events & C.EV_GOAL) != 0] = t
    on_goal = int((status == C.ON_GOAL).sum())
    if on_goal == instance.n_agents:
        return Judgement(True, C.NO_FAILURE, -1, -1, int(arrival.max()), int(arrival.sum()), on_goal)
    agent = int(np.argmax(status != C.ON_GOAL))
    return Judgement(False, C.GOAL_NOT_REACHED, horizon, agent, -1, -1, on_goal)
