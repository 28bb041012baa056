"""Export and scorer benchmark (``mapf-lake bench export``).

* **export**: the ``paper`` suite (``--quick``: ``paper-quick``) generated once, then for each format (JSON lines,
  Parquet, a ``datasets`` folder) the records built in the ``natural`` style and written in the ``verl`` layout:
  instances per second of building + writing, and the size on disk. Generation is timed apart (it is the same
  for every format).
* **scorer**: ``policy.score.score_batch`` on 512 completions (64 instances x 8 answers, half optimal, half the
  greedy policy's) against the GRPO reward path (``policy.rewards.REWARDS["default"]``) on the same batch, as a
  ratio measured in one run.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def run_export_bench(quick: bool = False) -> dict:
    from policy.export import export_items, layout_row, size_on_disk, write_rows
    from simulator.suites import generate_suite

    suite = "paper-quick" if quick else "paper"
    started = time.perf_counter()
    items = [item for _, stage in generate_suite(suite) for item in stage.instances]
    generation = time.perf_counter() - started
    formats = {}
    with tempfile.TemporaryDirectory(prefix="mapf-bench-export-") as tmp:
        for fmt, name in (("jsonl", "x.jsonl"), ("parquet", "x.parquet"), ("hf", "x")):
            out = Path(tmp) / name
            started = time.perf_counter()
            rows = (layout_row(record, "verl", i, "test") for i, record in enumerate(export_items(f"suite:{suite}",
                                                                                                 items, "natural")))
            count = write_rows(rows, out, fmt)
            seconds = time.perf_counter() - started
            formats[fmt] = {"rows": count, "seconds": seconds, "instances_per_s": count / seconds,
                            "megabytes": size_on_disk(out) / 1e6}
    return {"suite": suite, "instances": len(items), "generation_seconds": generation, "formats": formats,
            "scorer": run_scorer_bench(quick)}


def run_scorer_bench(quick: bool = False) -> dict:
    from policy.prompts import get_style
    from policy.rewards import REWARDS, reward_columns
    from policy.score import make_record, score_batch
    from policy.scripted import make_scripted
    from simulator.config import StageConfig
    from simulator.env import default_horizon
    from simulator.generator import generate

    style = get_style("natural")
    items = generate(StageConfig.from_dict({"agents": 2, "samples": 64, "seed": 1, "sizes": {
        8: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.5}}})).instances
    greedy = make_scripted("greedy").plans(items)
    records, completions, rows = [], [], []
    for i in range(512):
        item = items[i // 8]
        records.append(make_record(item, style, "bench"))
        completions.append(style.write_answer(item.instance, item.plan if i % 2 else greedy[i // 8]))
        rows.append(reward_columns(item.instance, item.optimal_makespan, default_horizon(item.instance)))
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    reward = REWARDS["default"]
    reward(completions=completions, **columns)  # compile and fill caches
    score_batch(records, completions)
    repeats = 3 if quick else 15
    times: dict[str, list[float]] = {"scorer": [], "reward": []}
    for _ in range(repeats):  # interleaved, so both see the same machine
        started = time.perf_counter()
        verdicts = score_batch(records, completions)
        times["scorer"].append(time.perf_counter() - started)
        started = time.perf_counter()
        rewards = reward(completions=completions, **columns)
        times["reward"].append(time.perf_counter() - started)
    same = [v["reward"] for v in verdicts] == rewards
    best = {name: min(values) for name, values in times.items()}
    return {"completions": 512, "scorer_completions_per_s": 512 / best["scorer"],
            "reward_completions_per_s": 512 / best["reward"], "scorer_over_reward_time": best["scorer"] / best["reward"],
            "median_ms": {name: 1000 * float(np.median(values)) for name, values in times.items()},
            "same_rewards": same}


def format_export_bench(figures: dict) -> str:
    lines = [f"export of the {figures['suite']} suite ({figures['instances']} instances, generated in "
             f"{figures['generation_seconds']:.1f} s), verl layout, natural prompts:"]
    for fmt, row in figures["formats"].items():
        lines.append(f"  {fmt:8} {row['instances_per_s']:8.0f} instances/s  {row['megabytes']:7.2f} MB")
    s = figures["scorer"]
    lines.append(f"scorer on {s['completions']} completions: {s['scorer_completions_per_s']:.0f}/s; the GRPO reward path "
                 f"{s['reward_completions_per_s']:.0f}/s (time ratio {s['scorer_over_reward_time']:.2f}; same rewards: "
                 f"{'yes' if s['same_rewards'] else 'NO'})")
    return "\n".join(lines)
