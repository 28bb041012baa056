"""A fast valid joint plan by prioritized planning, and the upper bound on the optimal makespan it gives.

Contract:
    ``prioritized_plan(instance)`` returns a joint plan that ``simulator.rules.judge`` accepts (valid: no failure,
    every agent on its goal), or ``None`` when prioritized planning found none within its node budget. ``None``
    proves nothing: the instance may still be solvable (an agent planned later can be boxed in by the ones before
    it). A plan's makespan is therefore at least the instance's optimal makespan: ``makespan_upper_bound`` returns
    it without building the plan. The generator uses it to refuse a candidate that falls short of a size's
    ``min_makespan`` before the wait search and the optimal solver run.

Method (numba, ``simulator.prioritized_kernels``): agents one after another, farthest from its goal first, each by
its own space-time search for its earliest arrival around the cells and swaps of the agents before it (stepping
onto its goal only once no earlier agent passes there again); an agent boxed in is moved to the front and the
planning starts over, at most once per agent.
"""

from __future__ import annotations

import numpy as np

from simulator import constants as C
from simulator.astar_kernels import SOLVED
from simulator.documents import is_integer
from simulator.errors import ConfigError
from simulator.grid_kernels import deadline_of, interruptible
from simulator.prioritized_kernels import prioritized_kernel
from simulator.types import Instance, JointPlan

__all__ = ["DEFAULT_MAX_NODES", "makespan_upper_bound", "prioritized_plan"]

# Node expansions over all the agents' searches. A lone agent's A* expands about its path length (under a hundred
# on 32x32 maps); a far larger count means the agents before it box it in, and the caller falls back on the solver.
DEFAULT_MAX_NODES = 20_000


def _run(instance: Instance, max_nodes: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    if not isinstance(instance, Instance):
        raise ConfigError("instance", type(instance).__name__, "a simulator.types.Instance")
    if not is_integer(max_nodes) or not 1 <= max_nodes <= 10**9:
        raise ConfigError("max_nodes", max_nodes, "an integer with 1 <= max_nodes <= 1_000_000_000")
    status, makespan, _, actions, lengths = interruptible(
        prioritized_kernel, instance.grid, instance.starts, instance.goals, np.int64(max_nodes), deadline_of(None)
    )
    return int(status), int(makespan), actions, lengths


def makespan_upper_bound(instance: Instance, max_nodes: int = DEFAULT_MAX_NODES) -> int | None:
    """The makespan of the prioritized plan (at least the optimal makespan), or ``None`` when there is none."""
    status, makespan, _, _ = _run(instance, max_nodes)
    return makespan if status == SOLVED else None


def prioritized_plan(instance: Instance, max_nodes: int = DEFAULT_MAX_NODES) -> JointPlan | None:
    """A valid joint plan by prioritized planning (see the module docstring), or ``None`` when none was found.

    Args:
        instance: a validated :class:`Instance`.
        max_nodes: node expansions over all the agents' searches, 1..1_000_000_000.
    """
    status, makespan, actions, lengths = _run(instance, max_nodes)
    if status != SOLVED or makespan > C.MAX_PLAN_LENGTH:
        return None
    return JointPlan(actions=actions, lengths=lengths)
