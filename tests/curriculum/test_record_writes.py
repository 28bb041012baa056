"""Every run record is checked when written, not only when read: whatever values reach a record (a bug, a damaged
trainer state), ``write_record`` either writes a file the project's own reader takes back, or refuses with a
ConfigError and writes nothing (property over hypothesis-damaged documents of every record type)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curriculum.loop.records import RoundFigures, StageRecord, TrainingReport, read_record, write_record
from curriculum.training.common import _round_figures
from engineer import StageEvidence
from engineer.decision import EngineerDecision, make_decision
from policy.evaluation import SampledCell, SampledPass1
from simulator.config import default_stage_config
from simulator.errors import ConfigError
from tests.engineer.test_engineer_engineers import summary_with
from tests.curriculum.test_records import _record

Reader = Callable[[dict, str], Any]

# (what, a document the project writes, the reader a resume or report uses, the keys it requires)
RECORDS: dict[str, tuple[str, dict, Reader | None, tuple[str, ...]]] = {
    "stage.json": ("stage record", _record(), StageRecord.from_dict, ()),
    "decision.json": ("engineer's decision", make_decision("rule", default_stage_config(), None, "kept").to_dict(),
                      EngineerDecision.from_dict, ("config",)),
    "summary.json": ("validation summary", summary_with({3: 0.5, 4: 0.25}).to_dict(), StageEvidence.from_dict, ()),
    "checkpoint_done.json": ("checkpoint mark", TrainingReport(steps=3, seconds=1.5, reward_mean=0.25,
                                                                figures={"last_loss": 0.5}).to_dict(),
                             TrainingReport.from_dict, ()),
    "round.json": ("checkpoint mark", {"round": RoundFigures(sampled_valid_rate=0.5, round=1, prompts=8,
                                                             kept=4).to_dict(),
                                       "signal_state": None, "outcomes": {}}, _round_figures, ()),
    "sampled.json": ("test-set sampled pass@1", SampledPass1(k=2, cells={(2, 3): SampledCell(0.5, 0.25, 20)},
                                                             suite="test-small", valid_rate=0.5).to_dict(),
                     SampledPass1.from_dict, ()),
    "manifest.json": ("run manifest", {"protocol": 3, "run_config": {"name": "x"}, "seed": 0}, None,
                      ("run_config",)),
}

# what a damaged state or a bug may put in a record: huge and negative numbers, NaN, text, nesting
HOSTILE = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10**45, max_value=10**45)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8)


def _paths(document: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in ``document`` (a key of a mapping, an index of a list) a value sits."""
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


def _damaged(document: dict, where: tuple, value: Any) -> dict:
    out = json.loads(json.dumps(document))
    holder = out
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = value
    return out


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_write_record__each_record_as_the_project_writes_it_reads_back(name, tmp_path):
    what, document, read, keys = RECORDS[name]
    path = tmp_path / name
    write_record(path, document, what, read, keys)
    data = read_record(path, what, keys)
    assert data == json.loads(json.dumps(document))
    if read is not None:
        read(data, str(path))


@pytest.mark.parametrize("name", sorted(RECORDS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_write_record__a_damaged_record_is_refused_unwritten_or_written_so_its_reader_takes_it(name, tmp_path, data):
    what, document, read, keys = RECORDS[name]
    where = data.draw(st.sampled_from(_paths(document)), label="where")
    damaged = _damaged(document, where, data.draw(HOSTILE, label="value"))
    path: Path = tmp_path / name
    path.unlink(missing_ok=True)
    try:
        write_record(path, damaged, what, read, keys)
    except ConfigError as error:
        assert not path.exists()  # refused: nothing written
        assert name in str(error.field) or name in str(error.value), error
        return
    # written: the reader a resume uses takes it back, by the same rules
    back = read_record(path, what, keys)
    if read is not None:
        read(back, str(path))
    assert not any(isinstance(value, float) and not math.isfinite(value) for value in _leaves(back))


def _leaves(document: Any) -> list:
    if isinstance(document, dict):
        return [leaf for value in document.values() for leaf in _leaves(value)]
    if isinstance(document, list):
        return [leaf for value in document for leaf in _leaves(value)]
    return [document]


def test_write_record__a_refused_record_leaves_the_earlier_file_as_it_was(tmp_path):
    what, document, read, keys = RECORDS["stage.json"]
    path = tmp_path / "stage.json"
    write_record(path, document, what, read)
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="stage.json"):
        write_record(path, _damaged(document, ("stage",), -10**30), what, read)
    assert path.read_bytes() == before
