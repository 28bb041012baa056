"""Subcommands owned by the engineer package: ``engineer``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engineer.engineers import engineer_names
from simulator.cli import add_command

if TYPE_CHECKING:  # pragma: no cover - typing only
    from engineer.context import HistoryEntry


def _option_pairs(pairs: list[str]) -> dict[str, Any]:
    """``["timeout_s=30", "low=0.1"]`` -> ``{"timeout_s": 30, "low": 0.1}``; values read as YAML scalars/lists."""
    import yaml

    from simulator.config import load_yaml
    from simulator.errors import ConfigError

    options: dict[str, Any] = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key.strip():
            raise ConfigError("--option", pair, "KEY=VALUE, e.g. timeout_s=60 or low=0.1")
        try:  # the config files' YAML reading: 1e-3 is a number, aliases refused
            options[key.strip()] = load_yaml(text) if text.strip() else ""
        except (yaml.YAMLError, ValueError, RecursionError):
            options[key.strip()] = text
    return options


def load_history(path: str | Path) -> list[HistoryEntry]:
    """A history file: a JSON list of ``{"stage", "config", "valid_rate", ...}`` objects, or ``{"history": [...]}``,
    read as HistoryEntry values; a bad entry raises ConfigError naming its index and key (``history[2].stage``)."""
    from engineer.context import HistoryEntry
    from simulator.errors import ConfigError

    from simulator.files import MAX_CONFIG_BYTES, load_json, read_text_bounded

    data = load_json(read_text_bounded(path, MAX_CONFIG_BYTES, "a history file", "--history"), f"--history {path}",
                     "a history file")
    if isinstance(data, dict) and "history" in data:
        data = data["history"]
    if not isinstance(data, list):
        raise ConfigError("--history", str(path), 'a JSON list of {"stage", "config", "valid_rate", ...} objects')
    return [HistoryEntry.from_dict(entry, f"--history {path}: history[{index}]") for index, entry in enumerate(data)]


def _engineer(args: argparse.Namespace) -> int:
    from engineer.context import build_context
    from engineer.engineers import make_engineer
    from engineer.evidence import collect_evidence
    from simulator.atomic import atomic_write
    from simulator.secrets import redacted_where_held
    from simulator.config import StageConfig, load_config, save_config
    from simulator.errors import ConfigError

    if args.exemplars < 0:
        raise ConfigError("--exemplars", args.exemplars, "an integer >= 0 (failed examples per category)")
    from simulator.cli import check_new_target

    check_new_target(args.out, "--out", args.force)  # before any work: an output is never replaced without a word
    check_new_target(args.record, "--record", args.force)
    engineer = make_engineer(args.engineer, **_option_pairs(args.option))  # bad specs fail before any reading
    backend_spec = getattr(engineer, "backend_spec", None)
    if backend_spec:  # a missing API key is the user's to fix: exit 2, not a fallback
        from policy.backends import check_backend_config

        check_backend_config(backend_spec)
    evidence = collect_evidence(args.replays, split=args.split, exemplars_per_category=max(args.exemplars, 1))
    for note in evidence.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.config:
        config = load_config(args.config)
    elif evidence.trained_config is not None:  # a run's validation replays: edit what the stage trained on
        config = StageConfig.from_dict(evidence.trained_config)
        print("note: editing the config the stage trained on (the replay headers' trained_config); the "
              "instances came from the validation config", file=sys.stderr)
    elif evidence.stage_config is None:
        raise ConfigError("--config", None, "a stage config file: the replays' headers record no stage config")
    else:
        config = StageConfig.from_dict(evidence.stage_config)
        if any(Path(file).name.startswith("validation") for file in evidence.files):
            print("note: the headers record no trained config, so this edits the config that produced these "
                  "instances; pass --config STAGE/config.yaml to edit a stage's training config", file=sys.stderr)
    history = load_history(args.history) if args.history else []
    context = build_context(evidence.summary, config, history, sections=args.context, max_exemplars=args.exemplars)
    decision = engineer.propose(context, config, seed=args.seed)
    save_config(decision.config, args.out)
    if args.record:
        atomic_write(args.record, redacted_where_held(json.dumps(decision.to_dict(), indent=2)) + "\n")
    print(decision.render(show_context=args.show_context), end="")
    print(f"wrote {args.out}" + (f" and {args.record}" if args.record else ""), file=sys.stderr)
    return 0


def _engineers(args: argparse.Namespace) -> int:
    import shutil
    import textwrap

    from engineer.engineers import ENGINEERS, engineer_forms, engineer_summary
    from engineer.options import format_option_table, option_table
    from simulator.errors import ConfigError

    width = min(max(shutil.get_terminal_size((80, 24)).columns, 60), 100)
    if args.name is None:
        forms = dict(zip(ENGINEERS, engineer_forms()))
        form_width = max(len(form) for form in forms.values()) + 2
        print("Engineers (a run config's engineer.spec, or mapf-lake engineer --engineer SPEC):")
        for name, form in forms.items():
            print(textwrap.fill(engineer_summary(name), width, initial_indent=f"  {form:<{form_width}}",
                                subsequent_indent=" " * (form_width + 2)))
        print("One engineer's options: mapf-lake engineers NAME")
        return 0
    name = args.name.partition(":")[0]
    if name not in ENGINEERS:
        raise ConfigError("engineers NAME", args.name, f"one of {', '.join(ENGINEERS)}")
    kind = ENGINEERS[name]
    rows = option_table(kind.build)  # type: ignore[arg-type]  # every build is a dataclass
    print(textwrap.fill(f"{name}: {engineer_summary(name)}", width))
    if not rows:
        print("No options.")
        return 0
    print(textwrap.fill("Options: engineer.options.KEY=VALUE in a run config (or mapf-lake train --set "
                        "engineer.options.KEY=VALUE), --option KEY=VALUE for mapf-lake engineer.", width))
    print(format_option_table(rows, width))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands, "engineer", _engineer,
        help="read a stage's replays and write the next stage's config",
        description=(
            "Builds the engineer's context from the replays (behavior, failures, env_stats, history), asks the "
            "engineer for the next config, repairs or rejects its proposal, and writes the result. A rejected "
            f"proposal keeps the current config. Engineers: {engineer_names()} (e.g. llm:hf:PATH, "
            "llm:openai:MODEL); their options with --option (each engineer's: mapf-lake engineers NAME; e.g. "
            "--engineer gap --option remedy=drop --option "
            "weigh=yield). replay and failures hand the next stage instances, which only a run's stage loop "
            "gives them material for: here they propose none."
        ),
    )
    parser.add_argument("--replays", required=True, nargs="+", help="replay file(s) or folder(s) of the stage")
    parser.add_argument("--config", help="the current stage config (default: the one in the replays' headers)")
    parser.add_argument("--engineer", default="rule", help="engineer spec (default: rule)")
    parser.add_argument(
        "--context", default="all",
        help="context sections, comma-separated: behavior,failures,env_stats,history (default: all; none for none)",
    )
    parser.add_argument("--out", required=True, help="where to write the next config (.yaml, .yml or .json)")
    parser.add_argument("--history", help="JSON file with the run's previous stages (a list of objects)")
    parser.add_argument("--record", help="also write the decision's full record as JSON here")
    parser.add_argument("--force", action="store_true", help="replace an existing --out or --record file")
    parser.add_argument("--split", help="read only replay files of this split (e.g. validation)")
    parser.add_argument("--exemplars", type=int, default=3, help="failed episodes shown in the context (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the engineer's sampling (default 0)")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="an engineer option, repeatable (e.g. timeout_s=60, temperature=0, low=0.1)",
    )
    parser.add_argument("--show-context", action="store_true", help="print the context the engineer read")

    listing = add_command(
        commands, "engineers", _engineers,
        help="list the engineers, or one engineer's options with their defaults and allowed values",
        description=(
            "Without NAME: every registered engineer and what it does. With NAME: its options, each with "
            "its default, the values it takes and what it does (the same declarations that check them)."
        ),
        examples=(
            "mapf-lake engineers",
            "mapf-lake engineers window",
        ),
    )
    listing.add_argument("name", nargs="?", metavar="NAME", help="an engineer's name (e.g. rule, window, llm)")
