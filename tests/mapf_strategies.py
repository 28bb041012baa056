"""Hypothesis strategies shared by the tests: small crowded instances, where conflicts are common."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from simulator import constants as C
from simulator.types import Instance, JointPlan


@st.composite
def instances(draw, max_side: int = 5, max_agents: int = 4, hole_ratio_max: float = 0.4) -> Instance:
    """Random instance: small maps so agents meet, holes next to goals, agents that start on their goal."""
    height = draw(st.integers(1, max_side))
    width = draw(st.integers(1 if height > 1 else 2, max_side))
    cells = height * width
    n_agents = draw(st.integers(1, min(max_agents, cells)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    hole_ratio = draw(st.floats(0.0, hole_ratio_max))
    grid = (rng.random((height, width)) < hole_ratio).astype(np.int8)
    free = np.flatnonzero(grid.ravel() == C.ICE)
    if free.size < n_agents:
        grid[:] = C.ICE
        free = np.arange(cells)
    starts = rng.choice(free, n_agents, replace=False)
    goals = rng.choice(free, n_agents, replace=False)
    if draw(st.booleans()):  # some agents start on their own goal
        same = rng.random(n_agents) < 0.3
        goals = np.where(same, starts, goals)
        if len(set(goals.tolist())) < n_agents:
            goals = rng.choice(free, n_agents, replace=False)
    to_points = lambda flat: np.stack(np.divmod(flat, width), axis=1)  # noqa: E731 - tiny local helper
    return Instance(grid=grid, starts=to_points(starts), goals=to_points(goals))


@st.composite
def plans_for(draw, instance: Instance, max_length: int = 8) -> JointPlan:
    """Random joint plan; per-agent lengths differ, moves are biased away from waits."""
    lengths = draw(st.lists(st.integers(0, max_length), min_size=instance.n_agents, max_size=instance.n_agents))
    sequences = [
        draw(st.lists(st.sampled_from([C.WAIT, C.UP, C.DOWN, C.LEFT, C.RIGHT, C.UP, C.DOWN, C.LEFT, C.RIGHT]),
                      min_size=n, max_size=n))
        for n in lengths
    ]
    return JointPlan.from_sequences(sequences)


@st.composite
def instance_and_plan(draw, max_side: int = 5, max_agents: int = 4, max_length: int = 8):
    instance = draw(instances(max_side=max_side, max_agents=max_agents))
    return instance, draw(plans_for(instance, max_length))


def make(rows: list[str]) -> Instance:
    """Instance from text rows: ``.`` ice, ``#`` hole, ``0``-``9`` starts, ``a``-``j`` goals (``A``-``J``: start
    and goal of that agent on one cell)."""
    grid, starts, goals = [], {}, {}
    for r, row in enumerate(rows):
        grid.append([C.HOLE if ch == "#" else C.ICE for ch in row])
        for c, ch in enumerate(row):
            if ch.isdigit():
                starts[int(ch)] = (r, c)
            elif ch in "abcdefghij":
                goals["abcdefghij".index(ch)] = (r, c)
            elif ch in "ABCDEFGHIJ":
                starts["ABCDEFGHIJ".index(ch)] = goals["ABCDEFGHIJ".index(ch)] = (r, c)
    n = len(starts)
    return Instance(grid=grid, starts=[starts[k] for k in range(n)], goals=[goals[k] for k in range(n)])
