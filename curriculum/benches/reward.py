"""Reward benchmark (``mapf-lake bench reward``): the default GRPO reward on a batch of 512 completions.

The batch is what a GRPO step hands the reward: 64 instances (2 agents, 8x8) x 8 completions each, written in
the natural answer style; half are the optimal plan, half the greedy plan (which often conflicts). The time
covers parsing every completion and judging all parsed plans in one call of the batched plan judge.
"""

from __future__ import annotations

import time

import numpy as np


def run_reward_bench(quick: bool = False) -> dict:
    from policy.prompts import natural_answer
    from policy.rewards import mapf_reward, reward_columns
    from policy.scripted import make_scripted
    from simulator.config import StageConfig
    from simulator.generator import generate

    items = generate(StageConfig.from_dict({"agents": 2, "samples": 64, "seed": 1, "sizes": {
        8: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.5}}})).instances
    greedy = make_scripted("greedy").plans(items)
    completions, rows = [], []
    for i in range(512):
        item = items[i // 8]
        completions.append(natural_answer(item.plan if i % 2 else greedy[i // 8]))
        rows.append(reward_columns(item.instance, item.optimal_makespan, 64))
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    mapf_reward(prompts=None, completions=completions, **columns)  # load kernels, fill the instance cache
    times = []
    for _ in range(3 if quick else 20):
        start = time.perf_counter()
        rewards = mapf_reward(prompts=None, completions=completions, **columns)
        times.append(time.perf_counter() - start)
    return {"completions": 512, "best_ms": 1000 * min(times), "median_ms": 1000 * float(np.median(times)),
            "reward_mean": float(np.mean(rewards)), "target_ms": 20}


def format_reward_bench(figures: dict) -> str:
    return (f"default reward, 512 completions (2 agents, 8x8), parsing + batched judge: "
            f"{figures['best_ms']:.2f} ms best, {figures['median_ms']:.2f} ms median (target < {figures['target_ms']} ms)")
