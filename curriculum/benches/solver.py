"""Solver and ``needs_wait`` speed on random instances (``mapf-lake bench solver``), one core.

Instances come from ``simulator.solver.random_instance`` (holes at ``--hole-ratio``, distinct starts and goals,
each goal reachable from its start; not filtered for solvability, so ``statuses`` may count unsolvable or
over-budget ones). Both are called once outside the timing (the kernels compile or load from numba's cache), then
per instance: ``solve`` with ``--max-nodes``, then ``needs_wait`` (its own budgets), each timed apart.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from curriculum.benches.cli import add_figures_output


def run_solver_bench(agents: int = 5, hole_ratio: float = 0.3, sides: list[int] | None = None, n: int = 2000,
                     max_nodes: int = 200_000, seed: int = 0) -> dict[str, Any]:
    import numpy as np

    from simulator.needs_wait import needs_wait
    from simulator.solver import random_instance, solve

    sides = sides or [10]
    rng = np.random.default_rng(seed)
    instances = [random_instance(rng, int(rng.choice(sides)), agents, hole_ratio) for _ in range(n)]
    solve(instances[0])  # compile or load the kernels outside the timing
    needs_wait(instances[0])
    solve_ms: list[float] = []
    wait_ms: list[float] = []
    statuses: dict[str, int] = {}
    for instance in instances:
        start = time.perf_counter()
        solution = solve(instance, max_nodes=max_nodes)
        middle = time.perf_counter()
        needs_wait(instance)
        solve_ms.append((middle - start) * 1e3)
        wait_ms.append((time.perf_counter() - middle) * 1e3)
        statuses[solution.status] = statuses.get(solution.status, 0) + 1
    solve_times, wait_times = np.array(solve_ms), np.array(wait_ms)
    return {
        "agents": agents, "sides": list(sides), "hole_ratio": hole_ratio, "instances": n, "max_nodes": max_nodes,
        "seed": seed,
        "solve_ms": {"median": float(np.median(solve_times)), "mean": float(solve_times.mean()),
                     "p99": float(np.percentile(solve_times, 99)), "max": float(solve_times.max())},
        "solves_per_s": 1e3 / float(solve_times.mean()),
        "needs_wait_ms": {"median": float(np.median(wait_times)), "mean": float(wait_times.mean())},
        "statuses": statuses,
    }


def format_solver_bench(figures: dict[str, Any]) -> str:
    solve_ms, wait_ms = figures["solve_ms"], figures["needs_wait_ms"]
    return (
        f"{figures['agents']} agents, sides {figures['sides']}, hole ratio {figures['hole_ratio']}, "
        f"{figures['instances']} instances: "
        f"solve median {solve_ms['median']:.3f} ms, mean {solve_ms['mean']:.3f} ms, p99 "
        f"{solve_ms['p99']:.2f} ms, max {solve_ms['max']:.1f} ms "
        f"({figures['solves_per_s']:.0f}/s); "
        f"needs_wait median {wait_ms['median']:.3f} ms, mean {wait_ms['mean']:.3f} ms; {figures['statuses']}"
    )


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags and handler of ``mapf-lake bench solver``."""
    parser.add_argument("--agents", type=int, default=5, help="agents per instance (default 5)")
    parser.add_argument("--hole-ratio", type=float, default=0.3, help="hole probability per cell (default 0.3)")
    parser.add_argument("--sides", type=int, nargs="+", default=[10], help="map sides to draw from (default 10)")
    parser.add_argument("-n", type=int, default=2000, help="instances (default 2000)")
    parser.add_argument("--max-nodes", type=int, default=200_000, help="the solver's node budget (default 200,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the instances (default 0)")
    add_figures_output(parser, lambda args: run_solver_bench(args.agents, args.hole_ratio, args.sides, args.n,
                                                             args.max_nodes, args.seed), format_solver_bench)
