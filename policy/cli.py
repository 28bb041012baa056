"""Subcommands owned by the policy package: ``rollout``, ``eval``, ``export`` (and the model commands)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from policy.prompts import PROMPT_STYLES
from simulator.cli import add_command

if TYPE_CHECKING:
    from policy.evaluation import EvalSet
    from simulator.cli import Subcommands
    from simulator.config import StageConfig


def rollout_file_name(policy: str, config: StageConfig) -> str:
    """``rollout-POLICY-aAGENTS-sSIZES-nSAMPLES-seedSEED-DIGEST.mlr``: the settings a reader looks for, then the
    first 8 hex digits of the SHA-256 of the whole stage config (ratios, bounds, slip), so two rollouts of other
    settings never share a name."""
    import hashlib
    import json

    document = config.to_dict()
    agents = document["agents"]
    agents_text = f"{agents[0]}-{agents[1]}" if isinstance(agents, list) else str(agents)
    sides = sorted(config.sizes)
    sizes_text = "_".join(map(str, sides)) if len(sides) <= 4 else f"{sides[0]}-{sides[-1]}"
    digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode("utf-8")).hexdigest()[:8]
    return f"rollout-{policy}-a{agents_text}-s{sizes_text}-n{config.samples}-seed{config.seed}-{digest}.mlr"


def _rollout(args: argparse.Namespace) -> int:
    import uuid

    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from simulator.text import counted
    from replays.types import ReplayHeader
    from replays.mining import render_summary, summarize
    from replays.writer import ReplayWriter
    from simulator.cli import config_from_args, showing_progress
    from simulator.errors import ConfigError, naming_file
    from simulator.generator import generate

    policy = make_scripted(args.policy)
    config = config_from_args(args)
    out_dir = Path(args.out)
    path = out_dir / rollout_file_name(policy.name, config)
    if path.exists():  # the same policy and settings: a finished rollout is never replaced
        raise ConfigError("--out", str(out_dir), "a folder without this rollout's file (pick another --out, or "
                          "delete the file to write it again)", f"{path.name} is already there")
    with naming_file(args.config), showing_progress(config.samples, "generating") as update:
        stage = generate(config, progress=update)
    items = stage.instances
    plans = policy.plans(items, seed=config.seed)
    episodes = judge_episodes(items, plans)
    header = ReplayHeader.new(
        run_id=args.run_id or uuid.uuid4().hex[:12],
        stage=0,
        split="rollout",
        policy={"name": policy.name, "spec": policy.name, "kind": "scripted"},
        stage_config=config.to_dict(),
    )
    with ReplayWriter(path, header) as writer:
        for episode in episodes:
            writer.write(episode)
    print(render_summary(summarize(episodes), exemplars=False), end="")
    print(f"wrote {counted(len(episodes), 'episode')} to {path}", file=sys.stderr)
    return 0


def _eval_set(args: argparse.Namespace) -> tuple[EvalSet, str]:
    """The set ``eval`` runs on and its short label for the default --out: a suite (``--suite``, default paper;
    ``--quick`` its quick variant), a user's instance file (``--instances``) or a stage config generated now
    (``--config``, ``--seed`` overriding its seed)."""
    from policy.evaluation import config_set, instances_set, suite_set
    from simulator.errors import ConfigError

    if args.quick and (args.instances or args.config):
        raise ConfigError("--quick", True, "a suite's quick variant: with --instances or --config, leave it out")
    if args.instances:
        chosen = instances_set(args.instances)
        digest = chosen.instances.sha256 if chosen.instances is not None else ""  # always set by instances_set
        return chosen, f"instances-{Path(args.instances).stem}-{digest[:8]}"
    if args.config:
        from simulator.cli import showing_progress
        from simulator.errors import naming_file
        from simulator.config import load_config

        config = load_config(args.config)
        with naming_file(args.config), showing_progress(config.samples, "generating") as update:
            chosen = config_set(config, args.seed, source=args.config, progress=update)
        seed = chosen.config["seed"] if chosen.config is not None else config.seed  # the document config_set made
        return chosen, f"config-{Path(args.config).stem}-seed{seed}"
    suite = args.suite or "paper"
    suite = f"{suite}-quick" if args.quick and not suite.endswith("-quick") else suite
    return suite_set(suite), suite


def _eval(args: argparse.Namespace) -> int:
    import json
    import re

    from policy.evaluation import evaluate
    from policy.policies import make_policy

    seed = 0 if args.seed is None else args.seed  # the sampling seed
    sampling = None
    if ":" in args.policy:
        from policy.backend_base import Sampling

        sampling = Sampling(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                            top_k=args.top_k, seed=seed, enable_thinking=args.thinking, batch_size=args.batch_size)
    policy = make_policy(args.policy, args.style, sampling)
    chosen, label = _eval_set(args)
    safe = re.sub(r'[^A-Za-z0-9_.-]+', '_', f"{args.policy}-{label}")
    out = Path(args.out) if args.out else Path("runs") / f"eval-{safe}"
    from simulator.cli import showing_progress

    with showing_progress(sum(cell.count for cell in chosen.cells), f"eval {args.policy}") as update:
        table = evaluate(policy, chosen, out, seed=seed, progress=lambda done, total: update(done))
    print(json.dumps(table.to_dict(), indent=2) if args.json else table.render())
    print(f"replays in {out}" + (f" ({table.reused_cells} cells reused)" if table.reused_cells else ""), file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    import time

    from policy.export import export_items, layout_row, size_on_disk, write_rows
    from simulator.cli import check_new_target, generate_suite_shown, showing_progress
    from simulator.errors import naming_file
    from simulator.config import load_config
    from simulator.generator import generate
    from simulator.errors import ConfigError

    if not (args.out or args.movingai):
        raise ConfigError("--out", None, "given: a dataset file or folder to write (or --movingai DIR, or both)")
    fmt = args.format or ("parquet" if str(args.out).endswith(".parquet") else "jsonl")
    named = {".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}.get(Path(str(args.out or "")).suffix.lower())
    if args.out and named and named != fmt:  # --format parquet --out x.jsonl wrote Parquet into x.jsonl
        raise ConfigError("--out", args.out, f"a name that fits --format {fmt}: "
                          + ("a folder name" if fmt == "hf" else f"ending in .{fmt}"))
    # refused before any work: an existing output is replaced only with --force, never mixed
    check_new_target(args.out, "--out", args.force, "file or folder")
    stem = args.suite or Path(args.config).stem
    if args.movingai:
        from simulator.movingai import check_movingai_target

        check_movingai_target(args.movingai, stem, args.force)
    started = time.perf_counter()
    if args.suite:
        items = [item for _, stage in generate_suite_shown(args.suite) for item in stage.instances]
        source = f"suite:{args.suite}"
    else:
        config = load_config(args.config)
        with naming_file(args.config), showing_progress(config.samples, "generating") as update:
            items = generate(config, progress=update).instances
        source = f"config:{Path(args.config).name}"
    if args.movingai:
        from simulator.movingai import export_movingai

        paths = export_movingai(items, args.movingai, stem=stem, force=args.force)
        maps = sum(path.suffix == ".map" for path in paths)
        print(f"wrote {maps} MovingAI maps and {len(paths) - maps} scenarios ({len(items)} instances, one scenario "
              f"line per agent) to {args.movingai}; gen --map {stem}-NNNN.map --scen {stem}-NNNN-aK.scen "
              f"--agents K reads a board's instances back")
        if not args.out:
            return 0
    rows = (layout_row(record, args.layout, index, args.split)
            for index, record in enumerate(export_items(source, items, args.style)))
    count = write_rows(rows, args.out, fmt, force=args.force)
    seconds = time.perf_counter() - started
    size = size_on_disk(args.out)
    print(f"wrote {count} rows ({args.layout}, {args.style}, {fmt}) to {args.out}: {size / 1e6:.2f} MB, "
          f"{seconds:.1f} s ({count / max(seconds, 1e-9):.0f} instances/s)")
    return 0


def register(commands: Subcommands) -> None:
    from policy.export import FORMATS, LAYOUTS
    from policy.model_cli import register_model_commands
    from simulator.suites import SUITES
    from simulator.cli import add_stage_flags
    from policy.scripted import SCRIPTED_POLICIES

    register_model_commands(commands)

    export = add_command(
        commands, "export", _export,
        help="a suite or a stage config as a dataset file for other trainers (verl, OpenRLHF, datasets)",
        description=(
            "Generate a benchmark suite (--suite) or a stage config's instances (--config) and write them as a "
            "dataset: JSON lines, Parquet or a Hugging Face datasets folder, in a prompt style and a layout "
            "(records: the scoring records themselves; verl: verl's RL rows, scored by policy/score.py "
            "compute_score; openrlhf: prompt + label rows for policy/openrlhf_reward.py). Every row carries the "
            "instance, its labels and a format version, so policy.score.score judges an answer to it anywhere. "
            "Example: mapf-lake export --suite paper --layout verl --format parquet --out paper.parquet"
        ),
    )
    source = export.add_mutually_exclusive_group(required=True)
    source.add_argument("--suite", choices=sorted(SUITES), help="a benchmark suite")
    source.add_argument("--config", help="a stage config file (.yaml, .yml or .json)")
    export.add_argument("--out", default=None, help="the file (jsonl, parquet) or new folder (hf) to write")
    export.add_argument("--force", action="store_true",
                        help="replace an existing --out, and an earlier export of the same name in --movingai DIR")
    export.add_argument("--movingai", metavar="DIR", default=None,
                        help="also (or instead of --out) write the instances as MovingAI files into DIR: a .map per "
                             "board (holes as @) and a .scen per board and agent count, one line per agent")
    export.add_argument("--format", choices=FORMATS, default=None,
                        help="jsonl, parquet or hf (default: from --out's suffix, .parquet -> parquet, else jsonl)")
    export.add_argument("--layout", choices=LAYOUTS, default="records", help="row layout (default records)")
    export.add_argument("--style", choices=sorted(PROMPT_STYLES), default="natural",
                        help="prompt style of the rows (default natural: chat messages for real models)")
    export.add_argument("--split", default="test", help="split name written into verl's extra_info (default test)")

    rollout = add_command(
        commands, "rollout", _rollout,
        help="run a scripted policy on generated instances, judge the plans, write replays",
        description=(
            "Generate a stage's instances (from --config or the gen flags), run a scripted policy "
            f"({', '.join(SCRIPTED_POLICIES)}), judge every plan in one batch and write a replay file into --out; prints the failure summary."
        ),
        examples=(
            "mapf-lake rollout --policy greedy --size 6 --agents 2 --n 200 --out runs/rollouts",
            "mapf-lake rollout --policy random --config stage.yaml --out runs/rollouts",
        ),
    )
    rollout.add_argument("--policy", required=True, choices=sorted(SCRIPTED_POLICIES), help="scripted policy")
    rollout.add_argument("--out", required=True, help="folder for the replay file (named by policy, agents, sizes, n, "
                         "seed and a digest of the config; an existing one is never replaced)")
    rollout.add_argument("--run-id", default=None, help="run id recorded in the replay header (default: random)")
    rollout.add_argument("--config", help="stage config file (.yaml, .yml or .json)")
    add_stage_flags(rollout, n_default=100)

    evaluation = add_command(
        commands, "eval", _eval,
        help="paper-style evaluation of a policy on a benchmark suite, your own instances or a stage config "
             "(resumable)",
        description=(
            "Run a policy over a benchmark suite (--suite), your own instances (--instances: JSON lines as gen --out "
            "writes them, e.g. from gen --map/--scen) or a stage config generated now (--config), write one replay "
            "file per (agents x size) cell into --out, and print the table: rows = agent counts, columns = map "
            "sizes, cells = valid% / optimal%, plus the mean and the worst 10% of cells' mean valid rate "
            "(cvar10_valid). Each replay header records the set (suite name, instance file and its sha256, or the "
            "config document). Re-running with the same --out skips finished cells. POLICY: "
            f"{', '.join(SCRIPTED_POLICIES)}, or a model backend spec hf:PATH, vllm:PATH, openai:MODEL."
        ),
        examples=(
            "mapf-lake eval --policy greedy --suite paper --quick",
            "mapf-lake eval --policy oracle --instances mine.jsonl",
            "mapf-lake eval --policy greedy --config stage.yaml --seed 7",
            "mapf-lake eval --policy hf:runs/tiny-rule/stage-03/model --suite paper --out runs/eval-tiny",
            "mapf-lake eval --policy openai:MODEL --suite paper-quick   # with MAPF_LAKE_OPENAI_BASE_URL set",
        ),
    )
    evaluation.add_argument("--policy", required=True, help="scripted name or backend spec")
    chosen_set = evaluation.add_mutually_exclusive_group()
    chosen_set.add_argument("--suite", default=None, choices=sorted(SUITES), help="suite (default paper)")
    chosen_set.add_argument("--instances", metavar="FILE.jsonl",
                            help="your own instances: JSON lines as gen --out writes them; cells by agents x size")
    chosen_set.add_argument("--config", metavar="STAGE.yaml",
                            help="a stage config (.yaml, .yml or .json) whose instances are generated now; cells "
                                 "by agents x size")
    evaluation.add_argument("--quick", action="store_true", help="the suite's quick variant (10 instances per cell)")
    evaluation.add_argument("--out", default=None, help="replay folder (default runs/eval-POLICY-SUITE, "
                            "runs/eval-POLICY-instances-STEM-SHA8 or runs/eval-POLICY-config-STEM-seedSEED)")
    evaluation.add_argument("--json", action="store_true", help="print the table as JSON")
    evaluation.add_argument("--style", default=None, choices=sorted(PROMPT_STYLES),
                            help="prompt style (default: the one a run's checkpoint was trained with, else natural)")
    evaluation.add_argument("--seed", type=int, default=None,
                            help="sampling seed (default 0); with --config also the generator's seed, overriding "
                                 "the file's as gen --seed does")
    evaluation.add_argument("--temperature", type=float, default=0.0, help="model sampling temperature (default 0: greedy)")
    evaluation.add_argument("--max-new-tokens", type=int, default=512, help="model answer length limit (default 512)")
    evaluation.add_argument("--batch-size", type=int, default=32, help="prompts per generate call (default 32)")
    evaluation.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1: off)")
    evaluation.add_argument("--top-k", type=int, default=0, help="keep the k likeliest tokens (default 0: off; the "
                            "paper's thinking decoding: --thinking --temperature 0.6 --top-p 0.95 --top-k 20)")
    evaluation.add_argument("--thinking", action="store_true", help="Qwen3 thinking mode on")
