"""The typed stage record: the file format stays, the package reads attributes."""

import json

import pytest

from curriculum.loop.records import StageRecord, StageScores
from engineer.decision import DecisionSummary
from simulator.config import default_stage_config
from simulator.errors import ConfigError


def _record(**changes) -> dict:
    config = default_stage_config().to_dict()
    record = {"stage": 2, "config": config, "next_config": {**config, "samples": 99}, "model": "runs/x/stage-02/model",
              "generation": {"3": {"size": 3, "count": 10, "requested_hole_ratio": 0.2, "achieved_hole_ratio": 0.2,
                                    "requested_wait_ratio": 0.3, "achieved_wait_ratio": 0.3, "candidates": 14,
                                    "rejected_unsolvable": 1, "rejected_solver_limit": 0, "rejected_wait_label": 3,
                                    "rejected_makespan": 0, "rejected_protected": 0}}, "churn": {"changed": 0.5, "gained": 3, "lost": 2},
              "timings": {"train": 10.0, "validation": 2.0}, "train": {"step_seconds": 1.2, "zero_variance_share": 0.4},
              "scores": {"valid_rate": 0.3, "optimal_rate": 0.25, "reward_mean": 0.4, "sampled_valid_rate": 0.2,
                         "zero_variance_share": 0.4},
              "decision": {"outcome": "changed", "engineer": "rule", "accepted": True, "reason": "r",
                           "diff": ["samples: 256 -> 99"], "repairs": []}}
    record.update(changes)
    return record


def test_stage_record__round_trip_is_the_file_format():
    data = _record()
    record = StageRecord.from_dict(json.loads(json.dumps(data)))
    assert record.to_dict() == data
    assert record.next_config.samples == 99 and record.scores.sampled_valid_rate == 0.2
    assert record.history_entry().to_dict() == {"stage": 2, "config": data["config"], **data["scores"]}


@pytest.mark.parametrize("decision, outcome", [
    ({"accepted": True, "diff": ["x"]}, "changed"),
    ({"accepted": True, "diff": None}, "kept"),
    ({"accepted": False, "diff": ["x"]}, "rejected"),
    ({"outcome": "kept", "accepted": True, "diff": ["x"]}, "kept"),  # a written outcome wins
])
def test_stage_record__older_records_read_back_with_their_outcome_derived(decision, outcome):
    data = _record(decision=decision)
    for key in ("generation", "churn", "timings", "next_config"):  # records from before these parts existed
        del data[key]
    del data["scores"]["zero_variance_share"]
    record = StageRecord.from_dict(data)
    assert record.decision.outcome == outcome
    assert record.timings.seconds() == {} and record.next_config == record.config
    assert record.scores.zero_variance_share == 0.4  # from the trainer's figures


@pytest.mark.parametrize("data, field", [
    ([], "where"),
    ({k: v for k, v in _record().items() if k != "scores"}, "where.scores"),
    (_record(scores={"valid_rate": 0.3}), "where.scores"),
    (_record(decision="yes"), "where.decision"),
    (_record(decision={"outcome": "maybe"}), "where.decision.outcome"),
    (_record(config={"agents": 2}), "where.config.samples"),
])
def test_stage_record__bad_documents_name_the_part(data, field):
    with pytest.raises(ConfigError) as caught:
        StageRecord.from_dict(data, "where")
    assert caught.value.field == field


def test_stage_scores_and_decision__direct_construction():
    scores = StageScores(0.5, 0.4)
    assert scores.to_dict() == {"valid_rate": 0.5, "optimal_rate": 0.4, "zero_variance_share": None}
    assert DecisionSummary.from_dict({"accepted": True, "diff": []}).to_dict()["outcome"] == "kept"


def test_load_run__a_corrupt_stage_record_names_its_file(tmp_path):
    from curriculum.config import preset
    from curriculum.reports.report import load_run

    (tmp_path / "manifest.json").write_text(json.dumps({"run_config": preset("tiny").to_dict()}))
    (tmp_path / "stage-01").mkdir()
    (tmp_path / "stage-01" / "stage.json").write_text(json.dumps(_record(config={"agents": 2, "sizes": {}})))
    with pytest.raises(ConfigError) as caught:
        load_run(tmp_path)
    assert caught.value.field.endswith("stage.json") and "stage record" in str(caught.value)
    (tmp_path / "stage-01" / "stage.json").write_text(json.dumps(_record(stage=1)))
    assert load_run(tmp_path).stages[0].scores.valid_rate == 0.3


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}', '{"a": 1e999}', '{"a": ' + "1" * 41 + "}",
                                  '{"a": 1, "a": 2}', '{"a": ' + "[" * 70 + "]" * 70 + "}"])
def test_read_record__holds_a_run_record_to_the_documents_number_depth_and_key_rules(tmp_path, text):
    from curriculum.loop.records import read_record

    path = tmp_path / "stage.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="stage.json"):
        read_record(path, "stage record")


def test_write_record__a_record_with_nan_is_refused_when_written_not_when_read_back(tmp_path):
    from curriculum.loop.records import write_record

    with pytest.raises(ConfigError, match="stage.json.*NaN"):
        write_record(tmp_path / "stage.json", {"reward_mean": float("nan")}, "stage record")
    assert not (tmp_path / "stage.json").exists()
