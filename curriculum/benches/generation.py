"""Generation speed of the hf backend: tokens per second at a given batch and completion length.

Two entry points, both returning a dict of figures (JSON-ready):

* :func:`bench_tiny_generation`: builds the embedded tiny model in a temporary folder and times it on this
  machine's CPU (or GPU). ``mapf-lake bench generation`` prints it.
* :func:`bench_hf_generation`: times any model folder. On a GPU, a Qwen3-4B-sized model with random weights
  (the real architecture and tokenizer, no download) is made and timed like this::

      mapf-lake model init qwen3-tokenizer --out /tmp/qwen3-tok
      mapf-lake model init qwen3-4b-random --tokenizer /tmp/qwen3-tok --out /tmp/qwen3-4b-random
      python -c "from curriculum.benches.generation import bench_hf_generation as b; \\
                 print(b('/tmp/qwen3-4b-random', batch=64, max_new_tokens=256))"

Timing decodes exactly ``max_new_tokens`` per prompt (the stop token is ignored), so a random model that happens
to stop early does not flatter the figure; ``tokens_per_s`` counts completion tokens only, after one warm-up
call. Prompts are compact-style map prompts (raw text, or wrapped as a user message when the tokenizer has a
chat template), built here so the benchmark does not depend on the prompt module.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from typing import Any

from curriculum.benches.cli import add_figures_output
from policy.backend_base import Prompt, Sampling
from policy.backend_hf import HFBackend


def bench_prompts(count: int, side: int = 6, agents: int = 2, seed: int = 0) -> list[str]:
    """``count`` compact-style prompts on ``side`` x ``side`` maps (random holes; not certified solvable)."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        rows = ["".join("H" if rng.random() < 0.2 else "." for _ in range(side)) for _ in range(side)]
        cells = rng.sample([(r, c) for r in range(side) for c in range(side)], 2 * agents)
        lines = [f"A{k} {s[0]},{s[1]}>{g[0]},{g[1]}" for k, (s, g) in enumerate(zip(cells[::2], cells[1::2]))]
        prompts.append(f"n={side}\n" + "\n".join(rows) + "\n" + "\n".join(lines) + "\n?\n")
    return prompts


def _time_backend(backend: HFBackend, batch: int, max_new_tokens: int) -> dict[str, Any]:
    import torch

    texts = bench_prompts(batch)
    has_template = bool(getattr(backend.tokenizer, "chat_template", None))
    prompts: list[Prompt] = [[{"role": "user", "content": text}] for text in texts] if has_template else list(texts)
    sampling = Sampling(max_new_tokens=max_new_tokens, temperature=1.0, batch_size=batch)
    backend.generate_fixed_length(prompts[: min(batch, 4)], Sampling(max_new_tokens=4, batch_size=batch))  # warm-up
    on_gpu = backend.model.device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    generations = backend.generate_fixed_length(prompts, sampling)
    if on_gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    completion_tokens = sum(g.completion_tokens for g in generations)
    figures: dict[str, Any] = {
        "spec": backend.spec,
        "device": torch.cuda.get_device_name(backend.model.device) if on_gpu else "cpu",
        "dtype": str(backend.model.dtype).replace("torch.", ""),
        "torch_threads": "n/a" if on_gpu else backend.cpu_threads or torch.get_num_threads(),
        "parameters": sum(p.numel() for p in backend.model.parameters()),
        "batch": batch,
        "max_new_tokens": max_new_tokens,
        "prompt_tokens_mean": sum(g.prompt_tokens for g in generations) / len(generations),
        "completion_tokens": completion_tokens,
        "seconds": round(seconds, 4),
        "tokens_per_s": round(completion_tokens / seconds, 1),
        "sequences_per_s": round(len(generations) / seconds, 2),
    }
    if on_gpu:
        figures["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return figures


def bench_hf_generation(model_dir: str, batch: int = 32, max_new_tokens: int = 256) -> dict[str, Any]:
    """Tokens/s of ``hf:model_dir`` generating ``batch`` completions of ``max_new_tokens`` tokens in one call."""
    return _time_backend(HFBackend(str(model_dir)), batch, max_new_tokens)


def bench_tiny_generation(batch: int = 32, max_new_tokens: int = 64) -> dict[str, Any]:
    """Tokens/s of the embedded tiny model (built fresh in a temporary folder) at ``batch`` x ``max_new_tokens``."""
    from policy.models import init_tiny_model

    with tempfile.TemporaryDirectory(prefix="mapf-lake-tiny-") as folder:
        init_tiny_model(folder)
        figures = _time_backend(HFBackend(folder), batch, max_new_tokens)
    figures["spec"] = "hf:<tiny>"
    return figures


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags and handler of ``mapf-lake bench generation``."""
    parser.add_argument("--model", default=None, help="a model folder (default: a fresh tiny model)")
    parser.add_argument("--batch", type=int, default=32, help="prompts per call (default 32)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per completion (default 64)")
    add_figures_output(parser, _run_args, render)


def _run_args(args: argparse.Namespace) -> dict[str, Any]:
    if args.model:
        return bench_hf_generation(args.model, batch=args.batch, max_new_tokens=args.max_new_tokens)
    return bench_tiny_generation(batch=args.batch, max_new_tokens=args.max_new_tokens)


def render(figures: dict[str, Any]) -> str:
    """The figures in one line."""
    return (f"{figures['spec']} on {figures['device']} ({figures['dtype']}, {figures['torch_threads']} threads): "
            f"batch {figures['batch']} x {figures['max_new_tokens']} new tokens in {figures['seconds']:.2f} s = "
            f"{figures['tokens_per_s']:.0f} tokens/s, {figures['sequences_per_s']:.1f} sequences/s")
