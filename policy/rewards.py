"""Rewards for GRPO, as pure functions with TRL's signature ``(prompts, completions, **columns) -> list[float]``.

The dataset rows carry the instance in three columns (see :func:`reward_columns`): ``instance`` (a compact JSON
string of ``{grid, starts, goals}``), ``optimal_makespan`` and ``horizon``. Every completion is parsed, then all
parsed plans of the batch are judged in one call of the batched plan judge; nothing loops over steps in Python.

Components (each a list of floats, one per completion):

==================  =======  ==================================================================================
``format``          {0, 1}   the answer parsed: every agent exactly once, only actions, within the horizon
``valid``           {0, 1}   the plan is valid: no failure and every agent ends on its goal
``optimal``         {0, 1}   valid and its makespan equals the instance's optimal makespan
``progress``        [0, 1]   share of agents on their goal when judging stopped (0 on a parse error)
``default``         [0, 1.6] ``1.0 * valid + 0.5 * optimal + 0.1 * format``: garbage earns exactly 0
==================  =======  ==================================================================================

Look them up by name in ``REWARDS``; :func:`reward_breakdown` returns every component at once (for replays).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

from policy.parsing import parse_plan
from simulator.judge import judge_plans
from simulator.types import Instance

DEFAULT_WEIGHTS = {"valid": 1.0, "optimal": 0.5, "format": 0.1}
_INSTANCE_CACHE: "OrderedDict[str, Instance]" = OrderedDict()
_CACHE_SIZE = 8192


def reward_columns(instance: Instance, optimal_makespan: int, horizon: int) -> dict:
    """The dataset columns a reward needs for one row."""
    return {
        "instance": json.dumps(instance.to_dict(), separators=(",", ":")),
        "optimal_makespan": int(optimal_makespan),
        "horizon": int(horizon),
    }


def _instance(text: str) -> Instance:
    """Instances repeat ``num_generations`` times in a GRPO batch: decode and validate each once."""
    cached = _INSTANCE_CACHE.get(text)
    if cached is None:
        cached = Instance.from_dict(json.loads(text))
        _INSTANCE_CACHE[text] = cached
        if len(_INSTANCE_CACHE) > _CACHE_SIZE:
            _INSTANCE_CACHE.popitem(last=False)
    return cached


def completion_text(completion) -> str:
    """TRL passes strings (standard datasets) or message lists (conversational ones)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return ""


def reward_breakdown(completions: Sequence, instance: Sequence[str], optimal_makespan: Sequence[int],
                     horizon: Sequence[int]) -> dict[str, np.ndarray]:
    """Every component for every completion (see the module docstring), as float arrays."""
    n = len(completions)
    instances = [_instance(text) for text in instance]
    parsed = [parse_plan(completion_text(c), inst.n_agents, int(h)) for c, inst, h in zip(completions, instances, horizon)]
    ok = np.array([p.ok for p in parsed], bool)
    out = {name: np.zeros(n, np.float64) for name in ("format", "valid", "optimal", "progress")}
    out["format"][ok] = 1.0
    where = np.flatnonzero(ok)
    if where.size:
        result = judge_plans([instances[i] for i in where], [parsed[i].plan for i in where])
        valid = result.valid
        out["valid"][where] = valid
        out["optimal"][where] = valid & (result.makespan == np.asarray(optimal_makespan)[where])
        out["progress"][where] = result.agents_on_goal / np.array([instances[i].n_agents for i in where])
    out["default"] = sum(weight * out[name] for name, weight in DEFAULT_WEIGHTS.items())
    out["parse_error"] = [p.error for p in parsed]  # type: ignore[assignment]  # reasons, for replays
    return out


def _component(name: str) -> Callable[..., list[float]]:
    def reward(prompts=None, completions=(), instance=(), optimal_makespan=(), horizon=(), **_columns) -> list[float]:
        return reward_breakdown(completions, instance, optimal_makespan, horizon)[name].tolist()

    reward.__name__ = f"mapf_{name}_reward"
    reward.__doc__ = f"The ``{name}`` component (see ``policy.rewards``), TRL reward-function signature."
    return reward


REWARDS: dict[str, Callable[..., list[float]]] = {
    name: _component(name) for name in ("default", "format", "valid", "optimal", "progress")
}
mapf_reward = REWARDS["default"]
