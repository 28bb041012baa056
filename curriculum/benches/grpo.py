"""Speed and memory of GRPO steps: what one optimizer step of ``curriculum.training.grpo.grpo_stage`` costs.

``mapf-lake bench grpo`` runs a few real GRPO steps (TRL ``GRPOTrainer``, reward = the plan judge) on certified
instances and prints seconds per step (the first step, which builds and warms everything, is reported apart)
and the peak memory: on a GPU ``torch.cuda.max_memory_allocated``, on a CPU the process's peak resident set.

* Default: the embedded tiny model, ``compact-nb`` prompts, the ``tiny`` preset's batch (8 prompts x 8
  generations, 40 tokens), on this machine's CPU with the preset's 2 threads.
* The paper's model size on a GPU, random weights from its architecture and the real Qwen3 tokenizer (no
  download), full fine-tuning and LoRA::

      mapf-lake model init qwen3-tokenizer --out /tmp/qwen3-tok
      mapf-lake model init qwen3-4b-random --tokenizer /tmp/qwen3-tok --out /tmp/qwen3-4b-random
      mapf-lake bench grpo --model /tmp/qwen3-4b-random --style natural --max-completion-length 256
      mapf-lake bench grpo --model /tmp/qwen3-4b-random --style natural --max-completion-length 256 --lora

  A random model rarely stops by itself, so completions run to ``--max-completion-length``: the figure is the
  cost of full-length completions.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from curriculum.benches.cli import add_cpu_threads, add_figures_output
from simulator.errors import ConfigError


def _peak_memory_gib(cuda: bool) -> float:
    if cuda:
        import torch

        return torch.cuda.max_memory_allocated() / 2**30
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kib / 2**20


def bench_grpo(model: str | None = None, *, style: str = "compact-nb", steps: int = 4, prompts_per_step: int = 8,
               generations: int = 8, max_completion_length: int = 40, lora: bool = False, lora_rank: int = 16,
               cpu_threads: int | None = 2, side: int = 5, seed: int = 0, use_vllm: bool = False,
               vllm_mode: str = "colocate") -> dict[str, Any]:
    """Run ``steps`` GRPO steps of ``model`` (a folder; None: a fresh tiny model) and return the figures.
    ``use_vllm``: completions from vLLM (``vllm_mode`` colocate: in this process, on this GPU), as a run with
    ``training.use_vllm`` generates them; otherwise transformers ``generate``."""
    import torch

    from curriculum.config import Training
    from curriculum.training.common import quiet_libraries
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style
    from simulator.config import StageConfig
    from simulator.generator import generate

    if steps < 2:
        raise ConfigError("--steps", steps, "at least 2 (the first step is timed apart)")
    cuda = torch.cuda.is_available()
    quiet_libraries()
    items = generate(StageConfig.from_dict({"agents": 2, "samples": steps * prompts_per_step, "seed": seed, "sizes": {
        side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}}})).instances
    with tempfile.TemporaryDirectory(prefix="mapf-bench-grpo-") as tmp:
        if model is None:
            from policy.models import init_tiny_model

            model = str(init_tiny_model(Path(tmp) / "tiny", seed=seed))
            name = "tiny"
        else:
            if not (Path(model) / "config.json").exists():
                raise ConfigError("--model", model, "a model folder with config.json (mapf-lake model init ...)")
            name = model
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        training = Training(steps=steps, prompts_per_step=prompts_per_step, generations=generations,
                            max_completion_length=max_completion_length, learning_rate=1e-6, temperature=1.0,
                            beta=0.0, lora=lora, lora_rank=lora_rank, use_vllm=use_vllm, vllm_mode=vllm_mode)
        info = grpo_stage(training, model, items, get_style(style), Path(tmp) / "run", seed=seed,
                          cpu_threads=None if cuda else cpu_threads, save=False).to_dict()
        total = time.perf_counter() - start
    return {
        "model": name,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch_threads": None if cuda else torch.get_num_threads(),
        "training": f"lora r={lora_rank}" if lora else "full",
        "generation": f"vllm {vllm_mode}" if use_vllm else "transformers",
        "prompts_per_step": prompts_per_step,
        "generations": generations,
        "max_completion_length": max_completion_length,
        "completion_tokens_mean": info["completion_tokens_mean"],
        "first_step_s": info["first_step_seconds"],
        "step_s": info["later_step_seconds"],
        "completions_per_s": prompts_per_step * generations / info["later_step_seconds"],
        "peak_memory_gib": _peak_memory_gib(cuda),
        "peak_memory_kind": "cuda max_memory_allocated" if cuda else "process peak RSS",
        "parameters": info["parameters"],
        "trainable_parameters": info["trainable_parameters"],
        "wall_s": total,
    }


def render(figures: dict[str, Any]) -> str:
    return (f"GRPO on {figures['device']} ({figures['training']}, {figures['model']}): "
            f"{figures['step_s']:.3f} s/step after a first step of {figures['first_step_s']:.2f} s, "
            f"{figures['prompts_per_step']} prompts x {figures['generations']} generations "
            f"({figures['completion_tokens_mean']:.1f} tokens per completion, {figures['completions_per_s']:.0f} "
            f"completions/s); peak memory {figures['peak_memory_gib']:.2f} GiB ({figures['peak_memory_kind']}); "
            f"{figures['trainable_parameters']:,} of {figures['parameters']:,} parameters trained")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags and handler of ``mapf-lake bench grpo``."""
    from policy.prompts import PROMPT_STYLES

    parser.add_argument("--model", default=None, help="a model folder (default: a fresh embedded tiny model)")
    parser.add_argument("--style", default="compact-nb", choices=sorted(PROMPT_STYLES),
                        help="prompt style (default compact-nb, the tiny preset's)")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps, >= 2 (default 4)")
    parser.add_argument("--prompts-per-step", type=int, default=8, help="GRPO groups per step (default 8)")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt (default 8)")
    parser.add_argument("--max-completion-length", type=int, default=40, help="tokens per completion (default 40)")
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters instead of all weights")
    parser.add_argument("--lora-rank", type=int, default=16, help="LoRA rank (default 16)")
    add_cpu_threads(parser)
    add_figures_output(parser, lambda args: bench_grpo(
        args.model, style=args.style, steps=args.steps, prompts_per_step=args.prompts_per_step,
        generations=args.generations, max_completion_length=args.max_completion_length, lora=args.lora,
        lora_rank=args.lora_rank, cpu_threads=args.cpu_threads), render)
