"""``mapf-lake bench NAME``: the targets, registered from one table (:data:`BENCHES`), in help order.

Every target is the module ``curriculum.benches.NAME``. Registration stays cheap: a figures target imports its
module only when it runs; a target with flags of its own imports its module to call ``add_flags(parser)``, so such
a module imports nothing heavy at its top. Every target's help line and description stand in the table.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.cli import Subcommands


def add_figures_output(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], dict[str, Any]],
                       render: Callable[[dict[str, Any]], str]) -> None:
    """A target's ``--json`` and handler: ``run(args)`` measures, then the figures are printed as JSON or as
    ``render``'s table."""

    def handler(args: argparse.Namespace) -> int:
        figures = run(args)
        print(json.dumps(figures, indent=2) if args.json else render(figures))
        return 0

    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(handler=handler)


def add_cpu_threads(parser: argparse.ArgumentParser) -> None:
    """``--cpu-threads``: torch threads when the target trains on a CPU."""
    parser.add_argument("--cpu-threads", type=int, default=2, help="torch threads on a CPU (default 2, as the tiny "
                        "preset)")


@dataclass(frozen=True)
class FiguresTarget:
    """A target whose module gives the figures, ``run(quick=...) -> dict``, and their table, ``render(figures) ->
    str``; its flags are ``--json`` (print the figures instead) and ``--quick``."""

    help: str  # one line in ``mapf-lake bench --help``
    description: str  # the target's own --help
    run: str  # the module's function names
    render: str
    quick_help: str = "small sizes, for smoke tests"

    def add_parser(self, bench: Subcommands, name: str) -> None:
        def module() -> Any:
            return importlib.import_module(f"curriculum.benches.{name}")

        parser = bench.add_parser(name, help=self.help, description=self.description)
        parser.add_argument("--quick", action="store_true", help=self.quick_help)
        add_figures_output(parser, lambda args: getattr(module(), self.run)(quick=args.quick),
                           lambda figures: getattr(module(), self.render)(figures))


@dataclass(frozen=True)
class FlagsTarget:
    """A target with flags of its own: its module's ``add_flags(parser)`` adds them and the handler."""

    help: str
    description: str

    def add_parser(self, bench: Subcommands, name: str) -> None:
        parser = bench.add_parser(name, help=self.help, description=self.description)
        importlib.import_module(f"curriculum.benches.{name}").add_flags(parser)


BENCHES: dict[str, FiguresTarget | FlagsTarget] = {
    "sim": FiguresTarget(
        "batched step, plan judge and cold-start speed of the simulator",
        "Measures, in one run: the batched step (4096 envs x 4 agents on 8x8, and x 16 agents on 32x32, one "
        "thread), the plan judge (2-agent length-20 plans on 8x8), import + first call in a new process, and "
        "Gymnasium's FrozenLake-v1 as a peer (when installed).",
        "run_sim_bench", "format_sim_bench", quick_help="small sizes, for smoke tests (figures not comparable)",
    ),
    "gen": FiguresTarget(
        "certified generation speed, and the solver against the pymapf peer",
        "Measures certified generation (2 agents on 3x3..10x10 with 30% holes; 5 agents on 10x10 with 30% and "
        "50% holes) and the solver's median time against pymapf's CBS on the same instances.",
        "run_gen_bench", "format_gen_bench",
    ),
    "solver": FlagsTarget(
        "solve and needs_wait times on random instances (median, mean, p99), one core",
        "Time solve and needs_wait on random instances of one agent count and hole ratio, on map sides drawn from "
        "--sides, one core; prints the median, mean and tail per call and the solver's statuses.",
    ),
    "replay": FiguresTarget(
        "replay write/read throughput and bytes per episode, against JSON lines",
        "Writes and reads 2-agent 8x8 episodes with plans of length 20 and compares with JSON lines; times the "
        "failure summary of 100,000 episodes.",
        "run_replay_bench", "format_replay_bench",
    ),
    "generation": FlagsTarget(
        "tokens/s of hf generation (the tiny model by default)",
        "Time one batched hf generate call of fixed length, after a warm-up.",
    ),
    "tokens": FiguresTarget(
        "Qwen3 token counts of the qwen3-4b preset's policy and engineer prompts vs its limits",
        "Counts, with the real Qwen3 tokenizer built offline and its chat template, the natural-style policy prompt "
        "per agents x side (3x3..10x10, 2..5 agents) and the llm:self engineer's prompt after three stages, and "
        "checks each plus its answer budget against the model's 40,960-token window.",
        "run_token_bench", "format_token_bench",
    ),
    "export": FiguresTarget(
        "export speed per format for the paper suite, and the standalone scorer vs the reward",
        "Generates the paper suite (--quick: paper-quick) once and times building and writing it in the verl layout "
        "as JSON lines, Parquet and a datasets folder (instances/s, MB); then times policy.score.score_batch against "
        "the GRPO reward on the same 512 completions.",
        "run_export_bench", "format_export_bench",
    ),
    "reward": FiguresTarget(
        "the default GRPO reward on 512 completions (parsing + batched judge)",
        "Times the default reward on a GRPO batch of 512 completions (64 instances x 8, 2 agents, 8x8).",
        "run_reward_bench", "format_reward_bench",
    ),
    "grpo": FlagsTarget(
        "seconds per GRPO step and peak memory (the tiny preset's batch on CPU by default)",
        "A few real GRPO steps (TRL GRPOTrainer, reward = the plan judge) on certified 2-agent instances; prints "
        "seconds per step after the first and the peak memory (GPU: allocated; CPU: process peak RSS). For the "
        "paper's model size on a GPU see the recipe in curriculum.benches.grpo.",
    ),
    "gpu": FlagsTarget(
        "the paper's setting on one GPU: GRPO (full, LoRA) with vLLM, generation, engineer (JSON)",
        "One JSON report of what a Qwen3-4B-sized model (its architecture with random weights and the real Qwen3 "
        "tokenizer, built locally on the GPU) costs on this GPU. Its parts (--parts) are each timed and guarded on "
        "their own: a failed part records its error and the next runs. The report names the GPU and the versions "
        "of torch, transformers, trl, vllm and peft. Expected to take about 10 minutes on one H200 with the "
        "defaults; the stage part needs ~7x the model's size free disk under TMPDIR. Needs a CUDA GPU and vLLM "
        "(without them: one line on stderr, exit status 2); exit status 1 when a part failed. Example: mapf-lake "
        "bench gpu --out gpu.json; mapf-lake bench gpu --parts generation,engineer",
    ),
    "lift": FlagsTarget(
        "valid-rate lift of RL over a checkpoint, against more supervised steps (held-out, greedy)",
        "Train two copies of a checkpoint on the same instances of the preset's training distribution: the "
        "preset's stage trainer (GRPO or rejection-sampling fine-tuning) with its knobs, and supervised fine-tuning "
        "on the instances' optimal plans for the same number of steps. Validate all three greedily on the same "
        "held-out instances and print the valid rate per map side, the lift over the checkpoint and the training "
        "seconds. Without --model the preset's warm start is trained first. Example: mapf-lake bench lift --preset "
        "small",
    ),
    "render": FiguresTarget(
        "viewer drawing speed and time to the first frame of a 10,000-episode replay",
        "Measures pygame frame drawing (10x10 with 5 agents, target 120 frames/s; 32x32 with 32 agents, target "
        "60 frames/s; 10x10 with 5 agents and path trails on, target 120 frames/s, with its ratio to the figure "
        "without trails; drawing time only, dummy video driver) and the time from opening a replay of 10,000 "
        "episodes to its first frame (target under 1 s).",
        "run_render_bench", "format_render_bench", quick_help="fewer frames and 1,000 episodes, for smoke tests",
    ),
}


def register(bench: Subcommands) -> None:
    """Add every target of :data:`BENCHES` to ``bench`` (the subcommands of ``mapf-lake bench``)."""
    for name, target in BENCHES.items():
        target.add_parser(bench, name)
