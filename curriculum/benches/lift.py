"""What RL buys over a warm-started checkpoint, against the honest peer: more supervised steps.

``mapf-lake bench lift --model RUN/warm_start/model [--preset P]`` trains two copies of the checkpoint on the same
instances of the preset's training distribution (``initial_config``; ``tiny``: 2-agent boards of sides 3..6):

* ``rl``: one stage of the preset's trainer (``curriculum.training.trainers.train_stage``: GRPO, or rejection-sampling
  fine-tuning) with the preset's knobs, ``--steps`` steps (default: the preset's stage length), reward = the
  plan judge; without ``--model`` the preset's own warm start is trained first and is the checkpoint;
* ``sft``: supervised fine-tuning (``curriculum.training.sft.warm_start``) on the same instances' optimal plans,
  the same number of steps with batches of 64, peak learning rate ``--sft-learning-rate`` (cosine to 0);

and validates the checkpoint and both results greedily on the same held-out instances (the preset's
validation distribution, seeded apart from every run's own sets and from the training instances), with the
valid rate per map side and the seconds each training took (the ``rl`` row also keeps its trainer's mean reward,
share of zero-variance groups and tokens per completion). A lift is a difference of valid rates on the same
instances; with 1,200 instances the standard error of one rate near 40% is about 1.4 points.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from curriculum.benches.cli import add_cpu_threads, add_figures_output
from simulator.errors import ConfigError

VALIDATION_SEED = 20_011  # apart from the runs' own validation seed (10_007) and stage seeds (run_seed*1000+stage)
# What the ``rl`` row keeps of its trainer's figures (``train_stage``'s info; GRPO's failure credit adds the last).
_TRAIN_FIGURES = ("reward_mean", "zero_variance_share", "completion_tokens_mean", "failure_credit_localized")


def _valid_by_side(model_dir: str, items, style, cpu_threads: int | None, max_new_tokens: int) -> dict[str, Any]:
    """Greedy answers of ``model_dir`` on ``items``: the valid rate overall and per map side, in percent."""
    import numpy as np

    from policy.backend_base import Sampling
    from policy.backend_hf import HFBackend
    from policy.policies import ModelPolicy
    from policy.rollout import judge_answers

    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=0.0, seed=0, batch_size=64)
    policy = ModelPolicy(f"hf:{model_dir}", style, sampling, backend=HFBackend(model_dir, cpu_threads=cpu_threads))
    valid = judge_answers(items, policy.answer(items, seed=0).plans).valid  # answers parsed once, by the policy
    sides = np.array([max(it.instance.height, it.instance.width) for it in items])
    return {"valid": 100.0 * float(valid.mean()),
            "by_side": {int(s): 100.0 * float(valid[sides == s].mean()) for s in sorted(set(sides.tolist()))}}


def bench_lift(model: str | None = None, *, preset_name: str = "tiny", style: str | None = None,
               steps: int | None = None, validation: int = 1200, sft_learning_rate: float = 2e-4,
               cpu_threads: int | None = 2, peer: bool = True, seed: int = 1, overrides: dict | None = None,
               log=None) -> dict[str, Any]:
    """Train ``model`` with the preset's stage trainer (and, with ``peer``, with SFT) for ``steps`` steps (the
    preset's stage length by default) on the preset's training distribution; validate all greedily on held-out
    instances of the preset's validation distribution; return the figures. Without ``model`` the preset's own
    warm start is trained first (seeded by ``seed``) and is the checkpoint."""
    from dataclasses import replace

    from curriculum.config import preset
    from curriculum.training.run import Run
    from curriculum.training.common import quiet_libraries
    from curriculum.training.sft import warm_start
    from curriculum.training.trainers import train_stage
    from policy.prompts import checkpoint_style, get_style
    from simulator.generator import generate

    run = preset(preset_name)
    if overrides:
        run = run.with_overrides(**overrides)
    if model is not None and not (Path(model) / "config.json").exists():
        raise ConfigError("--model", model, "a model folder with config.json (e.g. RUN/warm_start/model)")
    if steps is not None and steps < 1:
        raise ConfigError("--steps", steps, "at least 1")
    if not 10 <= validation <= 100_000:
        raise ConfigError("--validation", validation, "10 <= validation <= 100000")
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    tr = run.training if steps is None else replace(run.training, steps=steps)
    quiet_libraries()
    train_items = generate(replace(run.stage_one, samples=tr.steps * tr.prompts_per_step, seed=seed)).instances
    held_out = generate(replace(run.evidence_config, samples=validation, seed=VALIDATION_SEED)).instances
    tokens = run.validation.max_new_tokens
    with tempfile.TemporaryDirectory(prefix="mapf-bench-lift-") as tmp:
        warm_seconds = None
        if model is None:
            start = time.perf_counter()
            config = replace(run, name="warm", output_dir=tmp, seed=seed, cpu_threads=cpu_threads)
            runner = Run(config, log=log)
            ws = run.warm_start
            items = generate(replace(ws.config or run.stage_one, samples=ws.samples,
                                     seed=1000 * seed)).instances
            log(f"warm start of preset {preset_name}: {ws.steps} supervised steps on {len(items)} optimal plans")
            warm_start(runner.initial_model(), items, runner.curriculum.style, Path(tmp) / "warm", steps=ws.steps,
                       batch_size=ws.batch_size, learning_rate=ws.learning_rate, max_length=ws.max_length,
                       seed=seed, cpu_threads=cpu_threads)
            model = str(Path(tmp) / "warm" / "model")
            warm_seconds = time.perf_counter() - start
        chosen = get_style(style or checkpoint_style(f"hf:{model}") or run.prompt_style)
        log(f"validating the checkpoint on {len(held_out)} held-out instances")
        rows = {"checkpoint": {**_valid_by_side(model, held_out, chosen, cpu_threads, tokens),
                               "seconds": warm_seconds}}
        start = time.perf_counter()
        log(f"{tr.trainer}: {tr.steps} steps on {len(train_items)} instances")
        info = train_stage(tr, model, train_items, chosen, Path(tmp) / "rl", seed=seed, cpu_threads=cpu_threads)
        rows["rl"] = {**_valid_by_side(str(Path(tmp) / "rl" / "model"), held_out, chosen, cpu_threads, tokens),
                      "seconds": time.perf_counter() - start,
                      "train": {key: value for key in _TRAIN_FIGURES for value in [info.figure(key)] if value is not None}}
        if peer:
            start = time.perf_counter()
            log(f"supervised peer: {tr.steps} steps on the same instances' optimal plans")
            warm_start(model, train_items, chosen, Path(tmp) / "sft", steps=tr.steps, batch_size=64,
                       learning_rate=sft_learning_rate, max_length=run.warm_start.max_length, seed=seed,
                       cpu_threads=cpu_threads, label="supervised peer")
            rows["sft"] = {**_valid_by_side(str(Path(tmp) / "sft" / "model"), held_out, chosen, cpu_threads, tokens),
                           "seconds": time.perf_counter() - start}
    base = rows["checkpoint"]["valid"]
    for name in ("rl", "sft"):
        if name in rows:
            rows[name]["lift"] = rows[name]["valid"] - base
    return {"model": model if warm_seconds is None else f"preset {preset_name} warm start (seed {seed})",
            "preset": preset_name, "trainer": tr.trainer, "style": chosen.name, "steps": tr.steps, "seed": seed,
            "train_instances": len(train_items), "validation_instances": len(held_out),
            "rl": {"prompts_per_step": tr.prompts_per_step, "generations": tr.generations,
                   "learning_rate": tr.learning_rate},
            "sft": {"batch_size": 64, "learning_rate": sft_learning_rate} if peer else None,
            "overrides": dict(overrides or {}), "rows": rows}


def render(figures: dict[str, Any]) -> str:
    sides = sorted({side for row in figures["rows"].values() for side in row["by_side"]})
    labels = {"checkpoint": "checkpoint", "rl": f"+ {figures['trainer'].upper()} {figures['steps']} steps",
              "sft": f"+ SFT {figures['steps']} steps"}
    head = f"{'':<22}{'valid %':>8}{'lift':>7}" + "".join(f"{f'{s}x{s}':>7}" for s in sides) + f"{'seconds':>9}"
    lines = [f"{figures['validation_instances']} held-out instances, greedy, style {figures['style']}", head]
    for name, row in figures["rows"].items():
        lift = f"{row['lift']:+.1f}" if "lift" in row else ""
        seconds = f"{row['seconds']:.0f}" if row["seconds"] is not None else ""
        lines.append(f"{labels[name]:<22}{row['valid']:>8.1f}{lift:>7}"
                     + "".join(f"{row['by_side'].get(s, float('nan')):>7.1f}" for s in sides) + f"{seconds:>9}")
    return "\n".join(lines)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags and handler of ``mapf-lake bench lift``."""
    from policy.prompts import PROMPT_STYLES

    parser.add_argument("--model", help="checkpoint folder, e.g. RUN/warm_start/model (default: train the "
                        "preset's own warm start first)")
    parser.add_argument("--preset", default="tiny", help="preset whose training and validation distributions and "
                        "stage trainer are used (default tiny)")
    parser.add_argument("--set", nargs="*", action="extend", metavar="KEY=VALUE",
                        help="run-config overrides of the preset, e.g. training.trainer=rft "
                        "training.learning_rate=5e-4")
    parser.add_argument("--seed", type=int, default=1, help="seed of the training instances and trainers (default 1)")
    parser.add_argument("--style", default=None, choices=sorted(PROMPT_STYLES),
                        help="prompt style (default: the one the checkpoint was trained with)")
    parser.add_argument("--steps", type=int, default=None, help="steps of each training (default: the preset's "
                        "training.steps)")
    parser.add_argument("--validation", type=int, default=1200, help="held-out instances (default 1200)")
    parser.add_argument("--sft-learning-rate", type=float, default=2e-4, help="peak SFT learning rate (default 2e-4)")
    parser.add_argument("--no-sft", action="store_true", help="GRPO only, no supervised peer")
    add_cpu_threads(parser)
    add_figures_output(parser, _run_args, render)


def _run_args(args: argparse.Namespace) -> dict[str, Any]:
    from curriculum.config import parse_overrides

    return bench_lift(args.model, preset_name=args.preset, style=args.style, steps=args.steps,
                      validation=args.validation, sft_learning_rate=args.sft_learning_rate,
                      cpu_threads=args.cpu_threads, peer=not args.no_sft, seed=args.seed,
                      overrides=parse_overrides(args.set))
