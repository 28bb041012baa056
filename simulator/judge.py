"""The plan judge: batched, numba-backed verdicts on joint plans, plus the Monte Carlo judge under slip.

``judge_plans(instances, plans)`` packs Python objects into padded arrays once, validates them, and runs
``kernels.judge_batch``; callers that already hold packed arrays (rewards on a GRPO batch, benchmarks) call
``judge_packed`` directly. Failure handling lives here and in the kernels, not in callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, overload

import numpy as np
import numpy.typing as npt

from simulator import constants as C
from simulator import kernels
from simulator.errors import ConfigError
from simulator.types import Instance, JointPlan, Judgement


@dataclass(frozen=True)
class PackedInstances:
    """B instances padded to one array shape (smaller maps padded with ``OFF_GRID``, missing agents zeroed).

    Fields:
        grids: ``(B, H, W) int8``
        starts: ``(B, K, 2) int32``
        goals: ``(B, K, 2) int32``
        n_agents: ``(B,) int32`` real agents of each instance (slots ``>= n_agents[b]`` are padding).
    """

    grids: npt.NDArray[np.int8]  # (B, H, W)
    starts: npt.NDArray[np.int32]  # (B, K, 2)
    goals: npt.NDArray[np.int32]  # (B, K, 2)
    n_agents: npt.NDArray[np.int32]  # (B,)

    def __len__(self) -> int:
        return int(self.starts.shape[0])


@dataclass(frozen=True)
class PackedPlans:
    """B joint plans as one array.

    Fields:
        actions: ``(B, K, T) int8`` padded with ``WAIT``.
        horizons: ``(B,) int32`` steps to judge for each plan (its longest agent sequence).
    """

    actions: npt.NDArray[np.int8]  # (B, K, T)
    horizons: npt.NDArray[np.int32]  # (B,)


@dataclass(frozen=True)
class JudgeResult:
    """Verdicts on B plans; field meanings as in :class:`simulator.types.Judgement`.

    Fields:
        failure: ``(B,) int8`` failure category codes (``NO_FAILURE`` = valid).
        fail_step, fail_agent, makespan, sum_of_costs, agents_on_goal: ``(B,) int32``.
        trace_pos: ``(B, T+1, K, 2) int32`` positions after each step (row 0 = starts) when recorded, else None.
        trace_events: ``(B, T, K) int8`` event flags of each step when recorded, else None. Steps after the
            plan ended (everyone arrived, or the first failure) are left as zeros.
    """

    failure: npt.NDArray[np.int8]  # (B,)
    fail_step: npt.NDArray[np.int32]  # (B,)
    fail_agent: npt.NDArray[np.int32]  # (B,)
    makespan: npt.NDArray[np.int32]  # (B,)
    sum_of_costs: npt.NDArray[np.int32]  # (B,)
    agents_on_goal: npt.NDArray[np.int32]  # (B,)
    trace_pos: npt.NDArray[np.int32] | None = None  # (B, T+1, K, 2)
    trace_events: npt.NDArray[np.int8] | None = None  # (B, T, K)

    @property
    def valid(self) -> npt.NDArray[np.bool_]:  # (B,)
        valid: npt.NDArray[np.bool_] = self.failure == C.NO_FAILURE
        return valid

    def __len__(self) -> int:
        return int(self.failure.shape[0])

    def judgement(self, index: int) -> Judgement:
        return Judgement(
            valid=bool(self.failure[index] == C.NO_FAILURE),
            failure=int(self.failure[index]),
            fail_step=int(self.fail_step[index]),
            fail_agent=int(self.fail_agent[index]),
            makespan=int(self.makespan[index]),
            sum_of_costs=int(self.sum_of_costs[index]),
            agents_on_goal=int(self.agents_on_goal[index]),
        )


def pack_instances(instances: Sequence[Instance]) -> PackedInstances:
    """Pad instances of any sizes and agent counts into one :class:`PackedInstances`."""
    instances = list(instances)
    for i, inst in enumerate(instances):
        if not isinstance(inst, Instance):
            raise ConfigError(f"instances[{i}]", type(inst).__name__, "a simulator.types.Instance")
    n = len(instances)
    height = max((inst.height for inst in instances), default=1)
    width = max((inst.width for inst in instances), default=1)
    k_max = max((inst.n_agents for inst in instances), default=1)
    grids = np.full((n, height, width), C.OFF_GRID, dtype=np.int8)
    starts = np.zeros((n, k_max, 2), dtype=np.int32)
    goals = np.zeros((n, k_max, 2), dtype=np.int32)
    n_agents = np.zeros(n, dtype=np.int32)
    for i, inst in enumerate(instances):
        grids[i, : inst.height, : inst.width] = inst.grid
        starts[i, : inst.n_agents] = inst.starts
        goals[i, : inst.n_agents] = inst.goals
        n_agents[i] = inst.n_agents
    return PackedInstances(grids, starts, goals, n_agents)


def pack_plans(plans: Sequence[JointPlan], n_agents: np.ndarray) -> PackedPlans:
    """Stack plans into ``(B, K, T)``; plan b must have exactly ``n_agents[b]`` agents."""
    plans = list(plans)
    for b, plan in enumerate(plans):  # before any attribute is read: a string or dict is a clear error, not a crash
        if not isinstance(plan, JointPlan):
            raise ConfigError(f"plans[{b}]", type(plan).__name__, "a simulator.types.JointPlan")
    if len(plans) != len(n_agents):
        raise ConfigError("plans", f"{len(plans)} plans", f"one plan per instance ({len(n_agents)} instances)")
    k_max = int(n_agents.max()) if len(n_agents) else 1
    horizon = max((plan.horizon for plan in plans), default=0)
    actions = np.zeros((len(plans), k_max, max(horizon, 1)), dtype=np.int8)
    horizons = np.zeros(len(plans), dtype=np.int32)
    for b, plan in enumerate(plans):
        if not isinstance(plan, JointPlan):
            raise ConfigError(f"plans[{b}]", type(plan).__name__, "a simulator.types.JointPlan")
        if plan.n_agents != n_agents[b]:
            raise ConfigError(f"plans[{b}].agents", plan.n_agents, f"exactly {int(n_agents[b])} (the instance's agents)")
        actions[b, : plan.n_agents, : plan.horizon] = plan.actions
        horizons[b] = plan.horizon
    return PackedPlans(actions, horizons)


def _check_packed(packed: PackedInstances, plans: PackedPlans) -> None:
    """Shape, dtype and range checks that keep the kernels from reading out of bounds."""
    n = len(packed)
    height, width = packed.grids.shape[1:]
    k_max = packed.starts.shape[1]
    expected: dict[str, tuple[npt.NDArray[Any], tuple[int, ...], type[np.integer[Any]]]] = {
        "grids": (packed.grids, (n, height, width), np.int8),
        "starts": (packed.starts, (n, k_max, 2), np.int32),
        "goals": (packed.goals, (n, k_max, 2), np.int32),
        "n_agents": (packed.n_agents, (n,), np.int32),
        "plans.actions": (plans.actions, (n, k_max, plans.actions.shape[2] if plans.actions.ndim == 3 else -1), np.int8),
        "plans.horizons": (plans.horizons, (n,), np.int32),
    }
    for name, (array, shape, dtype) in expected.items():
        if array.shape != shape or array.dtype != dtype:
            raise ConfigError(name, f"shape {array.shape} {array.dtype}", f"shape {shape} {np.dtype(dtype).name}")
    if n == 0:
        return
    if packed.n_agents.min() < 1 or packed.n_agents.max() > k_max:
        raise ConfigError("n_agents", packed.n_agents.tolist(), f"1..{k_max}")
    for name, points in (("starts", packed.starts), ("goals", packed.goals)):
        if points.min() < 0 or points[..., 0].max() >= height or points[..., 1].max() >= width:
            raise ConfigError(name, "a point off the padded map", f"rows 0..{height - 1}, cols 0..{width - 1}")
    if plans.actions.size and (plans.actions.min() < 0 or plans.actions.max() >= C.N_ACTIONS):
        bad = tuple(int(i) for i in np.argwhere((plans.actions < 0) | (plans.actions >= C.N_ACTIONS))[0])
        raise ConfigError(
            f"plans.actions[{bad[0]}][{bad[1]}][{bad[2]}]",
            int(plans.actions[bad]),
            f"an action code 0..{C.N_ACTIONS - 1} {C.ACTION_NAMES}",
        )
    if plans.horizons.min() < 0 or plans.horizons.max() > plans.actions.shape[2]:
        raise ConfigError("plans.horizons", plans.horizons.tolist(), f"0..{plans.actions.shape[2]}")


def judge_packed(packed: PackedInstances, plans: PackedPlans, record: bool = False, check: bool = True) -> JudgeResult:
    """Judge packed plans on packed instances in one kernel call.

    ``record=True`` also returns every step's positions and events (for replays and viewers).
    ``check=False`` skips validation for callers that built the arrays themselves (benchmarks).
    """
    if check:
        _check_packed(packed, plans)
    n = len(packed)
    k_max = packed.starts.shape[1]
    failure = np.empty(n, np.int8)
    fail_step, fail_agent, makespan, sum_of_costs, agents_on_goal = (np.empty(n, np.int32) for _ in range(5))
    if record:
        horizon = plans.actions.shape[2]
        trace_pos = np.zeros((n, horizon + 1, k_max, 2), np.int32)
        trace_events = np.zeros((n, horizon, k_max), np.int8)
    else:
        trace_pos = np.empty((0, 1, k_max, 2), np.int32)
        trace_events = np.empty((0, 1, k_max), np.int8)
    kernels.judge_batch(
        packed.grids, packed.starts, packed.goals, packed.n_agents, plans.actions, plans.horizons,
        failure, fail_step, fail_agent, makespan, sum_of_costs, agents_on_goal, trace_pos, trace_events,
    )
    return JudgeResult(
        failure, fail_step, fail_agent, makespan, sum_of_costs, agents_on_goal,
        trace_pos=trace_pos if record else None, trace_events=trace_events if record else None,
    )


@overload
def is_optimal(valid: bool, makespan: int, optimal_makespan: int | None) -> bool: ...


@overload
def is_optimal(
    valid: npt.NDArray[np.bool_], makespan: npt.ArrayLike, optimal_makespan: npt.ArrayLike | None
) -> npt.NDArray[np.bool_]: ...


def is_optimal(
    valid: bool | npt.NDArray[np.bool_], makespan: npt.ArrayLike, optimal_makespan: npt.ArrayLike | None
) -> bool | npt.NDArray[np.bool_]:
    """The one rule of "optimal": valid, in the instance's optimal makespan. Element-wise on arrays (returns a
    bool array) or on scalars (returns a bool); an unknown optimal makespan (None) is never optimal."""
    if optimal_makespan is None:
        return np.zeros(np.shape(valid), bool) if np.ndim(valid) else False
    out = np.asarray(valid, bool) & (np.asarray(makespan) == np.asarray(optimal_makespan))
    return out if out.ndim else bool(out)


def judge_plans(instances: Sequence[Instance], plans: Sequence[JointPlan], record: bool = False) -> JudgeResult:
    """Judge plan b on instance b for every b (see :class:`JudgeResult`)."""
    packed = pack_instances(instances)
    return judge_packed(packed, pack_plans(plans, packed.n_agents), record=record)


def judge_plan(instance: Instance, plan: JointPlan) -> Judgement:
    """Judge one plan (a batch of one)."""
    return judge_plans([instance], [plan]).judgement(0)


def _check_slip(slip: float, n_samples: int, seed: int) -> None:
    if not isinstance(slip, (int, float)) or isinstance(slip, bool) or not 0.0 <= float(slip) <= 1.0:
        raise ConfigError("slip", slip, "a probability in [0, 1]")
    if not isinstance(n_samples, (int, np.integer)) or not 1 <= n_samples <= 10_000_000:
        raise ConfigError("n_samples", n_samples, "an integer in 1..10_000_000")
    if not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**62:
        raise ConfigError("seed", seed, "an integer in 0..2**62-1")


def success_counts(
    instances: Sequence[Instance], plans: Sequence[JointPlan], slip: float, n_samples: int, seed: int = 0
) -> np.ndarray:
    """Monte Carlo judge: for each plan, how many of ``n_samples`` seeded runs under slip ``slip`` are valid.

    ``(B,) int64``. Run s of plan b draws from ``rules.slip_draw(seed + b, s, step, agent)``: reproducible and
    equal to the reference ``rules.judge(..., slip, seed + b, s)``.
    """
    _check_slip(slip, n_samples, seed)
    packed = pack_instances(instances)
    packed_plans = pack_plans(plans, packed.n_agents)
    _check_packed(packed, packed_plans)
    out = np.zeros(len(packed), np.int64)
    kernels.mc_judge_batch(
        packed.grids, packed.starts, packed.goals, packed.n_agents, packed_plans.actions, packed_plans.horizons,
        float(slip), int(n_samples), int(seed), out,
    )
    return out


def success_probability(instance: Instance, plan: JointPlan, slip: float, n_samples: int = 1000, seed: int = 0) -> float:
    """Estimated probability that ``plan`` succeeds on ``instance`` under slip ``slip`` (N seeded samples)."""
    return float(success_counts([instance], [plan], slip, n_samples, seed)[0]) / n_samples
