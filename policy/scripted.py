"""Scripted policies: ``random``, ``greedy`` and ``oracle``, looked up by name in ``SCRIPTED_POLICIES``.

Each maps labelled instances to joint plans, deterministically for a given seed:

* ``random``: every agent gets a uniformly random action sequence as long as the instance's default horizon
  (``4 * (H + W)``); actions after an agent arrives are ignored by the rules.
* ``greedy``: every agent walks one of its own shortest paths on the bare map, ignoring the others (ties broken
  in the order up, down, left, right). Optimal when the instance does not need a wait and no two shortest paths
  collide; it shows the conflicts a planner must resolve.
* ``oracle``: the optimal solver's makespan-optimal plan (the instance's certificate when it has one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from simulator import constants as C
from simulator.env import default_horizon
from simulator.errors import ConfigError
from simulator.generator import LabelledInstance
from simulator.grid_kernels import INF, bare_neighbor_table, distances_from
from simulator.solver import solve
from simulator.types import Instance, JointPlan


class ScriptedPolicy(Protocol):
    @property
    def name(self) -> str: ...  # read-only: the policies are frozen dataclasses

    def plans(self, items: Sequence[LabelledInstance | Instance], seed: int = 0) -> list[JointPlan]: ...


def _instance(item: LabelledInstance | Instance) -> Instance:
    return item.instance if isinstance(item, LabelledInstance) else item


@dataclass(frozen=True)
class RandomPolicy:
    name: str = "random"

    def plans(self, items: Sequence[LabelledInstance | Instance], seed: int = 0) -> list[JointPlan]:
        out = []
        for index, item in enumerate(items):
            inst = _instance(item)
            rng = np.random.default_rng([seed, index])
            horizon = default_horizon(inst)
            actions = rng.integers(0, C.N_ACTIONS, size=(inst.n_agents, horizon))
            out.append(JointPlan(actions=actions, lengths=np.full(inst.n_agents, horizon)))
        return out


def shortest_path_actions(instance: Instance, agent: int) -> list[int] | None:
    """One shortest path of ``agent`` on the bare map as action codes (ties: up, down, left, right), or None.

    Distances and moves come from the searches' movement model, ``simulator.grid_kernels.neighbor_table``."""
    width = instance.width
    nbr = bare_neighbor_table(instance.grid)
    goal_r, goal_c = (int(v) for v in instance.goals[agent])
    dist = distances_from(nbr, goal_r * width + goal_c)  # breadth-first from the goal over ice
    r, c = (int(v) for v in instance.starts[agent])
    cell = r * width + c
    if dist[cell] >= INF:
        return None
    actions = []
    while dist[cell] > 0:
        for action in (C.UP, C.DOWN, C.LEFT, C.RIGHT):
            target = nbr[cell, action]
            if target >= 0 and dist[target] == dist[cell] - 1:
                actions.append(action)
                cell = int(target)
                break
    return actions


@dataclass(frozen=True)
class GreedyPolicy:
    name: str = "greedy"

    def plans(self, items: Sequence[LabelledInstance | Instance], seed: int = 0) -> list[JointPlan]:
        out = []
        for item in items:
            inst = _instance(item)
            sequences = [shortest_path_actions(inst, k) or [] for k in range(inst.n_agents)]
            out.append(JointPlan.from_sequences(sequences))
        return out


@dataclass(frozen=True)
class OraclePolicy:
    name: str = "oracle"
    max_nodes: int = 1_000_000

    def plans(self, items: Sequence[LabelledInstance | Instance], seed: int = 0) -> list[JointPlan]:
        out = []
        for item in items:
            if isinstance(item, LabelledInstance):
                out.append(item.plan)
                continue
            solution = solve(item, max_nodes=self.max_nodes)
            if not solution.solved:
                raise ConfigError("instance", solution.status, "a solvable instance for the oracle", solution.reason)
            assert solution.plan is not None  # a solved Solution carries its plan
            out.append(solution.plan)
        return out


SCRIPTED_POLICIES: dict[str, Callable[[], ScriptedPolicy]] = {
    "random": RandomPolicy, "greedy": GreedyPolicy, "oracle": OraclePolicy,
}


def make_scripted(name: str) -> ScriptedPolicy:
    if name not in SCRIPTED_POLICIES:
        raise ConfigError("policy", name, f"one of {sorted(SCRIPTED_POLICIES)}")
    return SCRIPTED_POLICIES[name]()
