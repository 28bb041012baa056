"""The ``mapf-lake`` command: one door, subcommands registered by each package.

Each package owns a ``cli`` module with ``register(commands)``: it adds its subcommands to ``commands``. The
benchmark targets (``mapf-lake bench NAME``) live in ``curriculum/benches/`` and register from its table
(``curriculum.benches.cli.BENCHES``). Registration must stay cheap: heavy imports happen inside the handlers, so
``mapf-lake --help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from curriculum.benches.cli import register as register_benches
from policy.backend_base import BackendError
from replays.errors import ReplayError
from simulator.errors import ConfigError
from simulator.secrets import redacted_where_held

# Errors that mean "bad input" (or an endpoint that keeps failing): one line on stderr naming what is wrong,
# exit status 2, no traceback.
USER_ERRORS = (ConfigError, ReplayError, BackendError)

# Packages whose cli modules register subcommands, in help order (a registry, not an if/elif chain).
COMMAND_PACKAGES = ("simulator", "replays", "policy", "engineer", "curriculum", "render")


class ExampleHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a description or epilog line indented by two spaces is kept as written.

    Paragraphs are wrapped as usual; an ``examples:`` epilog's command lines stay whole, so they can be copied."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        paragraph: list[str] = []

        def flush() -> None:
            if paragraph:
                lines.append(super(ExampleHelpFormatter, self)._fill_text(" ".join(paragraph), width, indent))
                paragraph.clear()

        for line in text.splitlines():
            if line.startswith("  "):
                flush()
                lines.append(indent + line)
            elif not line.strip():
                flush()
                lines.append("")
            else:
                paragraph.append(line.strip())
        flush()
        return "\n".join(lines)


def walk_parsers(parser: argparse.ArgumentParser):
    """Every parser under ``parser`` (itself first), depth first: the help formatter below and the docs' CLI
    reference (``docs/hooks/cli_reference.py``) walk the same tree."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from walk_parsers(sub)


def package_version() -> str:
    """The installed distribution's version (``unknown`` when run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mapf-frozenlake")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mapf-lake",
        description="MAPF-FrozenLake: a certified multi-agent testbed and self-designing curricula for LLM RL.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench_parser = commands.add_parser(
        "bench", help="measure speed (prints JSON with --json)", description="Benchmarks; each target prints figures."
    )
    bench = bench_parser.add_subparsers(dest="bench_target", required=True, metavar="TARGET")
    for package in COMMAND_PACKAGES:
        importlib.import_module(f"{package}.cli").register(commands)
    register_benches(bench)
    for sub in walk_parsers(parser):  # parsers left on the plain formatter keep their epilogs' example lines whole
        if sub.formatter_class is argparse.HelpFormatter:
            sub.formatter_class = ExampleHelpFormatter
    return parser


def _innermost_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` ran: ``mapf-lake bench sim`` -> the ``bench sim`` parser."""
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, actions[0].dest, None) if actions else None
        if chosen is None or chosen not in actions[0].choices:
            return parser
        parser = actions[0].choices[chosen]


def register(commands: argparse._SubParsersAction) -> None:
    """The curriculum's own subcommands (this module is also the command's entry point)."""
    from curriculum.commands import register as register_curriculum

    register_curriculum(commands)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # report them with the usage line of the subcommand that was given them, not the top level's
        _innermost_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        result = args.handler(args)
    except USER_ERRORS as exc:
        print(f"mapf-lake: error: {redacted_where_held(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path that cannot be read or written (a file where a folder should be, ...)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"mapf-lake: error: {where}{exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mapf-lake: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
