"""What the test modules share: a headless pygame, and the fixtures several of them use (``items``, and the
render tests' ``cases_path`` and ``source``).

Plain helpers that tests import live in modules of their own role beside this one (``cli_runner.py``,
``run_folder_fixture.py``, ``model_fixtures.py``, ``mapf_strategies.py``, ``test_render_fixtures.py``); pytest
loads this file before any test module, so the settings below hold whichever file runs first, or alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:  # the fixtures import what they need when used: a simulator test loads no render code
    from render.source import ReplaySource
    from simulator.generator import LabelledInstance

# pygame reads these when it is imported: a dummy display and sound, and no greeting on stdout. Tests that need
# another driver set their own (monkeypatch, or the environment of a subprocess).
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


@pytest.fixture(scope="module")
def items(request: pytest.FixtureRequest) -> list[LabelledInstance]:
    """The labelled instances of the test module's ``CONFIG`` (a ``StageConfig``), generated once per module."""
    from simulator.generator import generate

    return generate(request.module.CONFIG).instances


@pytest.fixture(scope="module")
def cases_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The render tests' known episodes (``test_render_fixtures.CASES``) written to a replay file, once per module."""
    from tests.test_render_fixtures import write_cases

    return write_cases(tmp_path_factory.mktemp("render") / "cases.mlr")


@pytest.fixture()
def source(cases_path: Path) -> Iterator[ReplaySource]:
    """``cases_path`` opened as a ``render.source.ReplaySource`` (closed after the test)."""
    from render.source import ReplaySource

    with ReplaySource(cases_path) as opened:
        yield opened
