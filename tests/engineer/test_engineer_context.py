"""Engineer context: counts from a known replay set, recomputed here from the episodes; sections switch off."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from engineer.context import CONTEXT_SECTIONS, HistoryEntry, build_context, parse_sections
from engineer.evidence import StageEvidence, StageScores, collect_evidence, summarize_episodes
from policy.rollout import judge_episodes
from policy.scripted import make_scripted
from replays.errors import ReplayError
from replays.mining import FailureSummary, summarize
from replays.types import ReplayHeader
from replays.writer import write_replay
from simulator import constants as C
from simulator.config import SizeSpec, StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate

STAGE = StageConfig(2, 3, samples=48, seed=5, sizes={3: SizeSpec(0.25, 0.2, 0.5), 5: SizeSpec(0.75, 0.3, 0.5)})


@pytest.fixture(scope="module")
def stage_config():
    return STAGE


@pytest.fixture(scope="module")
def episodes(stage_config):
    items = generate(stage_config).instances
    out = []
    for name in ("greedy", "random"):
        for episode in judge_episodes(items, make_scripted(name).plans(items, seed=2)):
            episode.reward = 1.0 if episode.outcome.valid else -0.5  # known rewards, so their stats can be checked
            episode.completion_tokens = 10 + episode.instance.n_agents
            out.append(episode)
    return out


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory, episodes, stage_config):
    folder = tmp_path_factory.mktemp("stage-replays")
    half = len(episodes) // 2
    for index, chunk in enumerate((episodes[:half], episodes[half:])):
        header = ReplayHeader.new("run", 1, "validation", {"name": "scripted"}, stage_config.to_dict())
        write_replay(folder / f"part{index}.mlr", header, chunk)
    train = ReplayHeader.new("run", 1, "train", {"name": "scripted"}, stage_config.to_dict())
    write_replay(folder / "train.mlr", train, episodes[:3])
    return folder


def _size(episode) -> int:
    return episode.labels.size


def test_context__counts_from_replays_equal_counts_recomputed_from_episodes(replay_dir, episodes, stage_config):
    evidence = collect_evidence(replay_dir, split="validation")
    assert evidence.stage_config == stage_config.to_dict()
    assert any("train.mlr" in note for note in evidence.notes)
    context = build_context(evidence.summary, stage_config, [])
    behavior, failures, env = context.data["behavior"], context.data["failures"], context.data["env_stats"]

    assert behavior["episodes"] == len(episodes)
    assert behavior["valid"] == sum(ep.outcome.valid for ep in episodes)
    for side in (3, 5):
        members = [ep for ep in episodes if _size(ep) == side]
        group = behavior["by_size"][str(side)]
        assert group["episodes"] == len(members)
        assert group["valid"] == sum(ep.outcome.valid for ep in members)
        assert group["optimal"] == sum(ep.outcome.optimal for ep in members)
        assert group["valid_rate"] == pytest.approx(group["valid"] / len(members))
        assert group["reward_mean"] == pytest.approx(np.mean([ep.reward for ep in members]))
        assert group["reward_std"] == pytest.approx(np.std([ep.reward for ep in members]))
        assert group["completion_tokens_mean"] == pytest.approx(np.mean([ep.completion_tokens for ep in members]))
        counts = Counter(C.FAILURE_NAMES[ep.outcome.failure] for ep in members if not ep.outcome.valid)
        assert failures["by_size"][str(side)] == {name: counts.get(name, 0) for name in failures["by_size"][str(side)]}
        achieved = env["achieved"][str(side)]
        assert achieved["hole_ratio_mean"] == pytest.approx(
            np.mean([np.count_nonzero(ep.instance.grid) / ep.instance.grid.size for ep in members])
        )
        assert achieved["needs_wait_share"] == pytest.approx(np.mean([ep.labels.needs_wait for ep in members]))
        assert achieved["optimal_makespan_max"] == max(ep.labels.optimal_makespan for ep in members)
        # the text shows the same numbers
        assert f"{side}x{side}: {len(members)} episodes, valid {100 * group['valid_rate']:.1f}%" in context.text
    for agents in (2, 3):
        members = [ep for ep in episodes if ep.instance.n_agents == agents]
        assert behavior["by_agents"][str(agents)]["episodes"] == len(members)
    overall = Counter(C.FAILURE_NAMES[ep.outcome.failure] for ep in episodes if not ep.outcome.valid)
    assert {name: n for name, n in failures["failures"].items() if n} == dict(overall)
    assert env["config"] == stage_config.to_dict()
    assert 0 < len(failures["exemplars"]) <= 3
    assert all(example["text"] in context.text for example in failures["exemplars"])


def test_context__data_is_json_and_every_section_renders(episodes, stage_config):
    history = [HistoryEntry.from_dict({"stage": 0, "config": stage_config.to_dict(), "valid_rate": 0.25,
                                       "optimal_rate": 0.125, "zero_variance_share": 0.5})]
    context = build_context(summarize_episodes(episodes), stage_config, history)
    assert context.sections == CONTEXT_SECTIONS
    assert json.loads(json.dumps(context.data, allow_nan=False)) == context.data
    for name in CONTEXT_SECTIONS:
        assert f"## {name}" in context.text
    assert "stage 0: valid rate 25.0%, optimal rate 12.5%, zero variance share 50.0%" in context.text


@pytest.mark.parametrize("chosen", [("failures",), ("behavior", "history"), ()])
def test_context__switched_off_sections_are_absent_from_text_and_data(episodes, stage_config, chosen):
    context = build_context(summarize(episodes), stage_config, [], sections=chosen)
    assert context.sections == chosen
    for name in CONTEXT_SECTIONS:
        assert (name in context.data) == (name in chosen)
        assert (f"## {name}" in context.text) == (name in chosen)
    if not chosen:
        assert "no evidence" in context.text
    # the typed evidence rule-based engineers read is hidden with its section
    assert (context.behavior is not None) == ("behavior" in chosen)
    assert context.signal is None  # env_stats is off in every choice (and there is no signal)


def test_context__plain_failure_summary_without_size_stats_still_builds(episodes, stage_config):
    context = build_context(summarize(episodes), stage_config, [])
    assert "reward_mean" not in context.data["behavior"]["by_size"]["3"]
    assert context.data["env_stats"]["achieved"] == {}


def test_context__behavior_splits_instances_by_need_of_a_wait(episodes, stage_config):
    behavior = build_context(summarize(episodes), stage_config, [], sections="behavior")
    waiting = [ep for ep in episodes if ep.labels.needs_wait and ep.labels.size == 5]
    group = behavior.data["behavior"]["by_size_wait"]["5:needs_wait"]
    assert (group["episodes"], group["valid"]) == (len(waiting), sum(ep.outcome.valid for ep in waiting))
    assert set(behavior.data["behavior"]["by_wait"]) == {"needs_wait", "no_wait"}
    assert "instances that need a wait" in behavior.text
    line = next(line for line in behavior.text.splitlines() if line.startswith("  5x5: valid needs a wait"))
    assert f"of {len(waiting)}" in line and "no wait needed" in line
    old = summarize(episodes).to_dict()
    del old["by_wait"], old["by_size_wait"], old["by_size_makespan"]  # written before the splits: no such lines
    before = build_context(FailureSummary.from_dict(old), stage_config, [], sections="behavior")
    assert before.data["behavior"]["by_wait"] == {} and "need a wait" not in before.text
    assert before.data["behavior"]["by_size_makespan"] == {} and "per optimal makespan" not in before.text


def test_context__behavior_splits_instances_by_optimal_makespan(episodes, stage_config):
    behavior = build_context(summarize(episodes), stage_config, [], sections="behavior")
    fives = sorted({ep.labels.optimal_makespan for ep in episodes if ep.labels.size == 5})
    line = next(line for line in behavior.text.splitlines() if line.startswith("  5x5: ") and "/" in line
                and "valid" not in line)
    for makespan in fives:
        members = [ep for ep in episodes if ep.labels.size == 5 and ep.labels.optimal_makespan == makespan]
        group = behavior.data["behavior"]["by_size_makespan"][f"5:{makespan}"]
        assert (group["episodes"], group["valid"]) == (len(members), sum(ep.outcome.valid for ep in members))
        assert f"{makespan} {group['valid']}/{group['episodes']}" in line
    assert "valid per optimal makespan" in behavior.text


def test_context__history_scores_that_are_not_numbers_are_refused_and_missing_ones_are_none(episodes, stage_config):
    # a history entry holds a stage record's scores, checked when made: NaN or infinity never reach the context
    for bad in (float("nan"), float("inf"), 7.0):
        with pytest.raises(ConfigError, match="scores.valid_rate"):
            StageScores(valid_rate=bad, optimal_rate=0.5)
    history = [HistoryEntry(0, stage_config)]
    context = build_context(summarize(episodes), stage_config, history)
    entry = context.data["history"]["stages"][0]
    assert entry["config"] == stage_config.to_dict()
    assert entry["valid_rate"] is None and entry["optimal_rate"] is None and entry["zero_variance_share"] is None
    json.dumps(context.data, allow_nan=False)
    assert "stage 0: no scores" in context.text


def test_context__history_keeps_the_last_entries_only(episodes, stage_config):
    history = [HistoryEntry.from_dict({"stage": stage, "config": stage_config.to_dict(), "valid_rate": stage / 10,
                                       "optimal_rate": stage / 20}) for stage in range(8)]
    context = build_context(summarize(episodes), stage_config, history, history_limit=3)
    assert [entry["stage"] for entry in context.data["history"]["stages"]] == [5, 6, 7]
    assert "stage 4:" not in context.text and "stage 7:" in context.text


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, CONTEXT_SECTIONS),
        ("all", CONTEXT_SECTIONS),
        ("none", ()),
        ("failures,behavior", ("behavior", "failures")),
        (" history , failures ,", ("failures", "history")),
        (["env_stats"], ("env_stats",)),
    ],
)
def test_parse_sections__names_in_canonical_order(given, expected):
    assert parse_sections(given) == expected


def test_parse_sections__unknown_name_is_a_config_error():
    with pytest.raises(ConfigError, match="behaviour"):
        parse_sections("behaviour")


def test_collect_evidence__no_file_of_the_split_is_a_replay_error(replay_dir):
    with pytest.raises(ReplayError, match="eval"):
        collect_evidence(replay_dir, split="eval")


def test_context__env_stats_shows_the_generator_s_report_and_the_training_signal(episodes, stage_config):
    from dataclasses import asdict

    generated = generate(stage_config)
    generation = {str(side): asdict(report) for side, report in generated.reports.items()}
    signal = {"by_size": {"3": {"groups": 4, "reward_mean": 0.5, "valid_rate": 0.4, "zero_variance_share": 0.25,
                                "abs_advantage_mean": 0.61}}}
    summary = StageEvidence.from_dict({**summarize_episodes(episodes).to_dict(), "generation": generation,
                                       "training_signal": signal})
    context = build_context(summary, stage_config, [], sections=("env_stats",))
    data = context.section("env_stats")
    assert {side: made["count"] for side, made in data["generated"].items()} == \
        {str(side): report.count for side, report in generated.reports.items()}
    assert data["training_signal"]["3"]["abs_advantage_mean"] == 0.61
    assert "what the generator made of the current config" in context.text
    assert "3x3: 4 groups, reward 0.50, sampled valid 40.0%, zero-variance 25.0%, mean |advantage| 0.61" in context.text
    assert "(its GRPO groups)" in context.text and data["training_signal_trainer"] == "grpo"
    assert context.signal is not None and context.signal.by_size[3].abs_advantage_mean == 0.61
    assert context.behavior is None  # behavior is off: its typed summary too
    json.dumps(context.data, allow_nan=False)
    plain = build_context(summarize_episodes(episodes), stage_config, [], sections=("env_stats",))
    assert plain.section("env_stats")["generated"] == {} and "made of the current config (the stage" not in plain.text
    assert plain.section("env_stats")["training_signal_trainer"] is None
    # a rejection-sampling stage's groups are named as such, and the record reads back equal; an unknown trainer
    # is refused by name
    rft = StageEvidence.from_dict({**summarize_episodes(episodes).to_dict(),
                                   "training_signal": {**signal, "trainer": "rft"}})
    assert StageEvidence.from_dict(rft.to_dict()) == rft and rft.to_dict()["training_signal"]["trainer"] == "rft"
    rft_text = build_context(rft, stage_config, [], sections=("env_stats",)).text
    assert "(its rejection-sampling groups: each instance's samples, scored as a 0/1 valid reward)" in rft_text
    assert "GRPO" not in rft_text
    with pytest.raises(ConfigError, match=r"training_signal\.trainer"):
        StageEvidence.from_dict({**summarize_episodes(episodes).to_dict(), "training_signal": {**signal, "trainer": "x"}})
    assert plain.section("env_stats")["training_signal_rounds"] == [] and "by round" not in rft_text
    # its sampling rounds, each with its own groups: read back equal, in the data and the text in round order
    second = {"3": {**signal["by_size"]["3"], "valid_rate": 0.55}}
    rounds = StageEvidence.from_dict({**summarize_episodes(episodes).to_dict(),
                                      "training_signal": {**signal, "trainer": "rft",
                                                          "rounds": [signal["by_size"], second]}})
    assert StageEvidence.from_dict(rounds.to_dict()) == rounds and len(rounds.training_signal.rounds) == 2
    rounds_context = build_context(rounds, stage_config, [], sections=("env_stats",))
    assert rounds_context.section("env_stats")["training_signal_rounds"] == [{"3": 0.4}, {"3": 0.55}]
    assert "sampled valid by round: 3x3 40.0% -> 55.0%" in rounds_context.text
    with pytest.raises(ConfigError, match=r"training_signal\.rounds\[1\]\.3"):
        StageEvidence.from_dict({**summarize_episodes(episodes).to_dict(),
                                 "training_signal": {**signal, "rounds": [signal["by_size"], {"3": {"groups": 1}}]}})


def test_context__a_side_without_instances_is_n_a_not_zero(episodes, stage_config):
    """Every episode valid: the engineer was told the failed instances had holes 0.000 and a makespan of 0.0."""
    valid = [episode for episode in episodes if episode.outcome.valid]
    assert valid
    text = build_context(summarize_episodes(valid), stage_config, [], sections=("env_stats",)).text
    line = next(line for line in text.splitlines() if line.startswith("failed vs succeeded"))
    assert line.count("n/a vs ") == 4 and "0.000 vs" not in line


def test_group_line__counted_nouns_agree_with_their_number():
    from engineer.context import _group_line
    from replays.mining import GroupStats

    one = _group_line("1 agent", GroupStats(1, 1, 0, 1.0, 0.0, {}))
    two = _group_line("2 agents", GroupStats(2, 1, 1, 0.5, 0.5, {}))
    assert "1 episode," in one and "1 episodes" not in one
    assert "2 episodes," in two
