"""Generation and solver benchmarks (``mapf-lake bench gen``).

* Certified generation, one core (numba kernels are serial): instances/s for 2 agents on 3x3..10x10 (uniform
  sizes, 30% holes) and for 5 agents on 10x10 with 30% and 50% holes. Every instance is certified by the solver
  and labelled, exactly as ``mapf-lake gen`` makes them.
* The solver against a peer measured in the same run: PyPI ``pymapf``'s conflict-based search (pure Python,
  sum-of-costs optimal) on the same instances, median time per instance and their ratio.

How the peer's rules differ, and where the comparison is exact: pymapf forbids vertex and swap conflicts and
allows following, as we do, and treats holes as obstacles (our solver never plans into a hole either), but its
goals are not absorbing: an agent may pass through its goal and come back, and its cost is the time it finally
settles. Our rules are therefore stricter, so our optimal sum of costs is >= pymapf's on every instance, and
equal whenever pymapf's optimal paths never touch their own goal before the end (such paths are valid under our
rules too). The bench checks equality on exactly those instances and ">=" on the rest. Our ``solve`` also
computes the optimal makespan (a second objective pymapf does not have), so the time ratio is conservative.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from simulator.config import StageConfig
from simulator.generator import GeneratedStage, generate
from simulator.solver import solve
from simulator.types import Instance


def _uniform_stage(
    agents: int, sizes: list[int], holes: float, samples: int, wait: float = 0.3, seed: int = 0
) -> StageConfig:
    share = 1.0 / len(sizes)
    doc: dict[str, Any] = {"agents": agents, "samples": samples, "seed": seed, "sizes": {}}
    for i, size in enumerate(sizes):
        ratio = share if i < len(sizes) - 1 else 1.0 - share * (len(sizes) - 1)
        doc["sizes"][size] = {"data_ratio": ratio, "hole_ratio": holes, "wait_ratio": wait}
    return StageConfig.from_dict(doc)


def bench_generation(config: StageConfig, repeats: int = 2) -> dict[str, Any]:
    generate(_uniform_stage(2, [4], 0.2, 4))  # load the compiled kernels before timing
    best = float("inf")
    stage: GeneratedStage | None = None
    for r in range(repeats):
        start = time.perf_counter()
        stage = generate(config, seed=config.seed + r)
        best = min(best, time.perf_counter() - start)
    assert stage is not None, "repeats: at least 1"
    candidates = sum(report.candidates for report in stage.reports.values())
    return {"instances": len(stage.instances), "instances_per_s": len(stage.instances) / best,
            "candidates_per_instance": candidates / len(stage.instances)}


def _pymapf_problem(instance: Instance) -> Any:
    """The instance as pymapf's ``MAPFProblem``."""
    import pymapf

    grid = pymapf.GridMap(instance.grid.tolist())
    agents = [pymapf.Agent(f"a{k}", tuple(map(int, s)), tuple(map(int, g)))
              for k, (s, g) in enumerate(zip(instance.starts, instance.goals))]
    return pymapf.MAPFProblem(grid, agents)


def bench_solver_vs_pymapf(n: int = 200, agents: int = 4, side: int = 8, holes: float = 0.2, seed: int = 3,
                           peer_time_limit: float = 5.0) -> dict[str, Any] | None:
    """Median solve time of ours vs pymapf's CBS on the same generated instances, and sum-of-costs agreement."""
    try:
        import pymapf
    except ImportError:
        return None
    items = generate(_uniform_stage(agents, [side], holes, n, wait=0.5, seed=seed)).instances
    ours, theirs, equal_checked, greater_or_equal, disagreements, peer_gave_up = [], [], 0, 0, [], 0
    for item in items:
        start = time.perf_counter()
        solution = solve(item.instance)
        ours.append(time.perf_counter() - start)
        problem = _pymapf_problem(item.instance)
        start = time.perf_counter()
        peer = pymapf.solve(problem, "cbs", time_limit=peer_time_limit)
        theirs.append(time.perf_counter() - start)
        if peer is None:  # its time or expansion limit (every instance here is certified solvable by ours)
            peer_gave_up += 1
            continue
        goals = {f"a{k}": tuple(map(int, g)) for k, g in enumerate(item.instance.goals)}
        early_goal = any(goals[name] in [tuple(cell) for cell in path[:-1]] for name, path in peer.paths.items())
        if early_goal:
            greater_or_equal += 1
            if solution.sum_of_costs < peer.sum_of_costs:
                disagreements.append((item.index, solution.sum_of_costs, peer.sum_of_costs))
        else:
            equal_checked += 1
            if solution.sum_of_costs != peer.sum_of_costs:
                disagreements.append((item.index, solution.sum_of_costs, peer.sum_of_costs))
    ours_median, theirs_median = float(np.median(ours)), float(np.median(theirs))
    return {
        "instances": len(items), "agents": agents, "side": side, "hole_ratio": holes,
        "ours_median_ms": 1000 * ours_median, "pymapf_median_ms": 1000 * theirs_median,
        "speedup_median": theirs_median / ours_median,
        "compared_equal": equal_checked, "compared_at_least": greater_or_equal, "disagreements": disagreements,
        "pymapf_gave_up": peer_gave_up,
        "pymapf_version": getattr(pymapf, "__version__", "?"),
    }


def run_gen_bench(quick: bool = False) -> dict[str, Any]:
    scale = 0.1 if quick else 1.0
    return {
        "generation_2agents_3to10_holes30": bench_generation(
            _uniform_stage(2, list(range(3, 11)), 0.3, int(4000 * scale) or 8)),
        "generation_5agents_10x10_holes30": bench_generation(_uniform_stage(5, [10], 0.3, int(600 * scale) or 8)),
        "generation_5agents_10x10_holes50": bench_generation(_uniform_stage(5, [10], 0.5, int(300 * scale) or 8)),
        "solver_vs_pymapf_4agents_8x8": bench_solver_vs_pymapf(n=40 if quick else 200, peer_time_limit=1.0 if quick else 5.0),
    }


def format_gen_bench(results: dict[str, Any]) -> str:
    g2, g5, g5h = (results[k] for k in ("generation_2agents_3to10_holes30", "generation_5agents_10x10_holes30",
                                        "generation_5agents_10x10_holes50"))
    lines = [
        "figure                                              value        target",
        f"certified generation, 2 agents, 3x3..10x10, 30% holes {g2['instances_per_s']:8.0f}/s    >= 2,000/s",
        f"certified generation, 5 agents, 10x10, 30% holes      {g5['instances_per_s']:8.0f}/s    >= 200/s",
        f"certified generation, 5 agents, 10x10, 50% holes      {g5h['instances_per_s']:8.0f}/s",
    ]
    peer = results.get("solver_vs_pymapf_4agents_8x8")
    if peer:
        lines += [
            f"solver median, 4 agents 8x8 (ours / pymapf {peer['pymapf_version']})   "
            f"{peer['ours_median_ms']:.3f} ms / {peer['pymapf_median_ms']:.3f} ms = {peer['speedup_median']:.1f}x faster",
            f"optimal sum of costs: equal on {peer['compared_equal']} instances where the rules cannot differ, "
            f">= on {peer['compared_at_least']} where pymapf passes a goal early; disagreements: "
            f"{len(peer['disagreements'])}; pymapf gave up (its time limit) on {peer['pymapf_gave_up']}",
        ]
    return "\n".join(lines)
