"""MkDocs hook: the CLI reference is rendered from the argparse parsers at build time, so it cannot drift.

A page that holds the marker ``<!-- cli-reference -->`` gets, in its place, the ``--help`` of ``mapf-lake`` and of
every subcommand under it (``bench`` targets included), each under a heading named after the command
(``mapf-lake gen`` -> anchor ``#mapf-lake-gen``). Registered in ``mkdocs.yml`` under ``hooks:``.
"""

from __future__ import annotations

import os

MARKER = "<!-- cli-reference -->"
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


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_cli_reference())
