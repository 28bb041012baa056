"""Scripted rollouts and the failure summary: oracle perfect, greedy conflicts, counts recomputed."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from policy.rollout import judge_episodes
from policy.scripted import SCRIPTED_POLICIES, make_scripted
from replays.mining import FailureSummary, render_summary, summarize, summarize_paths
from replays.types import ReplayHeader
from replays.writer import write_replay
from simulator import constants as C
from simulator.config import SizeSpec, StageConfig

CONFIG = StageConfig(2, 3, samples=60, seed=11, sizes={4: SizeSpec(0.5, 0.2, 0.6), 7: SizeSpec(0.5, 0.3, 0.6)})


@pytest.fixture(scope="module")
def episodes_by_policy(items):
    return {name: judge_episodes(items, make_scripted(name).plans(items, seed=1)) for name in SCRIPTED_POLICIES}


def test_oracle_rollout__is_fully_valid_and_optimal(episodes_by_policy):
    summary = summarize(episodes_by_policy["oracle"]).to_dict()
    assert summary["valid_rate"] == 1.0 and summary["optimal_rate"] == 1.0
    assert not any(summary["failures"].values())


def test_greedy_rollout__conflicts_show_on_needs_wait_instances(episodes_by_policy):
    greedy = episodes_by_policy["greedy"]
    waiting = [ep for ep in greedy if ep.labels.needs_wait]
    summary = summarize(waiting).to_dict()
    assert summary["valid_rate"] == 0.0  # needs_wait means no plan of own shortest paths without waiting exists
    assert summary["failures"]["vertex_conflict"] + summary["failures"]["edge_conflict"] == len(waiting)
    no_wait = summarize([ep for ep in greedy if not ep.labels.needs_wait]).to_dict()
    assert no_wait["episodes"] > 0


def test_summary__counts_equal_counts_recomputed_from_episodes(episodes_by_policy):
    episodes = [ep for eps in episodes_by_policy.values() for ep in eps]
    summary = summarize(episodes).to_dict()
    categories = Counter(C.FAILURE_NAMES[ep.outcome.failure] for ep in episodes if not ep.outcome.valid)
    assert summary["failures"] == {name: categories.get(name, 0) for name in summary["failures"]}
    assert summary["episodes"] == len(episodes)
    assert summary["valid"] == sum(ep.outcome.valid for ep in episodes)
    for key, group in summary["by_agents_size"].items():
        agents, size = (int(v) for v in key.split("x"))
        members = [ep for ep in episodes if ep.instance.n_agents == agents and ep.labels.size == size]
        assert group["episodes"] == len(members)
        assert group["optimal"] == sum(ep.outcome.optimal for ep in members)
    steps = Counter(ep.outcome.fail_step for ep in episodes if C.FAILURE_NAMES[ep.outcome.failure] == "hole")
    assert summary["fail_steps"].get("hole", {}) == {str(k): v for k, v in sorted(steps.items())}
    heat_total = sum(np.sum(heat) for heat in summary["fail_cells"].values())
    assert heat_total == sum(not ep.outcome.valid for ep in episodes)
    failed = [ep for ep in episodes if not ep.outcome.valid]
    assert summary["instance_stats"]["failed"]["needs_wait_share"] == pytest.approx(
        np.mean([ep.labels.needs_wait for ep in failed])
    )


def test_summary__wait_split_equals_the_split_recomputed_from_episodes(episodes_by_policy):
    episodes = [ep for eps in episodes_by_policy.values() for ep in eps]
    summary = summarize(episodes)
    data = summary.to_dict()
    for side in sorted({ep.labels.size for ep in episodes}):
        for kind, wanted in (("needs_wait", True), ("no_wait", False)):
            members = [ep for ep in episodes if ep.labels.size == side and ep.labels.needs_wait == wanted]
            group = data["by_size_wait"][f"{side}:{kind}"]
            assert (group["episodes"], group["valid"]) == (len(members), sum(ep.outcome.valid for ep in members))
    assert sum(group["episodes"] for group in data["by_wait"].values()) == len(episodes)
    assert FailureSummary.from_dict(data) == summary
    greedy = summarize(episodes_by_policy["greedy"])  # own shortest paths never wait: none of those is solved
    assert greedy.by_wait["needs_wait"].valid_rate == 0.0 and greedy.by_wait["no_wait"].valid_rate > 0.0
    assert "needs_wait 0% of" in render_summary(greedy, exemplars=False)


def test_summary__makespan_split_equals_the_split_recomputed_from_episodes(episodes_by_policy):
    episodes = [ep for eps in episodes_by_policy.values() for ep in eps]
    data = summarize(episodes).to_dict()
    cells = sorted({(ep.labels.size, ep.labels.optimal_makespan) for ep in episodes})
    assert list(data["by_size_makespan"]) == [f"{side}:{makespan}" for side, makespan in cells]  # ascending
    for side, makespan in cells:
        members = [ep for ep in episodes if (ep.labels.size, ep.labels.optimal_makespan) == (side, makespan)]
        group = data["by_size_makespan"][f"{side}:{makespan}"]
        assert (group["episodes"], group["valid"]) == (len(members), sum(ep.outcome.valid for ep in members))
    assert summarize(episodes_by_policy["oracle"]).by_size_makespan[cells[0]].valid_rate == 1.0


def test_summary__written_before_the_wait_split_reads_back_without_it(episodes_by_policy):
    data = summarize(episodes_by_policy["greedy"]).to_dict()
    del data["by_wait"], data["by_size_wait"], data["by_size_makespan"]
    old = FailureSummary.from_dict(data)
    assert old.by_wait == {} and old.by_size_wait == {} and old.by_size_makespan == {}
    assert "need of a wait" not in render_summary(old)
    only_waits = summarize([ep for ep in episodes_by_policy["oracle"] if ep.labels.needs_wait])
    assert list(only_waits.by_wait) == ["needs_wait"]  # a kind without episodes is left out


def test_summary__text_has_marked_exemplars(episodes_by_policy):
    text = render_summary(summarize(episodes_by_policy["greedy"]))
    assert "examples of failures:" in text and "!" in text and "plan:" in text


def test_summarize_paths__reads_a_folder_of_replays(tmp_path, episodes_by_policy):
    for name, episodes in episodes_by_policy.items():
        header = ReplayHeader.new(run_id="t", stage=0, split="rollout", policy={"name": name})
        write_replay(tmp_path / f"{name}.mlr", header, episodes)
    summary = summarize_paths(tmp_path).to_dict()
    expected = summarize([ep for eps in episodes_by_policy.values() for ep in eps]).to_dict()
    assert summary["failures"] == expected["failures"]
    assert all("#" in example["source"] for example in summary["exemplars"])


@pytest.mark.parametrize("fail_step, fail_agent", [(2**64 - 1, 0), (3, 99), (-5, 0), (10**6, 2**40)])
def test_summarize__failing_step_or_agent_that_do_not_fit_the_trace_are_untrusted_not_a_crash(
        tmp_path, episodes_by_policy, fail_step, fail_agent):
    import dataclasses

    from replays.mining import describe_failure, render_episode
    from replays.reader import ReplayReader

    failed = [e for e in episodes_by_policy["random"] if not e.outcome.valid and e.outcome.failure != C.PARSE_ERROR][:5]
    for episode in failed:
        episode.outcome = dataclasses.replace(episode.outcome, fail_step=fail_step, fail_agent=fail_agent)
    header = ReplayHeader.new("run", 0, "validation", {"name": "random"})
    write_replay(tmp_path / "bad.mlr", header, failed)  # what a flipped bit in a file looks like to the reader
    with ReplayReader(tmp_path / "bad.mlr") as reader:
        read = list(reader)
    summary = summarize_paths(tmp_path)
    assert sum(summary.to_dict()["failures"].values()) == len(failed)
    render_summary(summary)
    for episode in read:
        assert "do not fit its trace" in describe_failure(episode)
        render_episode(episode)


def _swap_episode(fail_step: int, steps: int):
    """Two agents on a 1x3 corridor, judged an edge conflict at ``fail_step`` with ``steps`` steps of trace: a
    real swap at step 1 when ``steps`` is 1, as a file may claim it otherwise."""
    from replays.types import Episode, Outcome
    from simulator.types import Instance

    instance = Instance(grid=np.zeros((1, 3), np.int8), starts=[[0, 0], [0, 1]], goals=[[0, 1], [0, 0]])
    positions = np.array([[[0, 0], [0, 1]], [[0, 1], [0, 0]]][: steps + 1], np.int32)
    events = np.full((steps, 2), C.EV_EDGE, np.int8)
    return Episode(instance=instance, labels=None, plan=None, parse_error=None, positions=positions, events=events,
                   outcome=Outcome(False, C.EDGE_CONFLICT, fail_step, 0, -1, -1, 0, optimal=False))


@pytest.mark.parametrize("fail_step, steps, says", [
    (0, 0, "do not fit its trace"),  # no trace: events[-1] raised IndexError
    (0, 1, "do not fit its trace"),  # a trace: step 0 read the last step's events (a conflict at no step)
    (2, 1, "do not fit its trace"),  # past the trace
    (1, 1, "step 1: agents 0 and 1 swap cells"),  # the real swap, as it happened
])
def test_describe_failure__a_step_failure_at_step_0_or_past_the_trace_is_untrusted(tmp_path, fail_step, steps, says):
    from replays.mining import describe_failure, render_episode
    from replays.reader import ReplayReader

    header = ReplayHeader.new("run", 0, "validation", {"name": "hand"})
    write_replay(tmp_path / "swap.mlr", header, [_swap_episode(fail_step, steps)])
    with ReplayReader(tmp_path / "swap.mlr") as reader:
        (episode,) = list(reader)
    assert says in describe_failure(episode)
    render_episode(episode)
    text = render_summary(summarize_paths(tmp_path))
    assert "edge_conflict" in text


def test_summary__a_side_without_episodes_shows_n_a_not_zero(episodes_by_policy):
    """All valid: the failed side has no instances, and its means printed as 0.00 (holes 0.00 vs 0.21)."""
    text = render_summary(summarize(episodes_by_policy["oracle"]))
    line = next(line for line in text.splitlines() if line.startswith("failed vs succeeded"))
    assert line.count("n/a vs ") == 3 and " vs 0.00," not in line and "0.00 vs" not in line
    greedy_waits = [ep for ep in episodes_by_policy["greedy"] if ep.labels.needs_wait]  # none valid
    line = next(line for line in render_summary(summarize(greedy_waits)).splitlines()
                if line.startswith("failed vs succeeded"))
    assert line.count(" vs n/a") == 3
