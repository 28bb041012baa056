"""Tests of the failure table (simulator/failures.py): the bytes it fixes and every reader of it agree."""

import re
from pathlib import Path

import pytest

from simulator import constants as C
from simulator.failures import KINDS

ROOT = Path(__file__).resolve().parents[2]


def test_failure_table__codes_bits_and_priority_are_the_replay_formats():
    assert C.FAILURE_NAMES == ("none", "parse_error", "illegal_move", "hole", "vertex_conflict", "edge_conflict",
                               "goal_not_reached")
    assert (C.EV_ILLEGAL, C.EV_HOLE, C.EV_VERTEX, C.EV_EDGE, C.EV_GOAL, C.EV_SLIP) == (1, 2, 4, 8, 16, 32)
    assert C.FAILURE_PRIORITY == ((1, 2), (2, 3), (4, 4), (8, 5))
    assert (C.EV_FAILURE_MASK, C.EV_ALL) == (15, 63)


def test_failure_table__format_md_states_its_bits_and_codes():
    text = (ROOT / "replays" / "FORMAT.md").read_text()
    bits = " ".join(f"{name}={getattr(C, name)}" for name in ("EV_ILLEGAL", "EV_HOLE", "EV_VERTEX", "EV_EDGE",
                                                                "EV_GOAL", "EV_SLIP"))
    assert f"`{bits}`" in text
    assert f"code 0..{len(C.FAILURE_NAMES) - 1} of the failure table" in text
    assert re.search(r"`" + re.escape(", ".join(C.FAILURE_NAMES)) + r"`", text)


@pytest.mark.parametrize("module", ["render.draw", "render.svg"])
def test_failure_table__every_glyph_is_drawn(module):
    glyphs = __import__(module, fromlist=["_GLYPHS"])._GLYPHS
    assert {kind.glyph for kind in KINDS if kind.glyph} <= set(glyphs)


def test_failure_table__every_marker_has_a_sentence_a_placement_and_a_legend_entry():
    from render.timeline import MARKER_MEANINGS, _PLACE

    for kind in KINDS:
        if kind.glyph is None:
            continue
        assert kind.sentence and kind.meaning and kind.legend is not None, kind.name
        assert kind.placement == "unreached" or kind.placement in _PLACE, kind.name
    assert [name for name, _ in MARKER_MEANINGS] == [kind.name for kind in sorted(
        (kind for kind in KINDS if kind.legend is not None), key=lambda kind: kind.legend)]
