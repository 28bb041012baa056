"""How often a checkpoint's own samples solve instances that need a wait, by map side and hole ratio.

Rejection-sampling stages learn only from the valid plans the policy samples itself; an instance that needs a
wait (no plan of shortest paths is free of conflicts) teaches something only when one of its samples solves it.
This measures where that happens: for each hole ratio, 100 instances per side (3-6, 2 agents, every one needing a
wait; generator seed 777, apart from the preset's training and validation seeds), ``k`` samples each at
temperature 1, the sampled valid rate and the share of instances with at least one valid sample (pass@k, the
share a round would keep).

Usage, from the repository root: python docs/results/small-rft/wait_skill.py RUNS/rft-fixed-s5/warm_start/model
[--holes 0 0.1 0.2] [--k 8] > wait-skill.json (the table goes to stderr).
"""
import argparse
import json
import sys

import numpy as np

from policy.backends import HFBackend, Sampling
from policy.policies import ModelPolicy
from policy.prompts import checkpoint_style, get_style
from policy.rollout import judge_answers
from simulator.config import StageConfig
from simulator.generator import generate

SIDES = (3, 4, 5, 6)


def measure(model: str, holes: float, k: int, per_side: int = 100, seed: int = 777) -> dict:
    config = StageConfig.from_dict({"agents": 2, "samples": per_side * len(SIDES), "seed": seed, "sizes": {
        side: {"data_ratio": 1 / len(SIDES), "hole_ratio": holes, "wait_ratio": 1.0} for side in SIDES}})
    items = generate(config).instances
    style = get_style(checkpoint_style(f"hf:{model}") or "compact-nb")
    policy = ModelPolicy(f"hf:{model}", style, Sampling(max_new_tokens=40, temperature=1.0, seed=1, batch_size=64),
                         backend=HFBackend(model, cpu_threads=2))
    repeated = [item for item in items for _ in range(k)]
    valid = judge_answers(repeated, policy.answer(repeated, seed=1).plans).valid.reshape(len(items), k)
    sides = np.array([item.size for item in items])
    assert all(item.needs_wait for item in items)
    return {str(side): {"instances": int((sides == side).sum()),
                        "sampled_valid_rate": round(float(valid[sides == side].mean()), 4),
                        f"pass@{k}": round(float(valid[sides == side].any(axis=1).mean()), 4)} for side in SIDES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="checkpoint folder (a run's warm_start/model or stage-NN/model)")
    parser.add_argument("--holes", type=float, nargs="+", default=[0.0, 0.1, 0.2], help="hole ratios")
    parser.add_argument("--k", type=int, default=8, help="samples per instance (default 8, as the preset)")
    args = parser.parse_args()
    out = {"model": args.model, "k": args.k, "by_holes": {}}
    for holes in args.holes:
        out["by_holes"][str(holes)] = measure(args.model, holes, args.k)
        row = ", ".join(f"{side}x{side} {100 * f['sampled_valid_rate']:.1f}% / {100 * f[f'pass@{args.k}']:.0f}%"
                        for side, f in out["by_holes"][str(holes)].items())
        print(f"holes {holes:g}: sampled valid / pass@{args.k}: {row}", file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
