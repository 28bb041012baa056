"""Subcommands owned by the simulator: ``gen``, ``solve`` and ``demo``."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

if TYPE_CHECKING:  # imported where used: the CLI starts without loading numba or the solver
    from simulator.config import StageConfig
    from simulator.generator import GeneratedStage, LabelledInstance
    from simulator.suites import SuiteCell
    from simulator.types import Instance

    # What argparse's add_subparsers() returns, which the packages' register() functions add their commands to
    # (a generic class for the type checker only: not subscriptable at run time).
    Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]


def add_command(commands: Subcommands, name: str, handler: Callable[[argparse.Namespace], int], help: str,
                description: str, examples: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Register the subcommand ``name``, run by ``handler``: its one-line ``help`` (the command list), its
    ``description`` (wrapped) and its ``examples`` (command lines, shown whole under ``examples:``)."""
    epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples) if examples else None
    parser = commands.add_parser(name, help=help, description=description, epilog=epilog)
    parser.set_defaults(handler=handler)
    return parser


# The flags that describe a stage's maps (``add_stage_flags``), their attribute names and defaults. They default to
# None in the parser so that one given beside --config, --suite or --map (which take their maps from elsewhere) is
# refused instead of silently ignored; ``stage_flag`` reads a flag with its default.
MAP_FLAGS = {"size": ("--size", [6]), "agents": ("--agents", [2]), "holes": ("--holes", 0.2),
             "wait_ratio": ("--wait-ratio", 0.3), "slip": ("--slip", 0.0), "min_makespan": ("--min-makespan", None),
             "max_makespan": ("--max-makespan", None)}


def add_stage_flags(parser: argparse.ArgumentParser, n_default: int) -> None:
    """The flags that describe a one-config stage (``gen``, ``rollout``): --config or the map knobs."""
    parser.add_argument("--size", type=int, nargs="+", default=None, help="map side(s), 3..32 (default 6)")
    parser.add_argument("--agents", type=int, nargs="+", default=None, help="agents, or MIN MAX (default 2)")
    parser.add_argument("--holes", type=float, default=None, help="hole ratio, 0..0.9 (default 0.2)")
    parser.add_argument("--wait-ratio", type=float, default=None,
                        help="share of instances that need a wait (default 0.3)")
    parser.add_argument("--min-makespan", type=int, default=None, metavar="M",
                        help="only instances whose optimal makespan is at least M, 1..4096 (default: no bound)")
    parser.add_argument("--max-makespan", type=int, default=None, metavar="M",
                        help="only instances whose optimal makespan is at most M, 1..4096 (default: no bound; "
                             "small values put agents near their goals)")
    parser.add_argument("--slip", type=float, default=None, help="slip probability recorded in the config (default 0)")
    parser.add_argument("--n", type=int, default=None,
                        help=f"number of instances (default {n_default}; with --config, the file's samples)")
    parser.set_defaults(n_default=n_default)
    parser.add_argument("--seed", type=int, default=None, help="seed (default: the config's, or 0)")


def stage_flag(args: argparse.Namespace, name: str) -> Any:
    """The map flag ``name`` (a key of :data:`MAP_FLAGS`) as given, else its default."""
    value = getattr(args, name)
    return MAP_FLAGS[name][1] if value is None else value


def refuse_map_flags(args: argparse.Namespace, source: str, value: object, except_for: tuple[str, ...] = ()) -> None:
    """ConfigError naming every map flag given beside ``source`` (``--config``, ``--suite``, ``--map``), which
    takes its maps from elsewhere: such a flag would be ignored without a word."""
    from simulator.errors import ConfigError

    given = [flag for name, (flag, _) in MAP_FLAGS.items() if name not in except_for and getattr(args, name, None)
             is not None]
    if given:
        fix = "set them in the file" if source == "--config" else "leave them out"
        raise ConfigError(source, value, f"without {', '.join(given)}: {source} gives the maps, so they would be "
                          f"ignored ({fix}, or leave {source} out)")


def check_new_target(path: str | None, flag: str, force: bool, what: str = "file") -> None:
    """ConfigError when ``path`` (an output named by ``flag``) exists and ``force`` is off: an output is never
    replaced without a word (``rollout`` refuses its finished file the same way). Checked before any work."""
    from simulator.errors import ConfigError

    if path and os.path.lexists(path) and not force:
        raise ConfigError(flag, path, f"a new {what} (it exists: pick another name, or pass --force to replace it)")


def progress_bar(total: int, desc: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A tqdm bar on stderr (hidden when stderr is not a terminal); returns (callback, close)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="inst", file=sys.stderr, disable=None, dynamic_ncols=True)

    def update(done: int) -> None:
        bar.update(done - bar.n)

    return update, bar.close


@contextmanager
def showing_progress(total: int, desc: str) -> Iterator[Callable[[int], None]]:
    """:func:`progress_bar` for a ``with`` block: yields its callback and closes the bar when the block ends,
    by an error too (``with showing_progress(n, "generating") as update: generate(..., progress=update)``)."""
    update, close = progress_bar(total, desc)
    try:
        yield update
    finally:
        close()


def generate_suite_shown(name: str) -> list[tuple[SuiteCell, GeneratedStage]]:
    """The suite's cells (``simulator.suites.generate_suite``), generated under a progress bar ``suite NAME``."""
    from simulator.suites import generate_suite, suite_size

    with showing_progress(suite_size(name), f"suite {name}") as update:
        return generate_suite(name, progress=update)


def config_from_args(args: argparse.Namespace) -> StageConfig:
    from simulator.config import StageConfig, load_config
    from simulator.errors import ConfigError

    if args.config:
        refuse_map_flags(args, "--config", args.config)
        config = load_config(args.config)
        overrides = {key: value for key, value in (("seed", args.seed), ("samples", args.n)) if value is not None}
        if overrides:  # --seed and --n override the file's, as they say
            config = StageConfig.from_dict({**config.to_dict(), **overrides})
        return config
    sides, agents = stage_flag(args, "size"), stage_flag(args, "agents")
    if not 1 <= len(agents) <= 2:
        raise ConfigError("--agents", agents, "one count, or MIN MAX")
    document = {
        "agents": agents[0] if len(agents) == 1 else [agents[0], agents[1]],
        "samples": args.n if args.n is not None else args.n_default,
        "seed": 0 if args.seed is None else args.seed,
        "slip": stage_flag(args, "slip"),
        "sizes": {
            size: {"data_ratio": 1.0 / len(sides), "hole_ratio": stage_flag(args, "holes"),
                   "wait_ratio": stage_flag(args, "wait_ratio"), "min_makespan": args.min_makespan,
                   "max_makespan": args.max_makespan}
            for size in sides
        },
    }
    if len(sides) > 1:  # ratios that sum to exactly 1 in floats: give the remainder to the last size
        share = 1.0 / len(sides)
        document["sizes"][sides[-1]]["data_ratio"] = 1.0 - share * (len(sides) - 1)
    return StageConfig.from_dict(document)


def _describe(item: LabelledInstance) -> str:
    from simulator.text import PLAN_HEADING, counted, describe_agents, format_plan, render_instance

    header = (
        f"# size {item.size} #{item.index}: {counted(item.instance.n_agents, 'agent')}, optimal makespan "
        f"{item.optimal_makespan}, optimal sum of costs {item.optimal_sum_of_costs}, shortest-distance sum "
        f"{item.sum_of_distances}, needs_wait {str(item.needs_wait).lower()}"
    )
    # the agent lines give every goal: the map alone hides one under another agent's start (agents that swap)
    return (f"{header}\n{render_instance(item.instance)}\n{describe_agents(item.instance)}\n"
            f"{PLAN_HEADING}\n{format_plan(item.plan.sequences())}\n")


def _write_or_print(args: argparse.Namespace, items: list[LabelledInstance]) -> None:
    """``gen``'s instances: written to ``--out`` as JSON lines (atomically), else printed as text unless ``--quiet``."""
    from simulator.atomic import atomic_write
    from simulator.generator import to_jsonl

    if args.out:
        atomic_write(args.out, to_jsonl(items))
    elif not args.quiet:
        for item in items:
            print(_describe(item))


def _gen(args: argparse.Namespace) -> int:
    if args.schema:
        from simulator.config import config_json_schema

        print(json.dumps(config_json_schema(), indent=2))
        return 0
    from simulator.atomic import atomic_write
    from simulator.generator import generate, to_jsonl
    from simulator.errors import naming_file
    from simulator.text import counted

    check_new_target(args.out, "--out", args.force)
    if args.map or args.scen:
        return _gen_movingai(args)
    if args.suite:
        from simulator.suites import suite_checksum

        refuse_map_flags(args, "--suite", args.suite)

        cells = generate_suite_shown(args.suite)
        items = [item for _, stage in cells for item in stage.instances]
        if args.out:
            atomic_write(args.out, to_jsonl(items))
        print(f"suite {args.suite}: {len(items)} instances in {len(cells)} cells, checksum {suite_checksum(cells)}")
        return 0
    config = config_from_args(args)
    with naming_file(args.config), showing_progress(config.samples, "generating") as update:
        stage = generate(config, progress=update, max_attempts=args.max_attempts)
    _write_or_print(args, stage.instances)
    for size, report in stage.reports.items():
        print(
            f"size {size}: {counted(report.count, 'instance')}, holes {report.achieved_hole_ratio:.3f} "
            f"(asked {report.requested_hole_ratio}), needs_wait {report.achieved_wait_ratio:.3f} "
            f"(asked {report.requested_wait_ratio}), {counted(report.candidates, 'candidate')} "
            f"(rejected: {report.rejected_unsolvable} no room/unsolvable, {report.rejected_solver_limit} over budget, "
            f"{report.rejected_wait_label} wrong wait label"
            + (f", {report.rejected_makespan} outside the makespan band)" if report.rejected_makespan else ")")
        )
    print(f"checksum {stage.checksum()}" + (f", written to {args.out}" if args.out else ""))
    return 0


def _gen_movingai(args: argparse.Namespace) -> int:
    """``gen --map FILE.map --scen FILE.scen``: an instance per ``--agents`` scenario lines, certified."""
    from simulator.errors import ConfigError
    from simulator.generator import to_jsonl
    from simulator.movingai import instances_from_scenarios, read_map, read_scen

    if not (args.map and args.scen):
        missing = "--scen" if args.map else "--map"
        raise ConfigError(missing, None, "given: --map FILE.map and --scen FILE.scen go together")
    refuse_map_flags(args, "--map", args.map, except_for=("agents",))
    ignored = [flag for flag, value in (("--n", args.n), ("--seed", args.seed)) if value is not None]
    if ignored:  # the scenario gives the instances and their number; nothing is drawn
        raise ConfigError("--map", args.map, f"without {', '.join(ignored)}: the scenario file gives the instances "
                          "(every --agents lines), so they would be ignored (leave them out)")
    if len(stage_flag(args, "agents")) != 1:
        raise ConfigError("--agents", args.agents, "one count with --map: the scenario lines of each instance")
    agents = stage_flag(args, "agents")[0]
    grid = read_map(args.map)
    scenarios = read_scen(args.scen)
    with showing_progress(len(scenarios) // max(agents, 1), f"importing {args.scen}") as update:
        result = instances_from_scenarios(grid, scenarios, agents, source=args.scen, progress=update)
    if result.items:  # nothing imported: nothing written (an empty --out would pass for an export)
        _write_or_print(args, result.items)
    report = result.report
    print(report.render())
    shown = 10
    for group, line, reason in report.skipped[:shown]:
        print(f"  skipped instance {group} (from line {line}): {reason}")
    if len(report.skipped) > shown:
        print(f"  ... and {len(report.skipped) - shown} more skipped")
    if not result.items:  # bad input, as a file that does not parse is: one line naming the files, exit status 2
        first = (f"the first skipped, instance {report.skipped[0][0]} from line {report.skipped[0][1]}: "
                 f"{report.skipped[0][2]}" if report.skipped else f"fewer than {agents} problem lines")
        raise ConfigError(f"--map {args.map} --scen {args.scen}", "no instance imported",
                          f"a scenario with at least one group of {agents} lines that imports", first)
    checksum = hashlib.sha256(to_jsonl(result.items)).hexdigest()
    print(f"checksum {checksum}" + (f", written to {args.out}" if args.out else ""))
    return 0


def _read_instance(source: str) -> Instance:
    from simulator.errors import ConfigError
    from simulator.files import MAX_INSTANCE_BYTES, decode_text, load_json, read_text_bounded
    from simulator.text import parse_instance
    from simulator.types import Instance

    what = "an instance as JSON or as map text"
    if source == "-":
        raw = sys.stdin.buffer.read(MAX_INSTANCE_BYTES + 1)
        if len(raw) > MAX_INSTANCE_BYTES:
            raise ConfigError("solve -", f"more than {MAX_INSTANCE_BYTES:,} bytes", f"{what} of at most "
                              f"{MAX_INSTANCE_BYTES:,} bytes")
        text = decode_text(raw, what, "solve -")
    else:
        text = read_text_bounded(source, MAX_INSTANCE_BYTES, what)
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):  # JSON (map text starts with a tile, never a bracket)
            data = load_json(stripped.splitlines()[0] if "\n" in stripped.strip() else stripped, source, what,
                             line=None, object_only=True)
            return Instance.from_dict(data)
        return parse_instance(text)
    except ConfigError as error:
        if not error.args[0].startswith(source):
            error.args = (f"{'stdin' if source == '-' else source}: {error.args[0]}",)  # say which file
        raise


def _solve(args: argparse.Namespace) -> int:
    from simulator.generator import bare_distances
    from simulator.judge import judge_plan
    from simulator.solver import solve
    from simulator.text import format_plan, render_instance

    instance = _read_instance(args.instance)
    solution = solve(instance, max_nodes=args.max_nodes, time_limit=args.time_limit)
    # The optimal sum of costs decides needs_wait exactly (simulator.needs_wait's docstring): no second search,
    # which on a 256x256 map with 64 agents ran for minutes past the solver's limits.
    wait = solution.solved and solution.sum_of_costs > int(bare_distances(instance).sum())
    if args.json:
        out = {"status": solution.status, "makespan": solution.makespan, "sum_of_costs": solution.sum_of_costs,
               "reason": solution.reason, "expanded": solution.expanded,
               "plan": solution.plan.sequences() if solution.plan else None}
        if solution.solved:
            out["needs_wait"] = wait
        print(json.dumps(out))
        return 0 if solution.solved else 1
    print(render_instance(instance))
    plan = solution.plan  # given exactly when solved
    if not solution.solved or plan is None:
        print(f"{solution.status}: {solution.reason}")
        return 1
    verdict = judge_plan(instance, plan)
    print(f"optimal makespan {solution.makespan}, optimal sum of costs {solution.sum_of_costs}, "
          f"needs_wait {str(wait).lower()}, judge: {'valid' if verdict.valid else verdict.failure_name}")
    print(format_plan(plan.sequences()))
    return 0


def _demo(args: argparse.Namespace) -> int:
    """Generate a suite, judge the solver's certificate plans (the oracle) in one batch, print a table."""
    import numpy as np

    from simulator.judge import is_optimal, judge_plans
    from simulator.tables import format_rate_table

    cells = generate_suite_shown(args.suite)
    items = [item for _, stage in cells for item in stage.instances]
    result = judge_plans([it.instance for it in items], [it.plan for it in items])
    optimal = is_optimal(result.valid, result.makespan, np.array([it.optimal_makespan for it in items]))
    sizes = sorted({cell.size for cell, _ in cells})
    agents = sorted({cell.agents for cell, _ in cells})
    rates: dict[int, dict[int, tuple[float, float]]] = {k: {} for k in agents}
    start = 0
    for cell, stage in cells:
        stop = start + len(stage.instances)
        rates[cell.agents][cell.size] = (float(result.valid[start:stop].mean()), float(optimal[start:stop].mean()))
        start = stop
    rows = [(f"{k:>6} ", rates[k]) for k in agents]
    print(format_rate_table(f"oracle (solver certificates) on suite {args.suite}: valid% / optimal%", "agents ",
                            rows, sizes, cell_width=12))
    return 0


def register(commands: Subcommands) -> None:
    from simulator.suites import SUITES

    gen = add_command(
        commands, "gen", _gen,
        help="generate certified, labelled instances from a stage config or flags",
        description=(
            "Generate instances: every one certified solvable by the optimal solver and labelled with its optimal "
            "makespan, optimal sum of costs, shortest-distance sum and needs_wait. Same config and seed, same bytes. "
            "Without --out the instances are printed as text; with --out they are written as JSON lines."
        ),
        examples=(
            "mapf-lake gen --size 8 --agents 3 --holes 0.3 --wait-ratio 0.5 --n 5 --seed 1",
            "mapf-lake gen --size 4 5 6 --n 300 --out train.jsonl",
            "mapf-lake gen --suite paper-quick --quiet",
            "mapf-lake gen --map arena.map --scen arena-even-1.scen --agents 3 --out arena.jsonl",
        ),
    )
    source = gen.add_mutually_exclusive_group()
    source.add_argument("--config", help="stage config file (.yaml, .yml or .json)")
    source.add_argument("--suite", choices=sorted(SUITES), help="generate a benchmark suite and print its checksum")
    source.add_argument("--map", metavar="FILE.map",
                        help="a MovingAI map (with --scen): an instance per --agents scenario lines, each certified "
                             "and labelled; groups sharing a start or goal, on an impassable tile, unsolvable or "
                             "over the solver budget are skipped and counted (tiles . G S are ice, @ O T W holes)")
    gen.add_argument("--scen", metavar="FILE.scen", help="the MovingAI scenario of --map (x = column, y = row)")
    add_stage_flags(gen, n_default=10)
    gen.add_argument("--max-attempts", type=int, default=2000, help="candidates per instance before giving up")
    gen.add_argument("--out", help="write JSON lines here (atomically) instead of printing the instances")
    gen.add_argument("--force", action="store_true", help="replace an existing --out file")
    gen.add_argument("--quiet", action="store_true", help="print only the report")
    gen.add_argument("--schema", action="store_true", help="print the stage config's JSON Schema and exit")

    solve = add_command(
        commands, "solve", _solve,
        help="solve one instance optimally (map text or JSON in, optimal plan out)",
        description=(
            "Solve one instance. Input: the map text that `gen` prints (tokens '.', 'H', 'A<k>', 'G<k>') or an "
            "instance as JSON ({grid, starts, goals}); a file path or - for stdin. Exit status 1 when unsolvable "
            "or over the limits."
        ),
        examples=(
            "mapf-lake gen --size 5 --n 1 --out one.jsonl && mapf-lake solve one.jsonl",
            "printf 'A0 .  G1\\nH  .  .\\nA1 .  G0\\n' | mapf-lake solve -",
        ),
    )
    solve.add_argument("instance", help="file with the instance, or - for stdin")
    solve.add_argument("--max-nodes", type=int, default=1_000_000, help="search node budget (default 1,000,000)")
    solve.add_argument("--time-limit", type=float, default=None, help="seconds (default: none)")
    solve.add_argument("--json", action="store_true", help="print the result as JSON")

    demo = add_command(
        commands, "demo", _demo,
        help="generate a benchmark suite and judge the optimal solver's plans on it (a table)",
        description="Generates a suite, judges the solver's certificate plans in one batch, prints valid%/optimal%.",
    )
    demo.add_argument("--suite", choices=sorted(SUITES), default="paper-quick", help="suite (default paper-quick)")
