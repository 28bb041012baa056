"""What GRPO buys over a warm-started checkpoint, against the honest peer: more supervised steps.

``mapf-lake bench lift --model RUN/warm_start/model`` trains two copies of the checkpoint on the same instances
(the ``tiny`` preset's training distribution, 2-agent boards of sides 3..6):

* ``grpo``: one GRPO stage (``curriculum.trainers.grpo_stage``) with the preset's knobs: ``--steps`` steps of
  8 prompts x 8 generations, learning rate 5e-5, reward = the plan judge;
* ``sft``: supervised fine-tuning (``curriculum.trainers.warm_start``) on the same instances' optimal plans,
  the same number of steps with batches of 64, peak learning rate ``--sft-learning-rate`` (cosine to 0);

and validates the checkpoint and both results greedily on the same held-out instances (the preset's
validation distribution, seeded apart from every run's own sets), with the valid rate per map side and the
seconds each training took. A lift is a difference of valid rates on the same instances; with 1,200 instances
the standard error of one rate near 40% is about 1.4 points.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError

VALIDATION_SEED = 20_011  # apart from the runs' own validation seed (10_007) and stage seeds (run_seed*1000+stage)


def _valid_by_side(model_dir: str, items, style, cpu_threads: int | None) -> dict[str, Any]:
    """Greedy answers of ``model_dir`` on ``items``: the valid rate overall and per map side, in percent."""
    import numpy as np

    from policy.backends import HFBackend, Sampling
    from policy.policies import ModelPolicy
    from simulator.judge import judge_plans

    policy = ModelPolicy(f"hf:{model_dir}", style, Sampling(max_new_tokens=40, temperature=0.0, seed=0, batch_size=64),
                         backend=HFBackend(model_dir, cpu_threads=cpu_threads))
    plans = policy.answer(items, seed=0).plans  # already parsed; None where the answer did not parse
    parsed = [i for i, plan in enumerate(plans) if plan is not None]
    valid = np.zeros(len(items), bool)
    if parsed:
        valid[parsed] = judge_plans([items[i].instance for i in parsed], [plans[i] for i in parsed]).valid
    sides = np.array([max(it.instance.height, it.instance.width) for it in items])
    return {"valid": 100.0 * float(valid.mean()),
            "by_side": {int(s): 100.0 * float(valid[sides == s].mean()) for s in sorted(set(sides.tolist()))}}


def bench_lift(model: str, *, style: str | None = None, steps: int = 300, validation: int = 1200,
               sft_learning_rate: float = 2e-4, cpu_threads: int | None = 2, peer: bool = True, seed: int = 1,
               log=None) -> dict[str, Any]:
    """Train ``model`` with GRPO (and, with ``peer``, with SFT) for ``steps`` steps; validate all; return figures."""
    from curriculum.config import preset
    from curriculum.trainers import grpo_stage, quiet_libraries, warm_start
    from policy.prompts import checkpoint_style, get_style
    from simulator.config import StageConfig
    from simulator.generator import generate

    if not (Path(model) / "config.json").exists():
        raise ConfigError("--model", model, "a model folder with config.json (e.g. RUN/warm_start/model)")
    if steps < 1:
        raise ConfigError("--steps", steps, "at least 1")
    if not 10 <= validation <= 100_000:
        raise ConfigError("--validation", validation, "10 <= validation <= 100000")
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    chosen = get_style(style or checkpoint_style(f"hf:{model}") or "compact-nb")
    tiny = preset("tiny")
    tr = tiny.training
    quiet_libraries()
    train_items = generate(StageConfig.from_dict({**tiny.initial_config, "samples": steps * tr.prompts_per_step,
                                                  "seed": seed})).instances
    held_out = generate(StageConfig.from_dict({**tiny.validation.config, "samples": validation,
                                               "seed": VALIDATION_SEED})).instances
    log(f"validating the checkpoint on {len(held_out)} held-out instances")
    rows = {"checkpoint": {**_valid_by_side(model, held_out, chosen, cpu_threads), "seconds": None}}
    with tempfile.TemporaryDirectory(prefix="mapf-bench-lift-") as tmp:
        start = time.perf_counter()
        grpo_stage(model, train_items, chosen, Path(tmp) / "grpo", steps=steps, prompts_per_step=tr.prompts_per_step,
                   generations=tr.generations, max_completion_length=tr.max_completion_length,
                   learning_rate=tr.learning_rate, temperature=tr.temperature, beta=tr.beta, lora=False, lora_rank=16,
                   use_vllm=False, vllm_mode="colocate", enable_thinking=False, seed=seed, rewards=dict(tr.rewards),
                   cpu_threads=cpu_threads)
        rows["grpo"] = {**_valid_by_side(str(Path(tmp) / "grpo" / "model"), held_out, chosen, cpu_threads),
                        "seconds": time.perf_counter() - start}
        if peer:
            start = time.perf_counter()
            warm_start(model, train_items, chosen, Path(tmp) / "sft", steps=steps, batch_size=64,
                       learning_rate=sft_learning_rate, max_length=160, seed=seed, cpu_threads=cpu_threads)
            rows["sft"] = {**_valid_by_side(str(Path(tmp) / "sft" / "model"), held_out, chosen, cpu_threads),
                           "seconds": time.perf_counter() - start}
    base = rows["checkpoint"]["valid"]
    for name in ("grpo", "sft"):
        if name in rows:
            rows[name]["lift"] = rows[name]["valid"] - base
    return {"model": model, "style": chosen.name, "steps": steps, "train_instances": len(train_items),
            "validation_instances": len(held_out), "grpo": {"prompts_per_step": tr.prompts_per_step,
            "generations": tr.generations, "learning_rate": tr.learning_rate},
            "sft": {"batch_size": 64, "learning_rate": sft_learning_rate} if peer else None, "rows": rows}


def render(figures: dict[str, Any]) -> str:
    sides = sorted({side for row in figures["rows"].values() for side in row["by_side"]})
    labels = {"checkpoint": "checkpoint", "grpo": f"+ GRPO {figures['steps']} steps",
              "sft": f"+ SFT {figures['steps']} steps"}
    head = f"{'':<22}{'valid %':>8}{'lift':>7}" + "".join(f"{f'{s}x{s}':>7}" for s in sides) + f"{'seconds':>9}"
    lines = [f"{figures['validation_instances']} held-out instances, greedy, style {figures['style']}", head]
    for name, row in figures["rows"].items():
        lift = f"{row['lift']:+.1f}" if "lift" in row else ""
        seconds = f"{row['seconds']:.0f}" if row["seconds"] is not None else ""
        lines.append(f"{labels[name]:<22}{row['valid']:>8.1f}{lift:>7}"
                     + "".join(f"{row['by_side'].get(s, float('nan')):>7.1f}" for s in sides) + f"{seconds:>9}")
    return "\n".join(lines)


def main_args(args) -> int:
    figures = bench_lift(args.model, style=args.style, steps=args.steps, validation=args.validation,
                         sft_learning_rate=args.sft_learning_rate, cpu_threads=args.cpu_threads, peer=not args.no_sft)
    print(json.dumps(figures, indent=2) if args.json else render(figures), file=sys.stdout)
    return 0
