"""MkDocs hook: the CLI reference and the engineer reference are rendered from the program at build time, so
they cannot drift.

A page that holds the marker ``<!-- cli-reference -->`` gets, in its place, the ``--help`` of ``mapf-lake`` and of
every subcommand under it (``bench`` targets included), each under a heading named after the command
(``mapf-lake gen`` -> anchor ``#mapf-lake-gen``). A page that holds ``<!-- engineer-reference -->`` gets every
registered engineer (``engineer.engineers.ENGINEERS``) under a heading of its name, with its option table as
``mapf-lake engineers NAME`` prints it (``engineer.options``). A page that holds ``<!-- settings-reference -->``
gets the run config's settings (``curriculum.config.settings_rows``: every key ``--set`` takes, its default, what it
allows and what it does, from the fields' declarations). Registered in ``mkdocs.yml`` under ``hooks:``.
"""

from __future__ import annotations

import os

MARKER = "<!-- cli-reference -->"
ENGINEER_MARKER = "<!-- engineer-reference -->"
SETTINGS_MARKER = "<!-- settings-reference -->"
HELP_WIDTH = "100"  # argparse wraps to $COLUMNS; a fixed width makes the page the same on every machine


def render_cli_reference() -> str:
    """Markdown: one heading and one text block of ``--help`` output per parser, depth first."""
    from curriculum.cli import build_parser, walk_parsers

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        blocks = []
        for parser in walk_parsers(build_parser()):
            depth = len(parser.prog.split())  # "mapf-lake" 1, "mapf-lake gen" 2, "mapf-lake bench gen" 3
            blocks.append(f"{'#' * (depth + 1)} `{parser.prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(blocks)
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


def _cell(text: str) -> str:
    """``text`` (reST literals allowed) inside a Markdown table cell: its pipes escaped, literals in backticks."""
    return text.replace("|", "\\|").replace("``", "`")


def render_engineer_reference() -> str:
    """Markdown: per registered engineer a heading, what it does, and a table of its options."""
    from engineer.engineers import ENGINEERS, engineer_forms, engineer_summary
    from engineer.options import as_written, option_table

    blocks = []
    for (name, kind), form in zip(ENGINEERS.items(), engineer_forms()):
        rows = option_table(kind.build)  # type: ignore[arg-type]  # every build is a dataclass
        block = [f"## `{form}`", "", engineer_summary(name), ""]
        if rows:
            block += ["| option | default | allowed | what it does |", "| --- | --- | --- | --- |"]
            block += [f"| `{row.name}` | `{as_written(row.default)}` | {_cell(row.allowed)} | {_cell(row.help)} |"
                      for row in rows]
        else:
            block.append("No options.")
        blocks.append("\n".join(block) + "\n")
    return "\n".join(blocks)


def render_settings_reference() -> str:
    """Markdown: one table of every run config setting, as ``mapf-lake train --settings`` lists them."""
    from curriculum.config import settings_rows
    from simulator.fields import as_written

    lines = ["| setting | default | allowed | what it does |", "| --- | --- | --- | --- |"]
    lines += [f"| `{row.name}` | `{as_written(row.default)}` | {_cell(row.allowed)} | {_cell(row.help)} |"
              for row in settings_rows()]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render_cli_reference())
    if ENGINEER_MARKER in markdown:
        markdown = markdown.replace(ENGINEER_MARKER, render_engineer_reference())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, render_settings_reference())
    return markdown
