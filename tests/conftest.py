"""What the test modules share: a headless pygame, and the ``items`` fixture several of them use.

The tests live by package (``tests/simulator/``, ``tests/render/``, ``tests/policy/``, ``tests/engineer/``,
``tests/curriculum/``, ``tests/replays/``; ``tests/project/`` for the whole project: docs, layout, the CLI, fuzzing
across packages; ``tests/README.md`` says which is which). Fixtures of one package sit in that folder's own
``conftest.py``. Plain helpers that tests of several packages import live beside this file, one module per role
(``cli_runner.py``, ``run_folder_fixture.py``, ``model_fixtures.py``, ``mapf_strategies.py``, ``documents.py``,
``small_run.py``); pytest loads this file before any test module, so the settings below hold whichever file runs
first, or alone. It loads it with ``tests/`` on ``sys.path`` (its default ``prepend`` import mode), which is why a
test module may import a helper by its bare name (``from model_fixtures import ...``), as the verl test must (see
``tests/curriculum/test_verl_sampler.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the fixtures import what they need when used: a simulator test loads no render code
    from simulator.generator import LabelledInstance

# pygame reads these when it is imported: a dummy display and sound, and no greeting on stdout. Tests that need
# another driver set their own (monkeypatch, or the environment of a subprocess).
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``long`` (``pytestmark = pytest.mark.long``) run first, each in its own order: the workers
    (``-n auto``) then end on short tests and finish together, instead of one waiting on a long test started last."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)  # stable: every other order is kept


@pytest.fixture(scope="module")
def items(request: pytest.FixtureRequest) -> list[LabelledInstance]:
    """The labelled instances of the test module's ``CONFIG`` (a ``StageConfig``), generated once per module."""
    from simulator.generator import generate

    return generate(request.module.CONFIG).instances

