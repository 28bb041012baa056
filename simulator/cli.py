"""Subcommands owned by the simulator: ``bench sim`` (and, later, ``gen``, ``solve``, ``bench gen``)."""

from __future__ import annotations

import argparse
import json


def _bench_sim(args: argparse.Namespace) -> int:
    from simulator.bench import format_sim_bench, run_sim_bench

    results = run_sim_bench(quick=args.quick)
    print(json.dumps(results, indent=2) if args.json else format_sim_bench(results))
    return 0


def register(commands: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = bench.add_parser(
        "sim",
        help="batched step, plan judge and cold-start speed of the simulator",
        description=(
            "Measures, in one run: the batched step (4096 envs x 4 agents on 8x8, and x 16 agents on 32x32, one "
            "thread), the plan judge (2-agent length-20 plans on 8x8), import + first call in a new process, and "
            "Gymnasium's FrozenLake-v1 as a peer (when installed)."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke tests (figures not comparable)")
    parser.set_defaults(handler=_bench_sim)
