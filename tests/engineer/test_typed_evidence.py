"""Typed evidence: the failure summary, the stage evidence and the history are frozen values inside the packages
and the same JSON documents at the file boundary; bad documents name the key at fault."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest

from curriculum.loop.records import StageRecord
from engineer.cli import load_history
from engineer.context import HistoryEntry, build_context
from engineer.evidence import (SampledPass, SignalFigures, StageEvidence, StageScores, TrainingSignal,
                               collect_evidence, summarize_episodes)
from policy.rollout import judge_episodes
from policy.scripted import make_scripted
from replays.mining import FailureSummary, GroupStats, render_summary, summarize
from simulator.config import SizeSpec, StageConfig, default_stage_config
from simulator.errors import ConfigError
from simulator.generator import generate
from tests.documents import DELETE, set_at

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "replay_v1.mlr"
STAGE = StageConfig(2, 3, samples=40, seed=9, sizes={3: SizeSpec(0.5, 0.2, 0.5), 5: SizeSpec(0.5, 0.3, 0.5)})


@pytest.fixture(scope="module")
def episodes():
    items = generate(STAGE).instances
    out = []
    for name in ("greedy", "random"):
        for index, episode in enumerate(judge_episodes(items, make_scripted(name).plans(items, seed=3))):
            episode.reward = 1.0 if episode.outcome.valid else -0.25 * (index % 3)
            episode.completion_tokens = 12 + index % 5
            out.append((f"{name}.mlr#{index}", episode))
    return out


@pytest.fixture(scope="module")
def evidence(episodes) -> StageEvidence:
    """The evidence the stage loop hands the engineer: everything present."""
    generated = generate(STAGE)
    return replace(
        summarize_episodes(episodes),
        sampled=SampledPass(k=2, temperature=1, valid_rate=0.25, optimal_rate=0.125, by_size={3: 0.5, 5: 0.0}),
        seconds={"generation": 1.5, "judging_and_records": 0.25},
        generation=dict(generated.reports),
        training_signal=TrainingSignal(
            by_size={3: SignalFigures(4, 0.5, 0.4, 0.25, 0.61)},
            by_agents_size={(2, 3): SignalFigures(4, 0.5, 0.4, 0.25, 0.61)}),
    )


def _round_trip(document: dict, read) -> dict:
    """``document`` through a JSON file and back, then written again."""
    return read(json.loads(json.dumps(document))).to_dict()


def test_failure_summary__from_dict_of_to_dict_is_the_same_document_in_the_same_order(episodes):
    summary = summarize(episodes)
    document = summary.to_dict()
    assert list(document) == ["summary_version", "episodes", "valid", "optimal", "valid_rate", "optimal_rate",
                              "failures", "failure_rates", "by_size", "by_agents", "by_agents_size", "by_wait",
                              "by_size_wait", "by_size_makespan", "fail_steps",
                              "fail_cells", "instance_stats", "reward", "completion_tokens_mean", "exemplars"]
    again = _round_trip(document, FailureSummary.from_dict)
    assert json.dumps(again) == json.dumps(document)
    read = FailureSummary.from_dict(json.loads(json.dumps(document)))
    assert read == summary  # the typed values too: tuples and mappings compare equal
    assert render_summary(read) == render_summary(summary)
    assert isinstance(read.by_size[3], GroupStats) and read.by_size[3].episodes > 0
    assert read.episodes == len(episodes) and read.exemplars[0].source.endswith(tuple("0123456789"))


def test_stage_evidence__round_trip_keeps_every_key_and_its_order(evidence):
    document = evidence.to_dict()
    assert list(document)[-6:] == ["exemplars", "size_stats", "sampled", "seconds", "generation", "training_signal"]
    again = _round_trip(document, StageEvidence.from_dict)
    assert json.dumps(again) == json.dumps(document)
    assert again["sampled"]["temperature"] == 1 and isinstance(again["sampled"]["temperature"], int)  # as given
    assert StageEvidence.from_dict(json.loads(json.dumps(document))) == evidence


def test_stage_evidence__summary_json_without_the_stage_loop_parts_reads_back_with_them_absent(episodes):
    plain = summarize_episodes(episodes)
    document = plain.to_dict()
    assert list(document)[-1] == "size_stats"
    read = StageEvidence.from_dict(json.loads(json.dumps(document)))
    assert read.sampled is None and read.seconds is None and read.generation is None and read.training_signal is None
    assert read.to_dict() == document
    bare = StageEvidence.from_dict(summarize(episodes).to_dict())  # a plain failure summary: no per-size figures
    assert bare.size_stats == {} and bare.failures == plain.failures


def test_stage_evidence__from_a_real_replay_file(tmp_path):
    evidence = collect_evidence(FIXTURE).summary
    assert isinstance(evidence, StageEvidence) and evidence.failures.episodes > 0
    document = evidence.to_dict()
    assert json.dumps(_round_trip(document, StageEvidence.from_dict)) == json.dumps(document)


def _set(document: dict, path: tuple, value) -> dict:
    """A deep copy of ``document`` with the key at ``path`` set to ``value`` (or removed, for ``...``)."""
    document = json.loads(json.dumps(document))
    set_at(document, path, DELETE if value is ... else value)
    return document


@pytest.mark.parametrize("path, value, named", [
    (("by_size", "5", "valid_rate"), "high", "summary.by_size.5.valid_rate"),
    (("by_size", "3", "failures", "hole"), 1.5, "summary.by_size.3.failures.hole"),
    (("by_agents_size", "2x3", "episodes"), ..., "summary.by_agents_size.2x3.episodes"),
    (("failures",), ..., "summary.failures"),
    (("episodes",), True, "summary.episodes"),
    (("reward", "std"), None, "summary.reward.std"),
    (("instance_stats", "failed"), ..., "summary.instance_stats.failed"),
    (("instance_stats", "succeeded", "agents_mean"), "2", "summary.instance_stats.succeeded.agents_mean"),
    (("instance_stats", "failed", "episodes"), 2.5, "summary.instance_stats.failed.episodes"),
    (("size_stats", "3", "reward_mean"), [0.5], "summary.size_stats.3.reward_mean"),
    (("fail_cells", "3", 0), "row", r"summary.fail_cells.3\[0\]"),
    (("exemplars", 0, "text"), 7, r"summary.exemplars\[0\].text"),
    (("summary_version",), 2, "summary.summary_version"),
    (("size_stats", "5", "optimal_makespan_min"), 1.5, "summary.size_stats.5.optimal_makespan_min"),
    (("sampled", "k"), ..., "summary.sampled.k"),
    (("seconds", "generation"), "slow", "summary.seconds.generation"),
    (("generation", "3", "count"), "many", "summary.generation.3.count"),
    (("training_signal", "by_size", "3", "groups"), 4.0, "summary.training_signal.by_size.3.groups"),
    (("training_signal", "by_size"), ..., "summary.training_signal.by_size"),
])
def test_stage_evidence__a_bad_document_names_the_key_path(evidence, path, value, named):
    document = _set(evidence.to_dict(), path, value)
    with pytest.raises(ConfigError, match=rf"^{named} = "):
        StageEvidence.from_dict(document)


def test_failure_summary__a_document_that_is_not_a_mapping_is_a_config_error():
    with pytest.raises(ConfigError, match="^summary = "):
        FailureSummary.from_dict([1, 2])
    with pytest.raises(ConfigError, match=r"^runs/x/summary.json.episodes = None is not allowed: present"):
        StageEvidence.from_dict({"summary_version": 1}, "runs/x/summary.json")


def test_typed_values_are_frozen(evidence):
    with pytest.raises(dataclasses.FrozenInstanceError):
        evidence.failures.valid_rate = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        evidence.sampled = None  # type: ignore[misc]


def test_build_context__takes_typed_evidence_and_history_only(evidence):
    config = default_stage_config()
    with pytest.raises(ConfigError, match="^evidence = "):
        build_context(evidence.to_dict(), config, [])
    with pytest.raises(ConfigError, match=r"^history\[1\] = "):
        build_context(evidence, config, [HistoryEntry(1, config), {"stage": 2, "config": None}])


# --- history --------------------------------------------------------------------------------------------------
def _history_document(config: StageConfig) -> list[dict]:
    """What the stage loop lists: the warm start, then finished stages."""
    return [
        {"stage": 0, "config": None, "valid_rate": 0.25, "optimal_rate": 0.2, "reward_mean": 0.1,
         "zero_variance_share": None},
        {"stage": 1, "config": config.to_dict(), "valid_rate": 0.3, "optimal_rate": 0.25, "reward_mean": 0.4,
         "sampled_valid_rate": 0.2, "zero_variance_share": 0.4},
    ]


def test_history__a_history_file_reads_as_entries_and_writes_back_the_same(tmp_path):
    config = default_stage_config()
    document = _history_document(config)
    for name, data in (("list.json", document), ("wrapped.json", {"history": document})):
        (tmp_path / name).write_text(json.dumps(data))
        entries = load_history(tmp_path / name)
        assert all(isinstance(entry, HistoryEntry) for entry in entries)
        assert entries[0].config is None and entries[1].config == config
        assert [entry.to_dict() for entry in entries] == document
    bare = HistoryEntry.from_dict({"stage": 3})
    assert bare.config is None and bare.scores is None and bare.optimal_rate is None
    # scores are a stage record's: both greedy rates, or none
    with pytest.raises(ConfigError, match=r"^history entry.optimal_rate = None"):
        HistoryEntry.from_dict({"stage": 3, "valid_rate": 0.5})
    with pytest.raises(ConfigError, match=r"^history entry.valid_rate = None .*beside reward_mean"):
        HistoryEntry.from_dict({"stage": 3, "reward_mean": 0.5})


@pytest.mark.parametrize("entry, named", [
    ({"stage": 2, "config": None, "valid_rate": "high"}, r"history\[1\].valid_rate"),
    ({"config": None, "valid_rate": 0.5}, r"history\[1\].stage"),
    ({"stage": "2"}, r"history\[1\].stage"),
    ({"stage": 2, "config": {"agents": 2, "samples": 10, "sizes": {"6": {"data_ratio": 1.0, "hole_ratio": 2.0,
                                                                        "wait_ratio": 0.0}}}},
     r"history\[1\].config.sizes.6.hole_ratio"),
    ({"stage": 2, "config": "the usual"}, r"history\[1\].config"),
    ("not an entry", r"history\[1\]"),
])
def test_history__a_bad_entry_in_a_history_file_names_its_index_and_key(tmp_path, entry, named):
    path = tmp_path / "history.json"
    path.write_text(json.dumps([_history_document(default_stage_config())[0], entry]))
    with pytest.raises(ConfigError, match=rf"^--history .*history.json: {named} = "):  # the file, then the key
        load_history(path)


def test_history__a_stage_record_lists_itself_as_a_history_entry():
    config = default_stage_config()
    document = {"stage": 2, "config": config.to_dict(), "next_config": config.to_dict(), "model": "m",
                "scores": {"valid_rate": 0.3, "optimal_rate": 0.25, "reward_mean": 0.4, "zero_variance_share": None},
                "decision": {"outcome": "kept", "accepted": True, "diff": []}}
    entry = StageRecord.from_dict(document).history_entry()
    assert entry == HistoryEntry(2, config, StageScores(valid_rate=0.3, optimal_rate=0.25, reward_mean=0.4))
    assert entry.scores is StageRecord.from_dict(document).scores or entry.scores == StageRecord.from_dict(document).scores
    assert entry.to_dict() == {"stage": 2, "config": config.to_dict(), **document["scores"]}
    assert HistoryEntry.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry


def test_signal_figures__one_spelling_for_the_trainer_s_tallies_the_record_and_the_context():
    import numpy as np

    from engineer.evidence import SIGNAL_FIGURES
    from policy.rewards import StageReward

    assert SIGNAL_FIGURES == tuple(field.name for field in dataclasses.fields(SignalFigures))
    reward = StageReward({"valid": 1.0}, 2)
    reward.record_groups([(2, 3), (2, 4)], np.array([1.0, 0.0, 1.0, 1.0]), np.array([True, False, True, True]))
    signal = reward.signal()
    document = signal.to_dict()
    for figures in (*document["by_size"].values(), *document["by_agents_size"].values()):
        assert tuple(figures) == SIGNAL_FIGURES
    assert TrainingSignal.from_dict(document) == signal and list(signal.by_agents_size) == [(2, 3), (2, 4)]


def test_keys__ints_and_pairs_in_memory_text_only_in_the_document(evidence):
    # In memory a side is an int and a pair a tuple (no caller parses "5:3" back); the document keeps its text keys.
    failures = evidence.failures
    assert all(isinstance(side, int) for side in failures.by_size) and all(
        isinstance(key, tuple) and len(key) == 2 for key in (*failures.by_agents_size, *failures.by_size_makespan,
                                                             *failures.by_size_wait))
    assert all(isinstance(step, int) for steps in failures.fail_steps.values() for step in steps)
    document = evidence.to_dict()
    assert all(isinstance(key, str) for key in (*document["by_size"], *document["by_size_makespan"],
                                                *document["training_signal"]["by_agents_size"]))
    assert StageEvidence.from_dict(json.loads(json.dumps(document))) == evidence


@pytest.mark.parametrize("part, key, field", [
    ("by_size", "six", "summary.by_size.six"),
    ("by_size", "-3", "summary.by_size.-3"),
    ("by_agents_size", "2-3", "summary.by_agents_size.2-3"),
    ("by_size_makespan", "4:x", "summary.by_size_makespan.4:x"),
    ("by_size_wait", "4:sometimes", "summary.by_size_wait.4:sometimes"),
    ("by_size", "1" * 12, "summary.by_size." + "1" * 12),
])
def test_keys__a_key_that_is_not_a_count_or_pair_is_refused_by_name(evidence, part, key, field):
    document = evidence.to_dict()
    first = next(iter(document[part].values()))
    document[part] = {key: first}
    with pytest.raises(ConfigError) as error:
        StageEvidence.from_dict(document)
    assert error.value.field == field
    signal = evidence.training_signal.to_dict()
    signal["by_agents_size"] = {"3/6": signal["by_size"]["3"]}
    with pytest.raises(ConfigError, match="by_agents_size"):
        TrainingSignal.from_dict(signal)
