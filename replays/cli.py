"""Subcommands owned by the replays package: ``summarize``."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any
from simulator.cli import add_command

if TYPE_CHECKING:
    from simulator.cli import Subcommands


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (JSON has no NaN; ``json.dumps`` would write one)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _summarize(args: argparse.Namespace) -> int:
    from replays.mining import render_summary, summarize_paths

    summary = summarize_paths(args.path, exemplars_per_category=args.exemplars)
    if args.json:
        print(json.dumps(_finite(summary.to_dict()), indent=2, allow_nan=False))
    else:
        print(render_summary(summary), end="")
    return 0



def register(commands: Subcommands) -> None:
    summarize = add_command(
        commands, "summarize", _summarize,
        help="failure summary of replay files (what the environment engineer reads)",
        description=(
            "Counts and rates per failure category, map size and agent count; when and where failures happen; "
            "instance statistics of failures vs successes; a few failed episodes as text. PATH is a replay file "
            "or a folder of them."
        ),
        examples=(
            "mapf-lake summarize runs/rollouts",
            "mapf-lake summarize runs/tiny-rule/stage-01/validation.mlr --json --exemplars 0",
        ),
    )
    summarize.add_argument("path", nargs="+", help="replay file(s) or folder(s)")
    summarize.add_argument("--json", action="store_true", help="print the summary's JSON structure")
    summarize.add_argument("--exemplars", type=int, default=2, help="failed examples per category (default 2)")
