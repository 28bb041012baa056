"""The docs stay true: the Getting-started page's runnable blocks run, every page of the site's nav exists and every
page is in the nav, relative links resolve, the README stays short, and the CLI reference covers every command.

The full site build (``mkdocs build --strict``: broken links, missing pages, plugin warnings) runs in ``.ci/run``.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from curriculum.cli import build_parser, walk_parsers

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUN_MARKER = "<!-- run -->"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def runnable_blocks(text: str) -> list[str]:
    """The ```bash blocks that directly follow a ``<!-- run -->`` line (blank lines between are allowed)."""
    blocks, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        if lines[index].strip() == RUN_MARKER:
            index += 1
            while index < len(lines) and not lines[index].strip():
                index += 1
            assert index < len(lines) and lines[index].strip() == "```bash", f"{RUN_MARKER} not followed by ```bash"
            body = []
            index += 1
            while lines[index].strip() != "```":
                body.append(lines[index])
                index += 1
            blocks.append("\n".join(body))
        index += 1
    return blocks


def _nav_files(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [path for item in node for path in _nav_files(item)]
    if isinstance(node, dict):
        return [path for value in node.values() for path in _nav_files(value)]
    return []


def _relative_links(text: str) -> list[str]:
    targets = [link or image for link, image in LINK.findall(text)]
    return [target for target in targets if not re.match(r"^[a-z]+:|^#", target)]


def test_docs__runnable_blocks_of_getting_started_run_in_a_fresh_folder(tmp_path):
    blocks = runnable_blocks((DOCS / "getting-started.md").read_text())
    assert len(blocks) >= 4
    shim = tmp_path / "bin" / "mapf-lake"  # this interpreter's mapf-lake, whatever is on PATH
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m curriculum.cli "$@"\n')
    shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"}
    for block in blocks:  # in page order, in one folder: later blocks read what earlier ones wrote
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, f"{block}\n--- stderr ---\n{result.stderr[-2000:]}"
    assert (work / "first-episode.png").stat().st_size > 1000 and (work / "first-episode.gif").exists()


def test_docs__every_nav_page_exists_and_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs" and config["strict"] is True
    nav = _nav_files(config["nav"])
    assert [path for path in nav if not (DOCS / path).is_file()] == []
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert sorted(pages - set(nav)) == []


@pytest.mark.parametrize("page", ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md"))])
def test_docs__relative_links_resolve_to_files(page):
    path = ROOT / page
    missing = [target for target in _relative_links(path.read_text())
               if not (path.parent / target.split("#")[0]).exists()]
    assert missing == []


def test_readme__stays_short_with_a_picture_and_links_to_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    links = _relative_links(text)
    assert any(target.endswith(".png") or target.endswith(".gif") for target in links)
    assert {"docs/getting-started.md", "docs/reference/cli.md", "docs/results/protocol/README.md"} <= set(links)


def test_readme__tour_lists_every_bench_target():
    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if "`mapf-lake bench " in line)
    listed = re.search(r"`mapf-lake bench ([^`]+)`", line).group(1).split(" / ")
    bench = next(parser for parser in walk_parsers(build_parser()) if parser.prog == "mapf-lake bench")
    targets = [action for action in bench._actions if action.dest == "bench_target"][0].choices
    assert sorted(listed) == sorted(targets)


def test_docs__cli_reference_hook_renders_every_command():
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "hooks" / "cli_reference.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.on_page_markdown(f"# CLI\n\n{hook.MARKER}\n", page=None, config=None, files=None)
    progs = [parser.prog for parser in walk_parsers(build_parser())]
    assert len(progs) > 20 and hook.MARKER not in page
    for prog in progs:
        assert f"# `{prog}`\n" in page
    assert "usage: mapf-lake gen" in page and "%%" not in page
