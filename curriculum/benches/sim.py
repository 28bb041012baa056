"""Simulator benchmarks (``mapf-lake bench sim``): batched step, plan judge, cold start, and a peer.

Every figure is measured in the same process run, so ratios between them are meaningful on a noisy machine.
Throughput is the best of several repeats (the least disturbed run); the median is reported beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

from simulator import constants as C
from simulator.judge import PackedInstances, PackedPlans, judge_packed, judge_plans, pack_instances
from simulator.step import BatchState, step_batch
from simulator.types import Instance, JointPlan


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(best, median) wall seconds of ``fn`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), float(np.median(times))


def random_packed(n_envs: int, side: int, n_agents: int, hole_ratio: float, seed: int) -> PackedInstances:
    """B random maps (holes at ``hole_ratio``) with distinct random starts and goals on ice; no solvability check."""
    rng = np.random.default_rng(seed)
    grids = (rng.random((n_envs, side, side)) < hole_ratio).astype(np.int8)
    starts = np.zeros((n_envs, n_agents, 2), np.int32)
    goals = np.zeros((n_envs, n_agents, 2), np.int32)
    for b in range(n_envs):
        free = np.flatnonzero(grids[b].ravel() == C.ICE)
        if free.size < n_agents:
            grids[b] = C.ICE
            free = np.arange(side * side)
        cells = rng.choice(free, size=2 * n_agents, replace=free.size < 2 * n_agents)
        starts[b] = np.stack(np.divmod(rng.permutation(free)[:n_agents], side), axis=1)
        goals[b] = np.stack(np.divmod(cells[n_agents:], side), axis=1)
    return PackedInstances(grids, starts, goals, np.full(n_envs, n_agents, np.int32))


def bench_step(
    n_envs: int, side: int, n_agents: int, steps: int = 50, repeats: int = 5, seed: int = 0
) -> dict[str, Any]:
    """Agent-steps per second of the batched step with every agent moving on every step (the worst case)."""
    packed = random_packed(n_envs, side, n_agents, 0.2, seed)
    actions = np.random.default_rng(seed).integers(0, C.N_ACTIONS, size=(steps, n_envs, n_agents)).astype(np.int8)
    state = BatchState.initial(packed)
    step_batch(packed, state, actions[0])  # compile / load from cache

    def run() -> None:
        for t in range(steps):
            state.status[:] = C.MOVING  # keep every agent active so each call does the full B x K work
            step_batch(packed, state, actions[t])

    best, median = _timed(run, repeats)
    agent_steps = steps * n_envs * n_agents
    return {
        "envs": n_envs,
        "side": side,
        "agents": n_agents,
        "agent_steps_per_s": agent_steps / best,
        "agent_steps_per_s_median": agent_steps / median,
    }


def corner_tour_batch(
    n_plans: int, side: int = 8, seed: int = 0
) -> tuple[PackedInstances, PackedPlans, list[Instance], list[JointPlan]]:
    """2-agent instances with valid plans of length ``3 * side - 4`` (20 on 8x8) that run to their last step.

    Agent 0 tours top row -> right column -> bottom row; agent 1 does the point mirror of that tour, so they never
    meet. Holes (30%) are scattered off both tours, and each board is randomly rotated or flipped.
    """
    rng = np.random.default_rng(seed)
    n = side - 1
    path = [(0, c) for c in range(side)] + [(r, n) for r in range(1, side)] + [(n, c) for c in range(n - 1, 0, -1)]
    moves = []
    for (r0, c0), (r1, c1) in zip(path, path[1:]):
        moves.append({(0, 1): C.RIGHT, (0, -1): C.LEFT, (1, 0): C.DOWN, (-1, 0): C.UP}[(r1 - r0, c1 - c0)])
    mirror = {C.RIGHT: C.LEFT, C.LEFT: C.RIGHT, C.UP: C.DOWN, C.DOWN: C.UP}
    base_plan = np.array([moves, [mirror[m] for m in moves]], dtype=np.int8)
    on_path = np.zeros((side, side), bool)
    for r, c in path:
        on_path[r, c] = on_path[n - r, n - c] = True
    base_starts = np.array([path[0], (n - path[0][0], n - path[0][1])])
    base_goals = np.array([path[-1], (n - path[-1][0], n - path[-1][1])])
    instances, plans = [], []
    rotate = {C.UP: C.LEFT, C.LEFT: C.DOWN, C.DOWN: C.RIGHT, C.RIGHT: C.UP, C.WAIT: C.WAIT}  # np.rot90 (anticlockwise)
    for _ in range(n_plans):
        grid = ((rng.random((side, side)) < 0.3) & ~on_path).astype(np.int8)
        starts, goals, plan = base_starts.copy(), base_goals.copy(), base_plan.copy()
        for _ in range(int(rng.integers(4))):
            grid = np.rot90(grid)
            starts = np.stack([n - starts[:, 1], starts[:, 0]], axis=1)
            goals = np.stack([n - goals[:, 1], goals[:, 0]], axis=1)
            plan = np.vectorize(rotate.get)(plan).astype(np.int8)
        instances.append(Instance(grid=grid, starts=starts, goals=goals))
        plans.append(JointPlan(actions=plan, lengths=np.full(2, plan.shape[1])))
    packed = pack_instances(instances)
    actions = np.stack([p.actions for p in plans])
    return packed, PackedPlans(actions, np.full(n_plans, actions.shape[2], np.int32)), instances, plans


def bench_judge(n_plans: int = 65536, repeats: int = 5, seed: int = 0) -> dict[str, Any]:
    """Plans/s of the batched judge on valid 2-agent, length-20 plans on 8x8 (validation included)."""
    packed, plans, instances, plan_objects = corner_tour_batch(n_plans, 8, seed)
    result = judge_packed(packed, plans)
    if not result.valid.all() or not (result.makespan == 20).all():
        raise RuntimeError("benchmark plans are meant to be valid with makespan 20")
    best, median = _timed(lambda: judge_packed(packed, plans), repeats)
    random_actions = PackedPlans(
        np.random.default_rng(seed).integers(0, C.N_ACTIONS, size=plans.actions.shape).astype(np.int8), plans.horizons
    )
    random_best, _ = _timed(lambda: judge_packed(packed, random_actions), repeats)
    batch = 512
    objects_best, _ = _timed(lambda: judge_plans(instances[:batch], plan_objects[:batch]), repeats)
    return {
        "plans": n_plans,
        "plan_length": int(plans.actions.shape[2]),
        "plans_per_s": n_plans / best,
        "plans_per_s_median": n_plans / median,
        "random_plans_per_s": n_plans / random_best,
        "objects_512_ms": objects_best * 1000,
    }


def bench_cold_start() -> dict[str, float]:
    """Seconds for a new process to import ``simulator`` and judge one plan (numba cache warm: run twice)."""
    code = (
        "import time; t=time.perf_counter();"
        "from simulator.types import Instance, JointPlan; from simulator.judge import judge_plan;"
        "judge_plan(Instance(grid=[[0,0],[0,0]], starts=[[0,0]], goals=[[0,1]]), JointPlan.from_sequences([[4]]));"
        "print(time.perf_counter()-t)"
    )
    seconds = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        seconds.append(float(out.stdout.strip().splitlines()[-1]))
    return {"first_process_s": seconds[0], "import_and_first_call_s": seconds[1]}


def bench_gymnasium(seconds: float = 1.0) -> dict[str, Any] | None:
    """Steps/s of Gymnasium's FrozenLake-v1 (8x8, not slippery) under random actions, or None if not installed."""
    try:
        import gymnasium as gym
    except ImportError:
        return None
    env = gym.make("FrozenLake-v1", map_name="8x8", is_slippery=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 4, size=200_000)
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for a in actions[steps % 100_000 : steps % 100_000 + 1000]:
            _, _, terminated, truncated, _ = env.step(int(a))
            if terminated or truncated:
                env.reset()
        steps += 1000
    elapsed = time.perf_counter() - start
    return {"steps_per_s": steps / elapsed, "version": gym.__version__}


def run_sim_bench(quick: bool = False) -> dict[str, Any]:
    """All simulator figures, measured in one run."""
    envs = 512 if quick else 4096
    repeats = 2 if quick else 5
    results: dict[str, Any] = {
        "step_4x8x8": bench_step(envs, 8, 4, steps=10 if quick else 50, repeats=repeats),
        "step_16x32x32": bench_step(envs, 32, 16, steps=10 if quick else 50, repeats=repeats),
        "judge_2x8x8_len20": bench_judge(4096 if quick else 65536, repeats=repeats),
        "cold_start": bench_cold_start(),
        "gymnasium_frozenlake": bench_gymnasium(0.3 if quick else 2.0),
        "threads": 1,
        "numba_threading_layer_env": os.environ.get("NUMBA_THREADING_LAYER"),
    }
    gym = results["gymnasium_frozenlake"]
    if gym:
        results["ratio_step_4x8x8_vs_gymnasium"] = results["step_4x8x8"]["agent_steps_per_s"] / gym["steps_per_s"]
    return results


def format_sim_bench(results: dict[str, Any]) -> str:
    """Human table of ``run_sim_bench`` output."""
    s4, s16, judge, cold = (results[k] for k in ("step_4x8x8", "step_16x32x32", "judge_2x8x8_len20", "cold_start"))
    lines = [
        "figure                                       value        target",
        f"batched step, {s4['envs']} envs x 4 agents, 8x8     {s4['agent_steps_per_s'] / 1e6:8.1f} M/s   >= 100 M agent-steps/s",
        f"batched step, {s16['envs']} envs x 16 agents, 32x32 {s16['agent_steps_per_s'] / 1e6:8.1f} M/s   >= 40 M agent-steps/s",
        f"plan judge, 2 agents, 8x8, length 20         {judge['plans_per_s'] / 1e6:8.2f} M/s   >= 2 M plans/s",
        f"plan judge, random plans (fail early)        {judge['random_plans_per_s'] / 1e6:8.2f} M/s",
        f"judge 512 plan objects (packing included)    {judge['objects_512_ms']:8.2f} ms",
        f"import + first judge call, new process       {cold['import_and_first_call_s']:8.2f} s     < 1.5 s",
    ]
    gym = results.get("gymnasium_frozenlake")
    if gym:
        lines.append(f"Gymnasium FrozenLake-v1 {gym['version']} (8x8)         {gym['steps_per_s'] / 1e6:8.2f} M/s")
        lines.append(f"ratio batched step (4x8x8) / Gymnasium      {results['ratio_step_4x8x8_vs_gymnasium']:8.0f} x")
    return "\n".join(lines)
