"""What the render tests share: the known episodes of ``test_render_fixtures.py`` written to a replay file
(``cases_path``) and that file opened (``source``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from render.source import ReplaySource


@pytest.fixture(scope="module")
def cases_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The render tests' known episodes (``test_render_fixtures.CASES``) written to a replay file, once per module."""
    from tests.render.test_render_fixtures import write_cases

    return write_cases(tmp_path_factory.mktemp("render") / "cases.mlr")


@pytest.fixture()
def source(cases_path: Path) -> Iterator[ReplaySource]:
    """``cases_path`` opened as a ``render.source.ReplaySource`` (closed after the test)."""
    from render.source import ReplaySource

    with ReplaySource(cases_path) as opened:
        yield opened
