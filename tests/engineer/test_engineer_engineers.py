"""Engineers by name: rule moves weight the documented way, random/fixed baselines, the LLM engineer's fallbacks
(backend errors, timeouts, the tiny local model end to end), and the ``mapf-lake engineer`` command."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from engineer import build_context, make_engineer
from engineer.engineers import ENGINEERS
from engineer.evidence import StageEvidence
from engineer.gap import length_band
from engineer.llm import LLMEngineer
from engineer.rule import hole_ratio_cap
from replays.mining import GroupStats
from policy.backend_base import Generation
from simulator.config import SizeSpec, StageConfig, load_config
from simulator.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = StageConfig.from_dict({
    "agents": 2,
    "samples": 400,
    "seed": 3,
    "sizes": {side: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3} for side in (3, 4, 5, 6)},
})


def summary_with(rates: dict[int, float], episodes: int = 20, **extra) -> StageEvidence:
    """A hand-made failure summary whose sizes have the given valid (and optimal) rates (``extra``: more keys of
    the evidence document, e.g. ``training_signal``)."""

    def group(rate: float, n: int) -> dict:
        valid = round(rate * n)
        return {"episodes": n, "valid": valid, "optimal": valid, "valid_rate": rate, "optimal_rate": rate,
                "failures": {"hole": n - valid}}

    def stats(n: int) -> dict:
        return {"episodes": n, "hole_ratio_mean": 0.2, "needs_wait_share": 0.0, "optimal_makespan_mean": 3.0,
                "agents_mean": 2.0}

    total = episodes * len(rates)
    mean = sum(rates.values()) / len(rates)
    failed = total - round(mean * total)
    return StageEvidence.from_dict({
        "summary_version": 1,
        **group(mean, total),
        "failures": {"hole": failed},
        "failure_rates": {},
        "by_size": {str(side): group(rate, episodes) for side, rate in rates.items()},
        "by_agents": {"2": group(mean, total)},
        "by_agents_size": {f"2x{side}": group(rate, episodes) for side, rate in rates.items()},
        "fail_steps": {},
        "fail_cells": {},
        "instance_stats": {"failed": stats(failed), "succeeded": stats(total - failed)},
        "reward": {"mean": 0.0, "std": 0.0},
        "completion_tokens_mean": 0.0,
        "exemplars": [],
        **extra,
    })


def _propose(spec: str, rates: dict[int, float], config: StageConfig = CONFIG, sections=None, **options):
    context = build_context(summary_with(rates), config, [], sections=sections)
    return make_engineer(spec, **options).propose(context, config, seed=1)


def test_engineers_that_move_data_holes_or_waits_keep_the_makespan_bounds_a_config_has():
    bounded = StageConfig.from_dict({**CONFIG.to_dict(), "sizes": {
        str(side): {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3, "min_makespan": side - 2,
                    "max_makespan": side + 1} for side in (3, 4, 5, 6)}})
    for spec in ("rule", "learnability"):
        decision = _propose(spec, {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}, config=bounded)
        assert decision.diff, spec  # the engineer moved something
        assert all(size.makespan_bounds() == (side - 2, side + 1) for side, size in decision.config.sizes.items())


# --- learnability --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rates, expected", [
    # solved, mid, mid, hopeless: the floor (0.05) each, the rest (0.8) by p(1-p) = 0, 0.25, 0.25, 0
    ({3: 1.0, 4: 0.5, 5: 0.5, 6: 0.0}, [0.05, 0.45, 0.45, 0.05]),
    # p(1-p) = 0.09, 0.21, 0.25, 0.21 (sum 0.76): 0.05 + 0.8 * score / 0.76; the largest absorbs the rounding
    ({3: 0.9, 4: 0.7, 5: 0.5, 6: 0.3}, [0.1447, 0.2711, 0.3131, 0.2711]),
    # equal rates: equal weights, whatever the rate
    ({3: 0.2, 4: 0.2, 5: 0.8, 6: 0.8}, [0.25, 0.25, 0.25, 0.25]),
])
def test_learnability__weights_follow_p_times_one_minus_p_above_the_floor(rates, expected):
    decision = _propose("learnability", rates)
    sizes = decision.config.sizes
    assert [sizes[side].data_ratio for side in (3, 4, 5, 6)] == expected
    assert all(sizes[side].hole_ratio == 0.2 and sizes[side].wait_ratio == 0.3 for side in sizes)  # weights only
    assert (decision.config.samples, decision.config.seed, decision.config.agents) == (400, 3, 2)


def test_learnability__all_solved_or_hopeless_or_no_evidence_moves_nothing():
    for rates in ({3: 1.0, 4: 1.0, 5: 0.0, 6: 0.0}, {3: 0.0, 4: 0.0, 5: 0.0, 6: 0.0}):
        decision = _propose("learnability", rates)
        assert decision.diff == [] and "solved or hopeless" in decision.rationale
    assert _propose("learnability", {3: 0.9, 4: 0.5}, min_episodes=50).diff == []
    no_behavior = _propose("learnability", {3: 0.9, 4: 0.5}, sections=("failures",))
    assert no_behavior.diff == [] and "no behavior" in no_behavior.reason


def test_learnability__sizes_without_evidence_keep_their_weight_and_smoothing_keeps_part_of_the_old():
    config = StageConfig.from_dict({"agents": 2, "samples": 100, "sizes": {
        3: {"data_ratio": 0.4, "hole_ratio": 0.1, "wait_ratio": 0.2},
        4: {"data_ratio": 0.4, "hole_ratio": 0.1, "wait_ratio": 0.2},
        5: {"data_ratio": 0.2, "hole_ratio": 0.1, "wait_ratio": 0.2}}})
    # size 5 has no validation episodes: it keeps 0.2; sizes 3 and 4 share their 0.8 (floor 0 here)
    sizes = _propose("learnability", {3: 0.5, 4: 0.9}, config, floor=0.0).config.sizes
    assert [sizes[side].data_ratio for side in (3, 4, 5)] == [round(0.8 * 0.25 / 0.34, 4), round(0.8 * 0.09 / 0.34, 4), 0.2]
    smooth = _propose("learnability", {3: 0.5, 4: 0.9}, config, floor=0.0, smoothing=0.5).config.sizes
    assert smooth[3].data_ratio == round(0.5 * 0.4 + 0.5 * 0.8 * 0.25 / 0.34, 4)


def test_learnability__decisions_are_always_valid_configs_and_bad_options_are_config_errors():
    for rates in ({3: 0.0}, {3: 1.0, 4: 0.001}, {3: 0.5, 4: 0.5, 5: 0.5, 6: 0.5}):
        config = _propose("learnability", rates).config
        assert StageConfig.from_dict(config.to_dict()) == config
        assert all(spec.data_ratio > 0 for spec in config.sizes.values())  # no used size drops out
    for option, value in (("floor", 1.5), ("smoothing", 1.0), ("min_episodes", -1), ("metric", "reward")):
        with pytest.raises(ConfigError, match=f"learnability.{option}"):
            make_engineer("learnability", **{option: value})


# --- mutate -------------------------------------------------------------------------------------------------
def test_mutate__only_sizes_in_the_learnable_band_get_one_edit():
    rates = {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}  # solved, mid, mid, hopeless
    decision = _propose("mutate", rates)
    before, after = CONFIG.sizes, decision.config.sizes
    assert after[3] == before[3] and after[6].hole_ratio == before[6].hole_ratio  # solved and hopeless: untouched
    for side in (4, 5):
        line = next(line for line in decision.rationale.splitlines() if line.startswith(f"size {side}:"))
        edit = line.split("]: ")[1].split(",")[0]
        assert edit in ("holes", "waits", "bigger")
        if edit == "holes":
            assert after[side].hole_ratio == round(before[side].hole_ratio + 0.05, 4)
        elif edit == "waits":
            assert after[side].wait_ratio == round(before[side].wait_ratio + 0.1, 4)
        else:
            assert after[side].data_ratio < before[side].data_ratio and after[side + 1].data_ratio > 0
    assert decision.config == _propose("mutate", rates).config  # same evidence and seed, same config
    assert (decision.config.samples, decision.config.seed, decision.config.agents) == (400, 3, 2)


def test_mutate__bigger_adds_the_next_side_and_every_decision_is_a_valid_config():
    lone = StageConfig.from_dict({"agents": 2, "samples": 50, "sizes": {
        5: {"data_ratio": 1.0, "hole_ratio": 0.5, "wait_ratio": 1.0}}})  # holes and waits at their caps
    sizes = _propose("mutate", {5: 0.5}, lone).config.sizes
    assert sizes[5].data_ratio == 0.5 and sizes[6] == SizeSpec(0.5, 0.5, 1.0)
    for seed in range(30):
        context = build_context(summary_with({3: 0.5, 4: 0.3, 5: 0.7, 6: 0.2}), CONFIG, [])
        config = make_engineer("mutate").propose(context, CONFIG, seed=seed).config
        assert StageConfig.from_dict(config.to_dict()) == config
    assert len({make_engineer("mutate").propose(build_context(summary_with({3: 0.5, 4: 0.5, 5: 0.5, 6: 0.5}), CONFIG, []),
                                                CONFIG, seed=seed).config for seed in range(10)}) > 1  # seeded


def test_mutate__nothing_in_the_band_or_no_evidence_moves_nothing_and_bad_options_are_config_errors():
    assert _propose("mutate", {3: 1.0, 4: 0.9, 5: 0.1, 6: 0.0}).diff == []
    assert _propose("mutate", {3: 0.5, 4: 0.5}, min_episodes=50).diff == []
    assert _propose("mutate", {3: 0.5}, sections=("failures",)).diff == []
    for option, value in (("low", 2.0), ("grow", -0.1), ("max_hole_ratio", 0.95), ("metric", "x")):
        with pytest.raises(ConfigError, match=f"mutate.{option}"):
            make_engineer("mutate", **{option: value})


# --- the decision's outcome ---------------------------------------------------------------------------------
def test_decision_outcome__changed_kept_or_rejected_in_the_record_and_the_text():
    changed = _propose("rule", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05})
    kept = _propose("rule", {3: 1.0, 4: 1.0, 5: 0.0, 6: 0.0}, hole_step=0.0, wait_step=0.0)
    rejected = make_engineer("random", sides=[3]).propose(build_context(summary_with({3: 0.5}), CONFIG.__class__.from_dict(
        {"agents": 10, "samples": 10, "sizes": {4: {"data_ratio": 1.0, "hole_ratio": 0.0, "wait_ratio": 0.3}}}), []),
        StageConfig.from_dict({"agents": 10, "samples": 10,
                               "sizes": {4: {"data_ratio": 1.0, "hole_ratio": 0.0, "wait_ratio": 0.3}}}))
    assert [d.outcome for d in (changed, kept, rejected)] == ["changed", "kept", "rejected"]
    assert [d.to_dict()["outcome"] for d in (changed, kept, rejected)] == ["changed", "kept", "rejected"]
    assert kept.accepted and "decision: kept the config (nothing to change)" in kept.render()
    assert "decision: rejected, kept the previous config" in rejected.render()


# --- bandit -------------------------------------------------------------------------------------------------
def _signal_context(signal: dict[int, tuple[int, float]], config: StageConfig = CONFIG, sections=None):
    """A context whose env_stats carry a training signal: {side: (groups, mean |advantage|)}."""
    by_size = {str(side): {"groups": g, "reward_mean": 0.5, "valid_rate": 0.5, "zero_variance_share": 0.0,
                           "abs_advantage_mean": a} for side, (g, a) in signal.items()}
    summary = summary_with({side: 0.5 for side in config.sizes}, training_signal={"by_size": by_size})
    return build_context(summary, config, [], sections=sections)


def test_bandit__values_follow_the_signal_and_the_weights_are_a_softmax_above_the_floor():
    from engineer.bandit import softmax_shares

    bandit = make_engineer("bandit", temperature=0.2, step_size=0.5, floor=0.05)
    # solved (no advantage), two learnable sizes, hopeless (no advantage)
    first = bandit.propose(_signal_context({3: (8, 0.0), 4: (8, 0.8), 5: (8, 0.6), 6: (8, 0.0)}), CONFIG)
    assert first.details["state"] == {"values": {"3": 0.0, "4": 0.8, "5": 0.6, "6": 0.0},
                                      "counts": {"3": 8, "4": 8, "5": 8, "6": 8}}
    expected = softmax_shares({3: 0.0, 4: 0.8, 5: 0.6, 6: 0.0}, 0.2, 0.05)
    shares = {side: spec.data_ratio for side, spec in first.config.sizes.items()}
    assert shares == pytest.approx(expected, abs=2e-4) and math.fsum(shares.values()) == 1.0  # 4 decimals, the largest absorbs
    assert shares[4] > shares[5] > shares[3] == shares[6] >= 0.05
    assert all(spec.hole_ratio == 0.2 and spec.wait_ratio == 0.3 for spec in first.config.sizes.values())
    # next stage: size 4 got solved (its advantage fell to 0), 6 untrained keeps its value
    bandit.propose(_signal_context({3: (2, 0.0), 4: (10, 0.0), 5: (8, 1.0)}), first.config)
    assert bandit.state()["values"] == {"3": 0.0, "4": 0.4, "5": 0.8, "6": 0.0}
    assert bandit.state()["counts"] == {"3": 10, "4": 18, "5": 16, "6": 8}


def test_bandit__state_from_the_previous_decision_continues_the_same_bandit():
    one = make_engineer("bandit")
    context_a = _signal_context({3: (8, 0.2), 4: (8, 0.9)})
    context_b = _signal_context({3: (8, 0.7), 4: (8, 0.1)})
    one.propose(context_a, CONFIG)
    straight = one.propose(context_b, CONFIG)
    resumed = make_engineer("bandit")
    resumed.load_state(make_engineer("bandit").propose(context_a, CONFIG).to_dict()["details"]["state"])
    again = resumed.propose(context_b, CONFIG)
    assert again.config == straight.config and again.details == straight.details


def test_bandit__no_signal_moves_nothing_and_bad_options_or_state_are_config_errors():
    assert make_engineer("bandit").propose(_signal_context({}), CONFIG).diff == []
    hidden = make_engineer("bandit").propose(_signal_context({3: (8, 0.9)}, sections=("behavior",)), CONFIG)
    assert hidden.diff == [] and "no training signal" in hidden.rationale  # the env_stats ablation hides it
    lone = make_engineer("bandit").propose(_signal_context({4: (8, 0.9)}), CONFIG)
    assert lone.config.sizes[4].data_ratio == 0.25  # every arm at the one valued arm's level: equal shares
    for option, value in (("temperature", 0.0), ("step_size", 0.0), ("floor", 2.0)):
        with pytest.raises(ConfigError, match=f"bandit.{option}"):
            make_engineer("bandit", **{option: value})
    with pytest.raises(ConfigError, match="bandit state"):
        make_engineer("bandit").load_state({"values": {"x": "y"}})



# --- progress -----------------------------------------------------------------------------------------------
def _rounds_context(rounds: list[dict[int, float]], config: StageConfig = CONFIG, sections=None):
    """A context whose training signal has sampling rounds: [{side: sampled valid rate}] (the stage's totals are
    the last round's)."""
    def figures(rate: float) -> dict:
        return {"groups": 8, "reward_mean": rate, "valid_rate": rate, "zero_variance_share": 0.0,
                "abs_advantage_mean": 0.5}

    signal = {"by_size": {str(side): figures(rate) for side, rate in rounds[-1].items()}, "trainer": "rft",
              "rounds": [{str(side): figures(rate) for side, rate in by_size.items()} for by_size in rounds]}
    summary = summary_with({side: 0.5 for side in config.sizes}, training_signal=signal)
    return build_context(summary, config, [], sections=sections)


def test_progress__weights_follow_the_absolute_change_of_each_sizes_sampled_rate():
    progress = make_engineer("progress", step_size=0.5, floor=0.1, scale="absolute")
    # round to round: 3x3 +0.00, 4x4 +0.10, 5x5 +0.30, 6x6 -0.10 (forgetting counts as progress too)
    first = progress.propose(_rounds_context([{3: 0.8, 4: 0.4, 5: 0.1, 6: 0.3}, {3: 0.8, 4: 0.5, 5: 0.4, 6: 0.2}]),
                             CONFIG)
    values = first.details["state"]["values"]
    assert values == pytest.approx({"3": 0.0, "4": 0.1, "5": 0.3, "6": 0.1})
    assert first.details["state"]["rates"] == {"3": 0.8, "4": 0.5, "5": 0.4, "6": 0.2}
    # floor 0.1 each, the other 0.6 in proportion to 0, 0.1, 0.3, 0.1 (sum 0.5)
    shares = {side: spec.data_ratio for side, spec in first.config.sizes.items()}
    assert shares == pytest.approx({3: 0.1, 4: 0.22, 5: 0.46, 6: 0.22}, abs=1e-4) and math.fsum(shares.values()) == 1.0
    assert all(spec.hole_ratio == 0.2 and spec.wait_ratio == 0.3 for spec in first.config.sizes.values())
    assert "sampled valid 40.0% -> 50.0%" in first.rationale
    # the next stage's first round continues each series: 5x5 0.4 -> 0.4 (0) -> 0.5 (0.1)
    progress.propose(_rounds_context([{3: 0.8, 4: 0.5, 5: 0.4}, {3: 0.8, 4: 0.7, 5: 0.5}]), first.config)
    assert progress.state()["values"] == pytest.approx({"3": 0.0, "4": 0.125, "5": 0.125, "6": 0.1})


def test_progress__reads_one_rate_per_stage_without_rounds_and_resumes_from_its_state():
    def stage_context(rates: dict[int, float]):
        by_size = {str(side): {"groups": 8, "reward_mean": r, "valid_rate": r, "zero_variance_share": 0.0,
                               "abs_advantage_mean": 0.5} for side, r in rates.items()}
        return build_context(summary_with({side: 0.5 for side in CONFIG.sizes}, training_signal={"by_size": by_size}),
                             CONFIG, [])

    one = make_engineer("progress", scale="absolute")
    first = one.propose(stage_context({3: 0.5, 4: 0.2}), CONFIG)  # one rate per size: nothing measured yet
    assert first.diff == [] and first.details["state"] == {"values": {}, "rates": {"3": 0.5, "4": 0.2}}
    straight = one.propose(stage_context({3: 0.5, 4: 0.4}), CONFIG)
    assert straight.details["state"]["values"] == {"3": 0.0, "4": pytest.approx(0.2)}
    resumed = make_engineer("progress", scale="absolute")
    resumed.load_state(first.to_dict()["details"]["state"])
    again = resumed.propose(stage_context({3: 0.5, 4: 0.4}), CONFIG)
    assert again.config == straight.config and again.details == straight.details
    # sizes never valued (5, 6) get the mean of the valued ones (0.1): floor 0.1 + 0.6 * value / 0.4
    assert {side: spec.data_ratio for side, spec in straight.config.sizes.items()} == \
        pytest.approx({3: 0.1, 4: 0.4, 5: 0.25, 6: 0.25}, abs=1e-4)


def test_progress__the_default_log_odds_scale_values_a_rare_skill_s_progress_apart_from_its_rate():
    import math as m

    # both sizes gain 0.1 of rate; on the log-odds scale the size at 10% -> 20% moves more than 50% -> 60%
    first = make_engineer("progress", floor=0.1).propose(
        _rounds_context([{3: 0.5, 4: 0.1, 5: 0.0}, {3: 0.6, 4: 0.2, 5: 0.001}]), CONFIG)
    values = first.details["state"]["values"]
    logit = lambda p: m.log(p / (1 - p))  # noqa: E731
    assert values["3"] == pytest.approx(logit(0.6)) and values["4"] == pytest.approx(logit(0.2) - logit(0.1))
    assert values["5"] == 0.0  # 0% and 0.1% are both clipped to 1%: no movement
    shares = {side: spec.data_ratio for side, spec in first.config.sizes.items()}
    assert shares[4] > shares[3] > shares[5] == 0.1 and "progress (logit)" in first.rationale
    with pytest.raises(ConfigError, match="progress.scale"):
        make_engineer("progress", scale="log")


def test_progress__no_movement_or_no_signal_moves_nothing_and_bad_options_or_state_are_config_errors():
    still = make_engineer("progress").propose(_rounds_context([{3: 0.5, 4: 0.2}, {3: 0.5, 4: 0.2}]), CONFIG)
    assert still.diff == [] and "moved" in still.rationale
    hidden = make_engineer("progress").propose(
        _rounds_context([{3: 0.5}, {3: 0.9}], sections=("behavior",)), CONFIG)
    assert hidden.diff == [] and "no sampled rate" in hidden.rationale  # the env_stats ablation hides the signal
    for option, value in (("step_size", 0.0), ("floor", 2.0), ("floor", True)):
        with pytest.raises(ConfigError, match=f"progress.{option}"):
            make_engineer("progress", **{option: value})
    with pytest.raises(ConfigError, match="progress state"):
        make_engineer("progress").load_state({"rates": {"3": "high"}})


# --- gap -----------------------------------------------------------------------------------------------------
def _wait_context(split: dict[int, tuple[float, float, int]], config: StageConfig = CONFIG, sections=None,
                  rounds: list[dict[int, float]] | None = None,
                  lengths: dict[int, dict[int, tuple[float, int]]] | None = None):
    """A context whose validation split is {side: (rate when a wait is needed, rate otherwise, episodes of each)},
    with the training rounds' sampled valid rates [{side: rate}] and the split by optimal makespan
    {side: {makespan: (rate, episodes)}} when given."""
    def group(rate: float, n: int) -> dict:
        valid = round(rate * n)
        return {"episodes": n, "valid": valid, "optimal": valid, "valid_rate": rate, "optimal_rate": rate,
                "failures": {"hole": n - valid}}

    by_size_wait = {}
    for side, (waits, others, n) in split.items():
        by_size_wait[f"{side}:needs_wait"] = group(waits, n)
        by_size_wait[f"{side}:no_wait"] = group(others, n)
    extra = {}
    if lengths:
        extra["by_size_makespan"] = {f"{side}:{makespan}": group(rate, n) for side, cells in lengths.items()
                                     for makespan, (rate, n) in cells.items()}
    if rounds:
        def figures(rate: float) -> dict:
            return {"groups": 8, "reward_mean": rate, "valid_rate": rate, "zero_variance_share": 0.0,
                    "abs_advantage_mean": 0.5}

        extra["training_signal"] = {
            "by_size": {str(side): figures(rate) for side, rate in rounds[-1].items()}, "trainer": "rft",
            "rounds": [{str(side): figures(rate) for side, rate in by_size.items()} for by_size in rounds]}
    summary = summary_with({side: 0.3 for side in config.sizes}, by_size_wait=by_size_wait, by_wait={}, **extra)
    return build_context(summary, config, [], sections=sections)


def test_gap__the_smallest_size_teaches_waiting_on_open_maps_while_a_size_has_a_gap_then_gets_its_settings_back():
    gap = make_engineer("gap")  # ratio 0.5, lesson holes 0, lesson wait 1, 10 episodes of each kind
    first = gap.propose(_wait_context({3: (0.3, 0.5, 30), 4: (0.0, 0.6, 30), 5: (0.0, 0.0, 30), 6: (0.0, 0.4, 9)}),
                        CONFIG)
    # 3x3: no gap (0.3 >= 0.5 x 0.5); 4x4: a gap; 5x5: nothing solved; 6x6: too few episodes
    sizes = first.config.sizes
    assert (sizes[3].hole_ratio, sizes[3].wait_ratio) == (0.0, 1.0)  # the smallest size is the lesson
    assert all((sizes[side].hole_ratio, sizes[side].wait_ratio) == (0.2, 0.3) for side in (4, 5, 6))
    assert all(spec.data_ratio == 0.25 for spec in sizes.values()) and first.accepted
    assert first.details["state"]["start"]["3"] == {"hole_ratio": 0.2, "wait_ratio": 0.3}
    assert "size 4: valid_rate 0.0% when a wait is needed, 60.0% otherwise: a gap" in first.rationale
    assert "size 5" in first.rationale and "nothing solved" in first.rationale
    # still a gap at 4x4: the lesson stays; no gap anywhere: the lesson size gets its start settings back, also
    # after a resume
    assert gap.propose(_wait_context({3: (0.5, 0.6, 30), 4: (0.1, 0.6, 30)}), first.config).diff == []
    resumed = make_engineer("gap")
    resumed.load_state(first.to_dict()["details"]["state"])
    done = resumed.propose(_wait_context({3: (0.5, 0.6, 30), 4: (0.4, 0.6, 30)}), first.config)
    assert done.config == CONFIG and "gets back its start settings" in done.rationale
    other = make_engineer("gap", lesson_holes=0.1, lesson_wait=0.8).propose(_wait_context({4: (0.0, 0.6, 30)}), CONFIG)
    assert (other.config.sizes[3].hole_ratio, other.config.sizes[3].wait_ratio) == (0.1, 0.8)
    hopeless = make_engineer("gap").propose(_wait_context({3: (0.0, 0.0, 30), 4: (0.0, 0.0, 30)}), CONFIG)
    assert hopeless.diff == [] and "no size with evidence" in hopeless.rationale


def test_gap__with_a_hole_step_the_lesson_moves_toward_the_holed_maps_once_its_last_round_reaches_advance():
    gap = make_engineer("gap", hole_step=0.1, advance=0.3)
    split = {3: (0.0, 0.5, 30), 4: (0.0, 0.6, 30)}
    first = gap.propose(_wait_context(split, rounds=[{3: 0.9}]), CONFIG)  # no lesson yet: it starts open
    assert first.config.sizes[3].hole_ratio == 0.0 and first.details["state"]["lesson"] == 0.0
    # the lesson's last round below advance: it stays; no round recorded: it stays
    below = gap.propose(_wait_context(split, rounds=[{3: 0.5, 4: 0.1}, {3: 0.29, 4: 0.1}]), first.config)
    assert below.diff == [] and "below 30%" in below.rationale
    assert gap.propose(_wait_context(split), first.config).diff == []
    # the last round (not the best one) reached advance: holes 0 -> 0.1 -> 0.2, never above the start's 0.2
    second = gap.propose(_wait_context(split, rounds=[{3: 0.1}, {3: 0.3}]), first.config)
    assert (second.config.sizes[3].hole_ratio, second.config.sizes[3].wait_ratio) == (0.1, 1.0)
    assert "moves from holes 0 to 0.1" in second.rationale and second.details["state"]["lesson"] == 0.1
    resumed = make_engineer("gap", hole_step=0.1, advance=0.3)
    resumed.load_state(second.details["state"])
    third = resumed.propose(_wait_context(split, rounds=[{3: 0.4}]), second.config)
    assert third.config.sizes[3].hole_ratio == 0.2
    assert resumed.propose(_wait_context(split, rounds=[{3: 0.6}]), third.config).diff == []
    # no gap: the start settings come back and the next gap starts a fresh lesson on the open map
    done = resumed.propose(_wait_context({3: (0.4, 0.5, 30), 4: (0.5, 0.6, 30)}), third.config)
    assert done.config == CONFIG and done.details["state"]["lesson"] is None
    again = resumed.propose(_wait_context(split, rounds=[{3: 0.9}]), done.config)
    assert again.config.sizes[3].hole_ratio == 0.0
    # without a hole step (the default) the lesson stays open whatever its rounds
    open_only = make_engineer("gap")
    lesson = open_only.propose(_wait_context(split), CONFIG)
    assert open_only.propose(_wait_context(split, rounds=[{3: 0.9}]), lesson.config).diff == []


def test_gap__the_drop_remedy_trains_each_size_with_a_gap_without_waits_until_its_gap_closes():
    gap = make_engineer("gap", remedy="drop")
    first = gap.propose(_wait_context({3: (0.3, 0.5, 30), 4: (0.0, 0.6, 30), 5: (0.0, 0.0, 30), 6: (0.0, 0.4, 9)}),
                        CONFIG)
    # 4x4 has a gap; 3x3 none; 5x5 solved nothing and 6x6 has too few episodes: no evidence, kept
    sizes = first.config.sizes
    assert {side: (spec.hole_ratio, spec.wait_ratio) for side, spec in sizes.items()} == {
        3: (0.2, 0.3), 4: (0.2, 0.0), 5: (0.2, 0.3), 6: (0.2, 0.3)}
    assert all(spec.data_ratio == 0.25 for spec in sizes.values()) and first.accepted
    assert "4x4: wait ratio 0.3 -> 0" in first.rationale and first.details["state"]["lesson"] is None
    # every size with a gap: no waits anywhere; a resumed engineer still knows the start ratios
    everywhere = {side: (0.0, 0.5, 30) for side in (3, 4, 5, 6)}
    second = gap.propose(_wait_context(everywhere), first.config)
    assert all(spec.wait_ratio == 0.0 and spec.hole_ratio == 0.2 for spec in second.config.sizes.values())
    resumed = make_engineer("gap", remedy="drop")
    resumed.load_state(second.details["state"])
    assert resumed.propose(_wait_context(everywhere), second.config).diff == []
    closed = resumed.propose(_wait_context({3: (0.4, 0.5, 30), 4: (0.0, 0.5, 30)}), second.config)
    assert closed.config.sizes[3].wait_ratio == 0.3 and closed.config.sizes[4].wait_ratio == 0.0
    assert "its gap has closed" in closed.rationale
    with pytest.raises(ConfigError, match="gap.remedy"):
        make_engineer("gap", remedy="skip")


def test_gap__weigh_yield_moves_data_by_one_over_the_sampled_rate_with_a_floor_and_nothing_below_reach():
    gap = make_engineer("gap", remedy="drop", weigh="yield", reach=0.05, floor=0.1)
    split = {3: (0.0, 0.6, 30), 4: (0.3, 0.4, 30), 5: (0.0, 0.1, 30), 6: (0.0, 0.0, 30)}
    # before any round: the validation rate on what each size will train on; 3x3 and 5x5 have a gap and train
    # without waits (0.6, 0.1); 4x4 keeps waits 0.3: 0.3 x 0.3 + 0.7 x 0.4 = 0.37; 6x6 solves nothing (no evidence
    # of a gap, so its waits stay) and has the yield 0
    first = gap.propose(_wait_context(split), CONFIG)
    scores = {3: 1 / 0.6, 4: 1 / 0.37, 5: 1 / 0.1, 6: 0.0}  # 6x6 below reach: the floor only
    total = sum(scores.values())
    expected = {side: round(0.1 + 0.6 * score / total, 4) for side, score in scores.items()}
    shares = {side: spec.data_ratio for side, spec in first.config.sizes.items()}
    assert shares == pytest.approx(expected, abs=2e-4) and sum(shares.values()) == pytest.approx(1.0)
    assert shares[5] > shares[4] > shares[3] > shares[6] == 0.1
    assert [first.config.sizes[side].wait_ratio for side in (3, 4, 5, 6)] == [0.0, 0.3, 0.0, 0.3]
    # a size with too few validation episodes has no yield and keeps its data ratio; the others share the rest
    unseen = gap.propose(_wait_context({side: split[side] for side in (3, 4, 5)}), CONFIG)
    assert unseen.config.sizes[6].data_ratio == 0.25
    scores = {3: 1 / 0.6, 4: 1 / 0.37, 5: 1 / 0.1}
    assert {side: unseen.config.sizes[side].data_ratio for side in scores} == pytest.approx(
        {side: 0.75 * (0.1 + 0.7 * score / sum(scores.values())) for side, score in scores.items()}, abs=2e-4)
    assert "size 4: no round yet, validation 37.0% at wait ratio 0.3" in first.rationale
    # after a stage: the last round's sampled rates, not the validation ones (the best round does not count)
    after = gap.propose(_wait_context(split, rounds=[{3: 0.9, 4: 0.9, 5: 0.9, 6: 0.9},
                                                     {3: 0.5, 4: 0.5, 5: 0.25, 6: 0.25}]), first.config)
    shares = {side: spec.data_ratio for side, spec in after.config.sizes.items()}
    assert shares == pytest.approx({3: 0.2, 4: 0.2, 5: 0.3, 6: 0.3}, abs=2e-4)  # 0.1 + 0.6 x (2, 2, 4, 4) / 12
    assert "size 5: the last round's samples solved 25.0%" in after.rationale
    # no size's yield reaches reach: the data ratios stay; the default (keep) never moves them
    low = make_engineer("gap", remedy="drop", weigh="yield", reach=0.7).propose(_wait_context(split), CONFIG)
    assert all(spec.data_ratio == 0.25 for spec in low.config.sizes.values()) and "reaches 70%" in low.rationale
    kept = make_engineer("gap", remedy="drop").propose(_wait_context(split), CONFIG)
    assert all(spec.data_ratio == 0.25 for spec in kept.config.sizes.values())
    # with the lesson remedy the lesson is decided first, then the weights
    lesson = make_engineer("gap", weigh="yield").propose(_wait_context(split), CONFIG)
    assert (lesson.config.sizes[3].hole_ratio, lesson.config.sizes[3].wait_ratio) == (0.0, 1.0)
    assert lesson.config.sizes[6].data_ratio == 0.1
    for option, value in (("weigh", "even"), ("reach", 1.5), ("floor", -0.1)):
        with pytest.raises(ConfigError, match=f"gap.{option}"):
            make_engineer("gap", **{option: value})


def test_gap__without_the_split_or_with_one_agent_nothing_moves_and_bad_options_or_state_are_config_errors():
    old = make_engineer("gap").propose(build_context(summary_with({3: 0.5}), CONFIG, []), CONFIG)
    assert old.diff == [] and "no validation split" in old.rationale  # a summary written before the split
    hidden = make_engineer("gap").propose(_wait_context({3: (0.0, 0.6, 30)}, sections=("failures",)), CONFIG)
    assert hidden.diff == []  # the behavior ablation hides the evidence
    alone = StageConfig.from_dict({"agents": 1, "samples": 10, "sizes": {
        3: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    single = make_engineer("gap").propose(_wait_context({3: (0.0, 0.6, 30)}, config=alone), alone)
    assert single.diff == [] and "nothing ever waits" in single.rationale
    for option, value in (("ratio", 1.5), ("lesson_holes", 0.95), ("lesson_wait", True), ("min_episodes", 2.5),
                          ("hole_step", -0.1), ("advance", 1.5)):
        with pytest.raises(ConfigError, match=f"gap.{option}"):
            make_engineer("gap", **{option: value})
    with pytest.raises(ConfigError, match="gap state"):
        make_engineer("gap").load_state({"start": {"3": {"hole_ratio": "low", "wait_ratio": 0.3}}})
    with pytest.raises(ConfigError, match="gap state"):
        make_engineer("gap").load_state({"start": {}, "lesson": "open"})


def test_length_band__from_the_shortest_unsolved_to_the_longest_reached_makespan_with_enough_episodes():
    def group(rate: float, n: int) -> GroupStats:
        return GroupStats(n, round(rate * n), round(rate * n), rate, rate, {})

    def table(cells: dict[int, tuple[float, int]]) -> dict:
        return {(4, m): group(rate, n) for m, (rate, n) in cells.items()}

    rows = [  # (cells {makespan: (rate, episodes)}, band)
        ({1: (1.0, 10), 2: (0.9, 10), 3: (0.5, 10), 4: (0.1, 10), 5: (0.0, 10)}, (3, 4)),
        ({1: (0.9, 10), 2: (0.6, 3), 3: (0.3, 10), 4: (0.04, 10), 5: (0.2, 4)}, (3, 3)),  # 2 and 5: too few
        ({1: (1.0, 10), 2: (0.85, 10), 3: (0.0, 10)}, (2, 2)),  # every reached makespan solved: the longest
        ({2: (0.5, 10), 1: (0.7, 10), 6: (0.06, 5)}, (1, 6)),  # a reached makespan beyond a gap counts
        ({1: (0.04, 10), 2: (0.0, 10)}, None),  # nothing reaches 5%
        ({}, None),
    ]
    for cells, band in rows:
        assert length_band(table(cells), 4, min_episodes=5, reach=0.05, solved=0.8) == band, cells
    others = {(5, 3): group(0.5, 9), (4, 2): group(0.5, 0)}  # another side's cell, an empty cell
    assert length_band(others, 4, min_episodes=5, reach=0.05, solved=0.8) is None


def test_gap__lengths_frontier_bands_each_size_without_waits_and_clears_the_bands_it_cannot_set():
    gap = make_engineer("gap", remedy="drop", lengths="frontier")
    split = {3: (0.0, 0.6, 30), 4: (0.0, 0.5, 30), 5: (0.0, 0.1, 30), 6: (0.3, 0.4, 30)}
    lengths = {3: {1: (1.0, 10), 2: (0.9, 10), 3: (0.5, 10), 4: (0.1, 10), 5: (0.0, 10)},
               4: {1: (0.9, 10), 2: (0.6, 3), 3: (0.3, 10), 4: (0.04, 10)},
               5: {3: (0.0, 10), 4: (0.0, 10)},
               6: {1: (1.0, 10), 2: (0.5, 10)}}
    start = StageConfig.from_dict({**CONFIG.to_dict(), "sizes": {
        **CONFIG.to_dict()["sizes"], "5": {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3,
                                           "min_makespan": 2, "max_makespan": 3}}})
    decision = gap.propose(_wait_context(split, lengths=lengths, config=start), start)
    sizes = decision.config.sizes
    # 3x3, 4x4, 5x5 have a gap and train without waits; 6x6 has none and keeps its waits (no band with waits);
    # 5x5 solves no makespan: the band it had is cleared
    assert {side: (spec.wait_ratio, spec.min_makespan, spec.max_makespan) for side, spec in sizes.items()} == {
        3: (0.0, 3, 4), 4: (0.0, 3, 3), 5: (0.0, None, None), 6: (0.3, None, None)}
    assert all(spec.data_ratio == 0.25 and spec.hole_ratio == 0.2 for spec in sizes.values())
    assert "3x3: plans of makespan 3..4" in decision.rationale and "6x6 trains with waits" in decision.rationale
    assert "sizes.3.min_makespan: null -> 3" in decision.diff and "sizes.5.max_makespan: 3 -> null" in decision.diff
    # the default keeps the bounds a config has, through the drop remedy's changes too
    kept = make_engineer("gap", remedy="drop").propose(_wait_context(split, lengths=lengths, config=start), start)
    assert (kept.config.sizes[5].min_makespan, kept.config.sizes[5].max_makespan) == (2, 3)
    assert kept.config.sizes[5].wait_ratio == 0.0
    # a summary without the split by makespan: the bounds stay
    older = make_engineer("gap", remedy="drop", lengths="frontier").propose(_wait_context(split, config=start), start)
    assert older.config.sizes[5].max_makespan == 3 and "lengths stay" in older.rationale
    for option, value in (("lengths", "short"), ("solved", 1.5), ("min_length_episodes", -1)):
        with pytest.raises(ConfigError, match=f"gap.{option}"):
            make_engineer("gap", **{option: value})


# --- window (RLVE) and target (AdaRFT): makespan bands ------------------------------------------------------------
def _one_size(side: int, wait: float = 0.0, **bounds) -> StageConfig:
    return StageConfig.from_dict({"agents": 2, "samples": 400, "seed": 3, "sizes": {
        side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": wait, **bounds}}})


def _length_context(config: StageConfig, cells: dict[int, dict[int, tuple[float, int]]], signal=None,
                    sections=None, rates=None):
    """A context whose evidence has, per size, ``{makespan: (valid rate, episodes)}`` (``signal``: the stage's
    sampled valid rate per size, as its training signal; ``rates``: each size's own rate, 0.5 by default)."""
    def group(rate: float, n: int) -> dict:
        valid = round(rate * n)
        return {"episodes": n, "valid": valid, "optimal": valid, "valid_rate": rate, "optimal_rate": rate,
                "failures": {"hole": n - valid}}

    extra = {"by_size_makespan": {f"{side}:{makespan}": group(rate, n) for side, levels in cells.items()
                                  for makespan, (rate, n) in levels.items()}}
    if signal:
        extra["training_signal"] = {"by_size": {str(side): {
            "groups": 8, "reward_mean": rate, "valid_rate": rate, "zero_variance_share": 0.0,
            "abs_advantage_mean": 0.5} for side, rate in signal.items()}}
    rates = rates or {side: 0.5 for side in config.sizes}
    return build_context(summary_with(rates, **extra), config, [], sections=sections)


@pytest.mark.parametrize("levels, bounds, window", [
    # levels 1 and 2 mastered (>= 90% over 8+), 3 not: from the start window 1..1 the top rises twice
    ({1: (0.95, 10), 2: (0.92, 10), 3: (0.5, 10), 4: (0.1, 10)}, {}, (1, 3)),
    # the config's window 2..3: its top (3) is not mastered, nothing moves
    ({1: (0.95, 10), 2: (0.92, 10), 3: (0.5, 10), 4: (0.1, 10)}, {"min_makespan": 2, "max_makespan": 3}, (2, 3)),
    # 2 and 3 mastered: the top rises to 4 and the lower bound follows at 4 - 3 + 1
    ({1: (0.95, 10), 2: (0.95, 10), 3: (0.95, 10), 4: (0.5, 10)}, {"min_makespan": 1, "max_makespan": 2}, (2, 4)),
    # mastered but on fewer than 8 episodes: the top stays
    ({1: (1.0, 5), 2: (0.5, 10)}, {}, (1, 1)),
    # mastered, but the evidence never saw the next level: the top stays
    ({1: (1.0, 10)}, {}, (1, 1)),
    # a window never moves down, however badly its levels go
    ({3: (0.2, 10), 4: (0.1, 10), 5: (0.0, 10)}, {"min_makespan": 3, "max_makespan": 4}, (3, 4)),
])
def test_window__the_top_rises_past_each_level_solved_90_percent_over_8_episodes_and_the_bottom_follows(
        levels, bounds, window):
    config = _one_size(4, **bounds)
    decision = make_engineer("window").propose(_length_context(config, {4: levels}), config)
    spec = decision.config.sizes[4]
    assert (spec.min_makespan, spec.max_makespan) == window
    assert (spec.data_ratio, spec.hole_ratio, spec.wait_ratio) == (1.0, 0.2, 0.0) and decision.accepted
    assert f"-> {window[0]}..{window[1]}" in decision.rationale
    # the window lives in the config: a second decision on the same evidence moves nothing more
    again = make_engineer("window").propose(_length_context(decision.config, {4: levels}), decision.config)
    assert again.config == decision.config


def test_window__holes_rise_with_the_top_and_a_window_the_generator_cannot_fill_is_widened():
    levels = {1: (0.95, 10), 2: (0.95, 10), 3: (0.95, 10), 4: (0.5, 10)}
    config = _one_size(4, min_makespan=1, max_makespan=2)
    decision = make_engineer("window", hole_step=0.05).propose(_length_context(config, {4: levels}), config)
    assert decision.config.sizes[4].hole_ratio == 0.3 and "holes 0.2 -> 0.3" in decision.rationale  # rose 2 levels
    capped = make_engineer("window", hole_step=0.5, max_hole_ratio=0.25).propose(
        _length_context(config, {4: levels}), config)
    assert capped.config.sizes[4].hole_ratio == 0.25
    # with waits, plans of 1-2 steps almost never need a wait on a 5x5 map: the window grows upward until the
    # generator fills it, never past the longest makespan the evidence saw
    waits = _one_size(5, wait=0.3)
    cells = {5: {1: (0.95, 10), 2: (0.5, 10), 3: (0.2, 10), 4: (0.1, 10), 5: (0.0, 5)}}
    widened = make_engineer("window").propose(_length_context(waits, cells), waits)
    spec = widened.config.sizes[5]
    assert spec.min_makespan == 1 and 2 < spec.max_makespan <= 5 and "widened" in widened.rationale
    from simulator.generator import generate

    generate(replace(widened.config, samples=60))  # the stage it writes can be generated


def test_window__without_the_split_or_evidence_nothing_moves_and_bad_options_are_config_errors():
    config = _one_size(4)
    assert make_engineer("window").propose(build_context(summary_with({4: 0.5}), config, []), config).diff == []
    hidden = make_engineer("window").propose(_length_context(config, {4: {1: (1.0, 10), 2: (0.5, 10)}},
                                                             sections=("failures",)), config)
    assert hidden.diff == [] and "no evidence split" in hidden.rationale
    other = make_engineer("window").propose(_length_context(config, {3: {1: (1.0, 10)}}), config)
    assert other.diff == [] and "no evidence episodes" in other.rationale
    for option, value in (("threshold", 1.5), ("min_episodes", 0), ("width", 2.5), ("start", 0), ("hole_step", -0.1),
                          ("max_hole_ratio", 0.95), ("metric", "reward")):
        with pytest.raises(ConfigError, match=f"window.{option}"):
            make_engineer("window", **{option: value})


@pytest.mark.parametrize("target, reward, expected", [
    (2.0, 0.5, 2.0),  # at beta: the target stays
    (2.0, 1.0, 2.0 + math.tanh(1.0)),  # all solved: up by eta * tanh(alpha * 0.5)
    (2.0, 0.0, 2.0 - math.tanh(1.0)),  # none solved: down as far
    (2.0, 0.75, 2.0 + math.tanh(0.5)),
    (4.6, 1.0, 5.0),  # clipped at the longest makespan
    (1.2, 0.0, 1.0),  # and at 1
])
def test_next_target__is_adarft_s_clipped_tanh_step(target, reward, expected):
    from engineer.target import next_target

    assert next_target(target, reward, eta=1.0, alpha=2.0, beta=0.5, high=5.0) == pytest.approx(expected)


def test_target__the_band_follows_the_target_moved_by_the_stage_s_sampled_rate_and_resumes_from_its_state():
    config = _one_size(4)
    cells = {4: {m: (0.5, 10) for m in range(1, 7)}}
    target = make_engineer("target")
    # before stage 1 (no training signal): the target is start (1) and the band 1..2
    first = target.propose(_length_context(config, cells), config)
    assert (first.config.sizes[4].min_makespan, first.config.sizes[4].max_makespan) == (1, 2)
    assert first.details["state"] == {"targets": {"4": 1.0}} and "no training signal" in first.rationale
    # the stage solved all its samples: 1 + tanh(1) = 1.76, band around 2
    second = target.propose(_length_context(first.config, cells, signal={4: 1.0}), first.config)
    assert second.details["state"]["targets"]["4"] == pytest.approx(1 + math.tanh(1.0))
    assert (second.config.sizes[4].min_makespan, second.config.sizes[4].max_makespan) == (1, 3)
    resumed = make_engineer("target")
    resumed.load_state(second.to_dict()["details"]["state"])
    third = resumed.propose(_length_context(second.config, cells, signal={4: 1.0}), second.config)
    assert third.details["state"]["targets"]["4"] == pytest.approx(1 + 2 * math.tanh(1.0))  # 2.52: band 2..4
    assert (third.config.sizes[4].min_makespan, third.config.sizes[4].max_makespan) == (2, 4)
    assert "sampled valid 100.0% vs beta 50%: 1.762 -> 2.523" in third.rationale
    # a stage that solved little moves it back down; radius 0 asks for the nearest makespan alone
    narrow = make_engineer("target", radius=0, targets={"4": 3.0})
    down = narrow.propose(_length_context(config, cells, signal={4: 0.1}), config)
    assert (down.config.sizes[4].min_makespan, down.config.sizes[4].max_makespan) == (2, 2)  # 3 - tanh(0.8) = 2.34
    # the target never leaves the makespans the evidence saw at the size
    high = make_engineer("target", start=9.0).propose(_length_context(config, cells), config)
    assert high.details["state"]["targets"]["4"] == 6.0 and high.config.sizes[4].max_makespan == 6


def test_target__without_evidence_nothing_moves_and_bad_options_or_state_are_config_errors():
    config = _one_size(4)
    assert make_engineer("target").propose(build_context(summary_with({4: 0.5}), config, []), config).diff == []
    other = make_engineer("target").propose(_length_context(config, {3: {1: (1.0, 10)}}), config)
    assert other.diff == [] and "no evidence episodes" in other.rationale
    for option, value in (("eta", 0), ("alpha", -1.0), ("beta", 1.5), ("start", 0.5), ("radius", -1), ("radius", 1.5)):
        with pytest.raises(ConfigError, match=f"target.{option}"):
            make_engineer("target", **{option: value})
    for state in ({"targets": {"4": "far"}}, {"targets": {"4": 0.5}}, {"targets": ["4"]}):
        with pytest.raises(ConfigError, match="target state"):
            make_engineer("target").load_state(state)


# --- replay (PLR) and failures (MAPF-GPT-DDG): instances for the next stage --------------------------------------
@pytest.mark.parametrize("scores, seen, now, temperature, staleness, expected", [
    # rank weights (1 / rank) ** (1 / temperature), normalised; every instance trained now: no staleness term
    ([0.25, 0.2, 0.1], [2, 2, 2], 2, 1.0, 0.5, [6 / 11, 3 / 11, 2 / 11]),
    ([0.25, 0.2], [2, 2], 2, 0.5, 0.5, [0.8, 0.2]),
    # staleness: stages since last trained (0, 1, 2), weighted by rho
    ([0.25, 0.2, 0.1], [2, 1, 0], 2, 1.0, 0.5, [0.5 * 6 / 11, 0.5 * 3 / 11 + 0.5 / 3, 0.5 * 2 / 11 + 0.5 * 2 / 3]),
    ([0.25, 0.2, 0.1], [2, 1, 0], 2, 1.0, 1.0, [0.0, 1 / 3, 2 / 3]),
])
def test_replay_probabilities__are_plr_s_rank_and_staleness_mixture(scores, seen, now, temperature, staleness,
                                                                   expected):
    from engineer.replay import replay_probabilities

    assert replay_probabilities(scores, seen, now, temperature, staleness).tolist() == pytest.approx(expected)


@pytest.mark.parametrize("side, makespan, min_episodes, expected", [
    (4, 2, 4, 0.3 * 0.7),  # the size and makespan's own cell
    (4, 3, 4, 0.5 * 0.5),  # a cell with too few episodes: the size's rate
    (4, 9, 4, 0.5 * 0.5),  # a makespan the evidence never saw: the size's rate
    (4, 3, 2, 1.0 * 0.0),  # enough episodes with a lower bar: solved, no potential
    (5, 2, 4, None),  # a size without evidence
])
def test_learning_potential__p_times_one_minus_p_of_the_evidence_on_instances_like_it(side, makespan, min_episodes,
                                                                                     expected):
    from engineer.replay import learning_potential

    behavior = _length_context(StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {4: {
        "data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}}), {4: {2: (0.3, 10), 3: (1.0, 3)}}).behavior
    got = learning_potential(behavior, side, makespan, "valid_rate", min_episodes)
    assert got == (None if expected is None else pytest.approx(expected))


def _bank(samples: int = 40, seed: int = 5) -> list:
    from simulator.generator import generate

    return generate(StageConfig.from_dict({"agents": 2, "samples": samples, "seed": seed, "sizes": {
        3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0},
        4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0}}})).instances


def test_replay__replays_the_bank_s_instances_with_learning_potential_by_rank_and_staleness_and_resumes():
    from engineer.material import StageMaterial

    bank = _bank()
    config = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {
        3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0},
        4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    # the evidence: 3x3 solved (no potential), 4x4 plans of 1 step solved, longer ones half the time
    cells = {3: {m: (1.0, 10) for m in range(1, 6)}, 4: {1: (1.0, 10), **{m: (0.5, 10) for m in range(2, 8)}}}
    context = _length_context(config, cells, rates={3: 1.0, 4: 0.5})  # 3x3's own rate agrees: solved
    promising = {item.instance.content_key() for item in bank if item.size == 4 and item.optimal_makespan >= 2}
    assert len(promising) >= 5, "the seed's bank has 4x4 instances of 2+ steps"
    replay = make_engineer("replay", share=0.1, buffer_size=30)
    replay.load_material(StageMaterial(stage=1, bank=tuple(bank)))
    first = replay.propose(context, config, seed=7)
    # only instances with learning potential are kept and replayed; the config itself is kept
    assert first.config == config and first.accepted and first.reason == "replay: 4 instances replayed"
    assert len(first.instances) == 4 and all(item.instance.content_key() in promising for item in first.instances)
    buffer = first.details["state"]["buffer"]
    assert len(buffer) == len(promising) and all(entry["seen"] == 1 for entry in buffer)
    assert first.to_dict()["instances"] == [item.to_dict() for item in first.instances]
    # same evidence, bank and seed: the same replay; a resumed engineer continues the same buffer
    again = make_engineer("replay", share=0.1, buffer_size=30)
    again.load_material(StageMaterial(stage=1, bank=tuple(bank)))
    assert [item.to_dict() for item in again.propose(context, config, seed=7).instances] == \
        [item.to_dict() for item in first.instances]
    resumed = make_engineer("replay", share=0.1, buffer_size=30, staleness=1.0)
    resumed.load_state(first.to_dict()["details"]["state"])
    newer = _bank(seed=6)
    resumed.load_material(StageMaterial(stage=2, bank=tuple(newer)))
    second = resumed.propose(context, config, seed=8)
    # with all weight on staleness, only the instances not trained at stage 2 are drawn
    keys = {item.instance.content_key() for item in newer}
    assert second.instances and all(item.instance.content_key() not in keys for item in second.instances)
    assert all(item.instance.content_key() in promising for item in second.instances)
    seen = {entry["seen"] for entry in second.details["state"]["buffer"]}
    assert seen <= {1, 2} and len(second.details["state"]["buffer"]) <= 30
    # the buffer keeps the highest-scoring instances: a buffer of 2 replays at most 2
    small = make_engineer("replay", share=0.5, buffer_size=2)
    small.load_material(StageMaterial(stage=1, bank=tuple(bank)))
    assert len(small.propose(context, config, seed=7).instances) == 2


def test_replay__scores_an_instance_by_its_own_samples_when_the_stage_recorded_them():
    from engineer.material import StageMaterial, read_outcomes

    bank = [item for item in _bank() if item.size == 4]
    config = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    # the evidence says 4x4 instances of every makespan are solved: no potential by instances like them
    context = _length_context(config, {4: {m: (1.0, 10) for m in range(1, 12)}}, rates={4: 1.0})
    # but the stage's own samples: the first three half solved, the next two always, one sampled once
    own = {bank[i].instance.content_key(): pair for i, pair in enumerate([(2, 4), (1, 2), (3, 6), (4, 4), (0, 4),
                                                                          (1, 1)])}
    replay = make_engineer("replay", share=0.5, buffer_size=30)
    replay.load_material(StageMaterial(stage=1, bank=tuple(bank), outcomes=own))
    decision = replay.propose(context, config, seed=3)
    assert {item.instance.content_key() for item in decision.instances} == {bank[i].instance.content_key()
                                                                           for i in range(3)}
    # five by their own samples; (1, 1) has fewer than min_samples, so by the evidence, which gives it none
    assert "5 scored by their own samples" in decision.rationale
    # the buffer remembers each instance's own count: a later stage that did not sample it still scores it so
    buffer = decision.details["state"]["buffer"]
    assert sorted((entry["valid"], entry["samples"]) for entry in buffer) == [(1, 2), (2, 4), (3, 6)]
    later = make_engineer("replay", share=0.5, buffer_size=30)
    later.load_state(decision.details["state"])
    later.load_material(StageMaterial(stage=2, bank=()))
    assert len(later.propose(context, config, seed=4).instances) == 3
    # the file a rejection-sampling stage writes, read back; a bad entry is named
    assert read_outcomes({"outcomes": {"0a": [1, 2]}}) == {b"\n": (1, 2)}
    for table in ({"zz": [1, 2]}, {"0a": [3, 2]}, {"0a": [1]}, {"0a": [True, 2]}):
        with pytest.raises(ConfigError, match="outcomes"):
            read_outcomes({"outcomes": table})
    with pytest.raises(ConfigError, match="replay.min_samples"):
        make_engineer("replay", min_samples=0)


def test_replay__without_material_evidence_or_potential_nothing_is_replayed_and_bad_options_are_config_errors():
    from engineer.material import StageMaterial

    bank = _bank()
    config = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    cells = {4: {m: (0.5, 10) for m in range(1, 8)}}
    alone = make_engineer("replay").propose(_length_context(config, cells), config)
    assert alone.instances == () and "no stage material" in alone.rationale
    hidden = make_engineer("replay")
    hidden.load_material(StageMaterial(stage=1, bank=tuple(bank)))
    assert hidden.propose(_length_context(config, cells, sections=("failures",)), config).instances == ()
    solved = make_engineer("replay")
    solved.load_material(StageMaterial(stage=1, bank=tuple(bank)))
    context = _length_context(config, {4: {m: (1.0, 10) for m in range(1, 8)}}, rates={3: 1.0, 4: 1.0})
    decision = solved.propose(context, config)
    assert decision.instances == () and "no instance has learning potential" in decision.rationale
    for option, value in (("share", 0.95), ("buffer_size", 0), ("temperature", 0.0), ("staleness", 1.5),
                          ("min_episodes", -1), ("metric", "reward")):
        with pytest.raises(ConfigError, match=f"replay.{option}"):
            make_engineer("replay", **{option: value})
    with pytest.raises(ConfigError, match="replay state"):
        make_engineer("replay").load_state({"buffer": [{"instance": {"grid": [[0]]}, "seen": 1}]})


def _failing_episodes():
    """Episodes of one 4x4 board (a hole at row 0, column 2; agent 0 goes right along row 0, agent 1 left along
    row 3): a valid plan, a fall at step 2, an illegal first move, a plan that stops after one step, a parse error."""
    import numpy as np

    from policy.rollout import judge_episodes
    from simulator import constants as C
    from simulator.generator import label_instance
    from simulator.types import Instance, JointPlan

    grid = np.zeros((4, 4), np.int8)
    grid[0, 2] = C.HOLE
    item = label_instance(Instance(grid, [(0, 0), (3, 3)], [(0, 3), (3, 0)]), size=4)[0]
    right, left, up, down = C.RIGHT, C.LEFT, C.UP, C.DOWN
    plans = [JointPlan.from_sequences([[down, right, right, right, up], [left, left, left]]),
             JointPlan.from_sequences([[right, right], [left, left]]),
             JointPlan.from_sequences([[up], [left]]),
             JointPlan.from_sequences([[right], [left, left]]),
             None]
    return item, judge_episodes([item] * len(plans), plans, ["no plan"] * len(plans))


@pytest.mark.parametrize("index, starts, step", [
    (0, None, None),  # valid: nothing to cut
    (1, [(0, 1), (3, 2)], 1),  # a fall at step 2: the board after step 1, where the fatal move was chosen
    (2, [(0, 0), (3, 3)], 0),  # an illegal first move: the board before any step (the instance itself)
    (3, [(0, 1), (3, 1)], 2),  # goal not reached: where the plan ended
    (4, None, None),  # a parse error: no board
])
def test_failing_board__the_board_before_the_failing_step_or_where_the_plan_ended(index, starts, step):
    from engineer.failure_cuts import failing_board

    item, episodes = _failing_episodes()
    found = failing_board(episodes[index])
    if starts is None:
        assert found is None
    else:
        board, at = found
        assert board.starts.tolist() == [list(cell) for cell in starts] and at == step
        assert board.goals.tolist() == item.instance.goals.tolist() and (board.grid == item.instance.grid).all()


def test_failures__cuts_certified_boards_from_failed_episodes_never_a_protected_one():
    from engineer.material import StageMaterial
    from simulator.generator import label_instance

    item, episodes = _failing_episodes()
    config = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.1, "wait_ratio": 0.0}}})
    context = build_context(summary_with({4: 0.4}), config, [])
    failures = make_engineer("failures")
    failures.load_material(StageMaterial(stage=1, evidence=tuple(episodes),
                                         protected=frozenset({item.instance.content_key()})))
    decision = failures.propose(context, config, seed=3)
    # the fall's board and the unfinished plan's board; the illegal move's board is the (protected) instance itself
    assert decision.config == config and decision.accepted
    assert sorted(cut.instance.starts.tolist() for cut in decision.instances) == [[[0, 1], [3, 1]], [[0, 1], [3, 2]]]
    for cut in decision.instances:
        assert cut.instance.content_key() != item.instance.content_key() and cut.size == 4
        assert label_instance(cut.instance)[0].optimal_makespan == cut.optimal_makespan
    assert "4 of 5 evidence episodes failed" in decision.rationale
    assert "protected (a test or evidence instance) 1" in decision.rationale
    assert "no board (parse error or damaged trace) 1" in decision.rationale
    assert decision.to_dict()["instances"] == [cut.to_dict() for cut in decision.instances]
    # at most round(share * samples): 0.03 x 40 = 1, picked in the seed's order; the same seed, the same pick
    one = make_engineer("failures", share=0.03)
    one.load_material(StageMaterial(stage=1, evidence=tuple(episodes)))
    picked = [cut.to_dict() for cut in one.propose(context, config, seed=3).instances]
    assert len(picked) == 1 and [cut.to_dict() for cut in one.propose(context, config, seed=3).instances] == picked
    # a config that trains another size or agent count takes none of them
    other = StageConfig.from_dict({**config.to_dict(), "sizes": {3: {"data_ratio": 1.0, "hole_ratio": 0.1,
                                                                      "wait_ratio": 0.0}}})
    assert failures.propose(context, other, seed=3).instances == ()


def test_failures__without_material_or_failures_nothing_is_cut_and_bad_options_are_config_errors():
    from engineer.material import StageMaterial

    _, episodes = _failing_episodes()
    context = build_context(summary_with({4: 1.0}), CONFIG, [])
    alone = make_engineer("failures").propose(context, CONFIG)
    assert alone.instances == () and "no stage material" in alone.rationale and alone.diff == []
    valid = make_engineer("failures")
    valid.load_material(StageMaterial(stage=1, evidence=(episodes[0],)))
    decision = valid.propose(context, CONFIG)
    assert decision.instances == () and "no failed episode" in decision.rationale
    for value in (-0.1, 0.95, "all"):
        with pytest.raises(ConfigError, match="failures.share"):
            make_engineer("failures", share=value)


def test_decision_instances__round_trip_and_a_bad_entry_names_its_index():
    from engineer.decision import decision_instances, make_decision

    bank = _bank(samples=4)
    decision = make_decision("replay", CONFIG, CONFIG, "replay: 2", instances=bank[:2])
    document = json.loads(json.dumps(decision.to_dict()))
    assert [item.to_dict() for item in decision_instances(document)] == [item.to_dict() for item in bank[:2]]
    assert decision_instances({"config": {}}) == []
    assert "instances" not in make_decision("fixed", CONFIG, CONFIG, "fixed").to_dict()
    assert make_decision("replay", CONFIG, None, "rejected", instances=bank[:2]).instances == ()  # changes nothing
    document["instances"][1] = {"grid": [[0]]}
    with pytest.raises(ConfigError, match=r"stage-01/decision.json.instances\[1\]"):
        decision_instances(document, "stage-01/decision.json")


def test_decision_from_dict__reads_its_record_back_old_records_fill_in_and_bad_fields_are_named():
    from engineer.decision import EngineerDecision, make_decision

    other = StageConfig.from_dict({**CONFIG.to_dict(), "samples": CONFIG.samples + 10})
    made = [make_decision("replay", CONFIG, other, "replay: 2", instances=_bank(samples=4)[:2], raw_answer="yes",
                          proposal={"samples": 1, "odd": float("nan")}, repairs=["summed to 2"], rationale="why",
                          context_text="## behavior", seconds=0.25, details={"state": {"buffer": []}, "n": 3}),
            make_decision("llm", CONFIG, None, "rejected: no YAML block")]
    for decision in made:
        document = json.loads(json.dumps(decision.to_dict()))
        back = EngineerDecision.from_dict(document)
        assert back.to_dict() == document and back.outcome == decision.outcome
    # a record written before most fields existed: only the config
    old = EngineerDecision.from_dict({"config": other.to_dict(), "previous": CONFIG.to_dict()})
    assert old.accepted and old.outcome == "changed" and old.diff == made[0].diff and old.instances == ()
    assert not EngineerDecision.from_dict({"config": CONFIG.to_dict(), "outcome": "rejected"}).accepted
    for document, field in (({"config": CONFIG.to_dict(), "accepted": "yes"}, "accepted"),
                            ({"config": CONFIG.to_dict(), "diff": [1]}, r"diff\[0\]"),
                            ({"config": {**CONFIG.to_dict(), "samples": -1}}, "config.samples"),
                            ({"previous": CONFIG.to_dict()}, "config"),
                            ({"config": CONFIG.to_dict(), "details": []}, "details")):
        with pytest.raises(ConfigError, match=f"stage-02/decision.json.{field}"):
            EngineerDecision.from_dict(document, "stage-02/decision.json")


# --- rule ----------------------------------------------------------------------------------------------------
def test_rule__weight_moves_from_solved_and_hopeless_sizes_to_mid_range_ones():
    decision = _propose("rule", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05})
    sizes = decision.config.sizes
    assert decision.accepted
    assert sizes[3].data_ratio == sizes[6].data_ratio == 0.125  # solved and hopeless each give up half
    assert sizes[4].data_ratio == sizes[5].data_ratio == 0.375  # mid-range sizes share the pool by weight
    assert sizes[3].hole_ratio == 0.25 and sizes[3].wait_ratio == 0.4  # copes (0.95 >= 0.6): harder
    assert sizes[4].hole_ratio == 0.2 and sizes[4].wait_ratio == 0.3  # 0.5 < 0.6: unchanged
    assert sizes[6].hole_ratio == 0.2 and sizes[6].wait_ratio == 0.3  # hopeless: never harder
    assert (decision.config.samples, decision.config.seed, decision.config.agents) == (400, 3, 2)
    assert "size 6: valid_rate 0.050 < 0.2 (hopeless)" in decision.rationale


def test_rule__mid_range_weights_are_shared_in_proportion_to_their_weights():
    config = StageConfig.from_dict({"agents": 2, "samples": 100, "sizes": {
        3: {"data_ratio": 0.5, "hole_ratio": 0.1, "wait_ratio": 0.2},
        4: {"data_ratio": 0.3, "hole_ratio": 0.1, "wait_ratio": 0.2},
        5: {"data_ratio": 0.1, "hole_ratio": 0.1, "wait_ratio": 0.2},
        6: {"data_ratio": 0.1, "hole_ratio": 0.1, "wait_ratio": 0.2}}})
    sizes = _propose("rule", {3: 1.0, 4: 0.5, 5: 0.5, 6: 0.5}, config).config.sizes
    # size 3 gives 0.25; sizes 4, 5, 6 gain 0.25 * 3/5, 1/5, 1/5
    assert [sizes[side].data_ratio for side in (3, 4, 5, 6)] == [0.25, 0.45, 0.15, 0.15]


def test_rule__thresholds_are_parameters():
    default = _propose("rule", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}).config.sizes
    stricter = _propose("rule", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}, low=0.45, shift=1.0).config.sizes
    assert default[5].data_ratio > 0.25  # mid-range by default
    assert stricter[5].data_ratio == 0.0 and stricter[6].data_ratio == 0.0 and stricter[3].data_ratio == 0.0
    assert stricter[4].data_ratio == 1.0  # the only mid-range size takes everything


def test_rule__nothing_moves_without_a_mid_range_size_or_without_evidence():
    assert _propose("rule", {3: 1.0, 4: 1.0, 5: 0.0, 6: 0.0}, hole_step=0.0, wait_step=0.0).diff == []
    assert _propose("rule", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}, min_episodes=50).diff == []
    no_behavior = _propose("rule", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}, sections=("failures",))
    assert no_behavior.diff == [] and "no behavior" in no_behavior.reason


def test_rule__holes_never_exceed_what_the_agents_need_and_lone_agents_never_wait():
    config = StageConfig.from_dict({"agents": 7, "samples": 10, "sizes": {
        3: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}}})
    sizes = _propose("rule", {3: 1.0}, config, hole_step=0.5, max_hole_ratio=0.9).config.sizes
    assert sizes[3].free_cells(3) >= 7 and sizes[3].hole_ratio == hole_ratio_cap(3, 7)
    lone = StageConfig.from_dict({"agents": 1, "samples": 10, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    assert _propose("rule", {4: 1.0}, lone).config.sizes[4].wait_ratio == 0.0


def test_rule__bad_thresholds_are_config_errors():
    with pytest.raises(ConfigError, match="rule.low"):
        make_engineer("rule", low=0.9, high=0.5)
    with pytest.raises(ConfigError, match="rule.metric"):
        make_engineer("rule", metric="reward")


# --- random and fixed ----------------------------------------------------------------------------------------
def test_random__valid_configs_same_seed_same_config():
    context = build_context(summary_with({3: 0.5}), CONFIG, [])
    engineer = make_engineer("random")
    configs = [engineer.propose(context, CONFIG, seed=seed).config for seed in range(30)]
    assert all(StageConfig.from_dict(config.to_dict()) == config for config in configs)
    assert engineer.propose(context, CONFIG, seed=4).config == configs[4]
    assert len({config for config in configs}) > 20
    assert all(set(config.sizes) <= set(range(3, 11)) and config.samples == 400 for config in configs)
    crowded = make_engineer("random", agents=[6, 9])
    for seed in range(30):
        config = crowded.propose(context, CONFIG, seed=seed).config
        assert 6 <= config.agents_max <= 9 and min(config.sizes) >= 3


def test_fixed__never_changes_the_config():
    decision = _propose("fixed", {3: 0.0, 4: 1.0, 5: 1.0, 6: 1.0})
    assert decision.accepted and decision.config == CONFIG and decision.diff == []


@pytest.mark.parametrize("spec", ["", "rules", "rule:fast", "llm", "llm:", "llm:nope:x", "fixed:1", 3])
def test_make_engineer__bad_specs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        make_engineer(spec)


def test_make_engineer__unknown_option_names_the_allowed_ones():
    with pytest.raises(ConfigError, match="low, high"):
        make_engineer("rule", lo=0.1)


PLAIN_ENGINEERS = [name for name, kind in ENGINEERS.items() if not kind.takes_target]


@pytest.mark.parametrize("name", PLAIN_ENGINEERS)
def test_registry__a_registered_engineer_is_built_offered_and_named_everywhere_from_its_one_entry(name, capsys):
    """The registry line is the whole registration: the engineer builds with its defaults, is a default arm of
    ``train --compare``, a valid ``engineer.spec``, and is named by ``mapf-lake engineer --help`` and by the
    config error for a bad spec."""
    from curriculum.cli import build_parser
    from curriculum.commands import default_arms
    from curriculum.config import Engineer as EngineerSettings

    engineer = make_engineer(name)
    assert engineer.name == name and callable(engineer.propose)
    if ENGINEERS[name].compare is None:  # a measurement too costly for the default set (lookahead): no default arm
        assert name not in default_arms()
    else:
        assert default_arms()[name] == {"engineer.spec": name}
    EngineerSettings(spec=name).validate()
    with pytest.raises(ConfigError) as caught:
        EngineerSettings(spec="no-such-engineer").validate()
    assert f" {name}," in str(caught.value) or f" {name} or" in str(caught.value)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["engineer", "--help"])
    assert name in " ".join(capsys.readouterr().out.split())


# --- llm with stand-in backends ------------------------------------------------------------------------------
GOOD_ANSWER = """<think>size 6 is hard</think>
Sizes 4 and 5 are mid-range; give them more weight.
```yaml
agents: 2
samples: 400
seed: 3
sizes:
  3: {data_ratio: 0.1, hole_ratio: 0.2, wait_ratio: 0.3}
  4: {data_ratio: 0.4, hole_ratio: 0.2, wait_ratio: 0.3}
  5: {data_ratio: 0.4, hole_ratio: 0.2, wait_ratio: 0.3}
  6: {data_ratio: 0.1, hole_ratio: 0.2, wait_ratio: 0.3}
```"""


class ScriptedBackend:
    """Answers with fixed text, or raises, or sleeps; remembers the prompts it was given."""

    spec = "scripted"

    def __init__(self, answer: str = GOOD_ANSWER, error: Exception | None = None, sleep_s: float = 0.0) -> None:
        self.answer, self.error, self.sleep_s = answer, error, sleep_s
        self.prompts: list = []

    def generate(self, prompts, sampling):
        self.prompts.extend(prompts)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.error is not None:
            raise self.error
        return [Generation(self.answer, 100, 50) for _ in prompts]


def test_llm__good_answer_is_accepted_with_rationale_and_chat_prompt():
    backend = ScriptedBackend()
    decision = _propose("llm:openai:some-model", {3: 0.95, 4: 0.5, 5: 0.4, 6: 0.05}, backend=backend)
    assert decision.accepted, decision.reason
    assert decision.config.sizes[4].data_ratio == 0.4
    assert decision.rationale == "Sizes 4 and 5 are mid-range; give them more weight."
    assert decision.details["completion_tokens"] == 50 and decision.details["prompt_form"] == "chat"
    system, user = backend.prompts[0]
    assert '"additionalProperties"' in system["content"]  # the schema is shown
    assert "## behavior" in user["content"] and "## failures" in user["content"]
    assert "Current config:" in user["content"]


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        (ScriptedBackend(error=RuntimeError("CUDA out of memory")), "RuntimeError: CUDA out of memory"),
        (ScriptedBackend(error=ConfigError("prompts[0]", "x", "shorter")), "ConfigError"),
        (ScriptedBackend(answer="I cannot help with that."), "no JSON or YAML"),
        (ScriptedBackend(answer=GOOD_ANSWER.replace("0.4, hole", "nan, hole")), "data_ratio"),
    ],
)
def test_llm__failing_backend_or_answer_falls_back_with_the_reason(backend, reason):
    decision = _propose("llm:openai:m", {3: 0.5, 4: 0.5, 5: 0.5, 6: 0.5}, backend=backend)
    assert not decision.accepted and decision.config == CONFIG and decision.diff == []
    assert reason in decision.reason
    json.dumps(decision.to_dict(), allow_nan=False)


def test_llm__timeout_falls_back_quickly():
    started = time.perf_counter()
    decision = _propose("llm:openai:m", {3: 0.5}, backend=ScriptedBackend(sleep_s=5.0), timeout_s=0.2)
    assert time.perf_counter() - started < 2.0
    assert not decision.accepted and "timed out" in decision.reason and decision.config == CONFIG


def test_llm__backend_that_cannot_load_falls_back(tmp_path):
    decision = _propose(f"llm:hf:{tmp_path / 'no-such-model'}", {3: 0.5})
    assert not decision.accepted and "the backend failed: ConfigError" in decision.reason


def test_llm__bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="llm.timeout_s"):
        make_engineer("llm:openai:m", timeout_s=0)
    with pytest.raises(ConfigError, match="sampling.temperature"):
        make_engineer("llm:openai:m", temperature=-1.0)
    with pytest.raises(ConfigError, match="llm.prompt_form"):
        make_engineer("llm:openai:m", prompt_form="xml")


# --- llm with the tiny local model, for real -----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from model_fixtures import tiny_model_dir

    return tiny_model_dir()


def test_llm_hf__a_timed_out_answer_stops_generating_instead_of_running_on_in_the_background(tiny_model):
    from engineer.llm import BackendTimeout, call_with_timeout
    from policy.backend_base import Sampling
    from policy.backends import make_backend

    backend = make_backend(f"hf:{tiny_model}")
    sampling = Sampling(max_new_tokens=900, temperature=1.0, seed=0, batch_size=1)
    finished: dict = {}

    def work():  # 900 tokens, the stop token suppressed, unless the generation is stopped
        finished["generations"] = backend._generate(["n=3\n"], sampling, ignore_eos=True)
        return finished["generations"]

    with pytest.raises(BackendTimeout):
        call_with_timeout(work, 0.05)
    deadline = time.monotonic() + 300
    while "generations" not in finished and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 0 < finished["generations"][0].completion_tokens < 900


def test_llm_hf__tiny_model_answers_end_to_end_and_the_fallback_holds(tiny_model):
    engineer = make_engineer(f"llm:hf:{tiny_model}", max_new_tokens=96, timeout_s=120)
    assert isinstance(engineer, LLMEngineer)
    decision = _propose_with(engineer)
    assert decision.raw_answer is not None and decision.details["completion_tokens"] > 0  # it really generated
    assert decision.details["prompt_form"] == "text"  # no chat template: a raw prompt
    assert decision.details["prompt_fit"]["dropped_count"] > 0  # its 25-character alphabet lacks most letters
    assert not decision.accepted and decision.config == CONFIG  # nonsense in, previous config out
    again = _propose_with(engineer)  # the loaded model is reused; same seed, same answer
    assert again.raw_answer == decision.raw_answer
    refused = _propose_with(make_engineer(f"llm:hf:{tiny_model}", fit_prompt=False, backend=engineer.backend))
    assert not refused.accepted and "tokenizer can encode" in refused.reason


def _propose_with(engineer):
    context = build_context(summary_with({3: 0.9, 4: 0.5, 5: 0.3, 6: 0.0}), CONFIG, [])
    return engineer.propose(context, CONFIG, seed=5)


# --- the command ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def replay_folder(tmp_path_factory):
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from replays.types import ReplayHeader
    from replays.writer import write_replay
    from simulator.generator import generate

    config = StageConfig.from_dict({"agents": 2, "samples": 24, "seed": 2, "sizes": {
        3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
        4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5}}})
    items = generate(config).instances
    folder = tmp_path_factory.mktemp("cli-replays")
    header = ReplayHeader.new("run", 0, "validation", {"name": "greedy"}, config.to_dict())
    write_replay(folder / "validation.mlr", header, judge_episodes(items, make_scripted("greedy").plans(items)))
    return folder, config


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "curriculum.cli", "engineer", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )


def test_cli_engineer__rule_with_config_from_headers_writes_config_and_record(replay_folder, tmp_path):
    folder, config = replay_folder
    out, record = tmp_path / "next.yaml", tmp_path / "decision.json"
    result = _run("--replays", str(folder), "--engineer", "rule", "--context", "failures,behavior",
                  "--show-context", "--out", str(out), "--record", str(record))
    assert result.returncode == 0, result.stderr
    assert "## failures" in result.stdout and "## behavior" in result.stdout and "## env_stats" not in result.stdout
    # the rule finds nothing to move in these replays: it says so instead of "accepted"
    assert "diff:\n  (no change)" in result.stdout and "decision: kept the config (nothing to change)" in result.stdout
    data = json.loads(record.read_text())
    assert data["outcome"] == "kept" and data["accepted"] and data["diff"] == []
    assert StageConfig.from_dict(data["previous"]) == config
    assert load_config(out) == StageConfig.from_dict(data["config"])


def test_cli_engineer__fixed_with_explicit_config_and_llm_fallback(replay_folder, tmp_path):
    folder, config = replay_folder
    current = tmp_path / "current.json"
    current.write_text(json.dumps(config.to_dict()))
    out = tmp_path / "next.json"
    result = _run("--replays", str(folder), "--config", str(current), "--engineer", "fixed", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert load_config(out) == config and "(no change)" in result.stdout
    written = out.read_bytes()
    again = _run("--replays", str(folder), "--config", str(current), "--engineer", "fixed", "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr and out.read_bytes() == written  # never replaced
    missing = _run("--replays", str(folder), "--engineer", f"llm:hf:{tmp_path / 'none'}", "--out", str(out),
                   "--force")
    assert missing.returncode == 0, missing.stderr  # a backend that cannot load is a recorded fallback
    assert "rejected" in missing.stdout and load_config(out) == config


def test_collect_evidence__a_file_named_twice_or_inside_a_named_folder_counts_once(replay_folder):
    from engineer.evidence import collect_evidence

    folder, _ = replay_folder
    once = collect_evidence(folder).summary.failures.episodes
    assert once == 24
    again = collect_evidence([folder, folder / "validation.mlr", folder / "validation.mlr"])
    assert again.summary.failures.episodes == once


def test_cli_engineer__an_openai_engineer_without_a_key_is_exit_2_naming_the_variable(replay_folder, tmp_path):
    import os

    folder, _ = replay_folder
    env = {name: value for name, value in os.environ.items()
           if name not in ("MAPF_LAKE_OPENAI_API_KEY", "OPENAI_API_KEY")}
    out = tmp_path / "next.yaml"
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "engineer", "--replays", str(folder),
                             "--engineer", "llm:openai:some-model", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert "MAPF_LAKE_OPENAI_API_KEY" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engineer", "oracle"], "engineer"),
        (["--context", "behaviour"], "behaviour"),
        (["--option", "lo=1"], "rule.lo"),
        (["--exemplars", "-1"], "--exemplars"),
    ],
)
def test_cli_engineer__bad_input_is_a_one_line_error(replay_folder, tmp_path, args, message):
    folder, _ = replay_folder
    result = _run("--replays", str(folder), "--out", str(tmp_path / "x.yaml"), *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_size_spec_cap_helper_matches_the_config_rule():
    for side in range(3, 11):
        for agents in range(1, min(side * side, 16) + 1):
            cap = hole_ratio_cap(side, agents)
            assert SizeSpec(1.0, cap, 0.0).free_cells(side) >= agents


def test_random__agents_as_one_count_or_garbage():
    decision = _propose("random", {3: 0.5}, agents=3)
    assert (decision.config.agents_min, decision.config.agents_max) == (3, 3)
    with pytest.raises(ConfigError, match="random.agents"):
        make_engineer("random", agents="x")


def test_lookahead_candidates__read_back_typed_and_name_a_bad_field():
    from engineer.decision import EngineerDecision
    from engineer.lookahead import Candidate, best_candidate, decision_candidates

    base = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {3: {"data_ratio": 1.0, "hole_ratio": 0.2,
                                                                            "wait_ratio": 0.3}}})
    rows = [Candidate(base, ("fixed",), 0.4), Candidate(replace(base, samples=80), ("gap", "rule"), 0.5),
            Candidate(replace(base, samples=60), ("bandit",), 0.5)]
    decision = EngineerDecision("lookahead", True, "r", None, None, [], rows[1].config, base, [], "", "", 0.0,
                                details={"candidates": [row.to_dict() for row in rows]})
    read = decision_candidates(EngineerDecision.from_dict(json.loads(json.dumps(decision.to_dict()))))
    assert read == rows and best_candidate(read).proposed_by == ("gap", "rule")  # equal rates: the earlier candidate, as the engineer
    assert decision_candidates(replace(decision, details={})) == []
    for damage, field in ((lambda row: row.update(evidence_valid_rate=1.5), "candidates.0.evidence_valid_rate"),
                          (lambda row: row.update(proposed_by=[]), "candidates.0.proposed_by"),
                          (lambda row: row["config"].update(samples=0), "candidates.0.config.samples")):
        document = decision.to_dict()
        damage(document["details"]["candidates"][0])
        with pytest.raises(ConfigError) as caught:
            decision_candidates(EngineerDecision.from_dict(document))
        assert field in caught.value.field
