"""Comparisons over seeds: interval arithmetic, paired differences, the multi-seed ``train --compare`` end to end,
and its resume after SIGKILL."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from curriculum.loop.manifest import RunManifest
    from curriculum.reports.report import RunRecord

from curriculum.reports.stats import (holm, mean_interval, paired_difference, paired_p_value, regularized_incomplete_beta,
                              student_t_cdf, student_t_two_sided_p, t_quantile_975)
from policy.evaluation import EvalTable, SampledPass1
from simulator.errors import ConfigError

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("values, mean, half_width", [
    ([0.5], 0.5, None),
    ([1.0, 3.0], 2.0, 12.706 * math.sqrt(2.0 / 2)),            # sd = sqrt(2), n = 2
    ([2.0, 2.0, 2.0], 2.0, 0.0),
    ([1.0, 2.0, 3.0], 2.0, 4.303 * 1.0 / math.sqrt(3)),        # sd = 1
    ([0.40, 0.42, 0.44, 0.46], 0.43, 3.182 * math.sqrt(0.002 / 3) / 2),
    (list(range(40)), 19.5, 1.960 * math.sqrt(40 * 41 / 12) / math.sqrt(40)),  # beyond the t table: the normal quantile
])
def test_mean_interval__table(values, mean, half_width):
    got = mean_interval(values)
    assert got.mean == pytest.approx(mean) and got.n == len(values)
    if half_width is None:
        assert got.half_width is None and got.low is None and not got.excludes_zero
    else:
        assert got.half_width == pytest.approx(half_width, rel=1e-6)
        assert got.low == pytest.approx(mean - half_width) and got.high == pytest.approx(mean + half_width)


@pytest.mark.parametrize("bad", [[], [float("nan")], [1.0, float("inf")]])
def test_mean_interval__refuses_empty_or_non_finite(bad):
    with pytest.raises(ValueError):
        mean_interval(bad)


def test_t_quantile__known_values_and_bounds():
    assert t_quantile_975(1) == 12.706 and t_quantile_975(2) == 4.303 and t_quantile_975(30) == 2.042
    assert t_quantile_975(31) == 1.960
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_paired_difference__pairs_by_seed_and_ignores_unpaired():
    arm = {0: 0.50, 1: 0.40, 2: 0.45, 7: 0.9}
    reference = {0: 0.45, 1: 0.36, 2: 0.40, 3: 0.1}
    diff = paired_difference(arm, reference)
    assert diff.n == 3 and diff.mean == pytest.approx((0.05 + 0.04 + 0.05) / 3)
    assert diff.excludes_zero  # a steady +4..5 points beats a wide unpaired spread
    assert paired_difference({0: 1.0}, {1: 1.0}) is None
    assert mean_interval([0.05, 0.04, 0.05]).format() == f"4.7 ± {100 * diff.half_width:.1f}"
    assert diff.format(signed=True).startswith("+4.7")


def _manifest(document: dict | None = None, **overrides) -> RunManifest:
    """A manifest read from ``document`` (its ``run_config`` the tiny preset's, with ``overrides``)."""
    from curriculum.config import preset
    from curriculum.loop.manifest import RunManifest

    config = preset("tiny").with_overrides(**overrides) if overrides else preset("tiny")
    return RunManifest.from_dict({"run_config": config.to_dict(), **(document or {})})


def _with_manifest(run: RunRecord, **changes) -> RunRecord:
    """``run`` with its manifest's fields replaced (``versions=...``, ``machine=...``)."""
    from dataclasses import replace

    run.manifest = replace(run.manifest, **changes)
    return run


def _with_config(run: RunRecord, **overrides) -> RunRecord:
    """``run`` with its run config's dotted fields replaced (``initial_config.agents=[2, 3]``)."""
    return _with_manifest(run, run_config=run.run_config.with_overrides(**overrides))


def _fake_run(arm: str, seed: int, stage_valid: float, warm: float = 0.3, final: float | None = None) -> RunRecord:
    from curriculum.loop.records import StageRecord
    from curriculum.reports.report import Rates, RunRecord
    from simulator.config import default_stage_config

    record = {"stage": 1, "config": default_stage_config().to_dict(), "decision": {"accepted": True},
              "scores": {"valid_rate": stage_valid, "optimal_rate": stage_valid / 2,
                         "sampled_valid_rate": stage_valid - 0.1}}
    run = RunRecord(dir=f"runs/x-{arm}-s{seed}", warm_start=Rates(warm, warm / 2),
                    manifest=_manifest(arm=arm, seed=seed, **{"engineer.spec": "fixed", "initial_config.agents": 2}),
                    stages=[StageRecord.from_dict(record)])
    if final is not None:
        run.final = EvalTable.from_dict({"suite": "s", "cells": {"2x3": {"valid_rate": final, "optimal_rate": final}}})
    return run


def test_seed_comparison__means_intervals_and_paired_differences():
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    runs = [_fake_run("rule", 0, 0.50), _fake_run("fixed", 0, 0.45), _fake_run("rule", 1, 0.40),
            _fake_run("fixed", 1, 0.36), _fake_run("rule", 2, 0.45), _fake_run("fixed", 2, 0.40)]
    result = seed_comparison(runs)
    assert result.reference == "fixed" and list(result.arms) == ["rule", "fixed"]
    rule = result.arms["rule"]
    assert rule.seeds == (0, 1, 2)
    assert rule.metrics["valid"].mean == pytest.approx(0.45)
    assert rule.metrics["lift"].mean == pytest.approx(0.15)
    assert rule.metrics["pass1"].mean == pytest.approx(0.35)
    assert rule.vs_reference["valid"].interval.mean == pytest.approx(0.14 / 3)
    assert rule.vs_reference["valid"].interval.low > 0
    assert "test" not in rule.metrics and result.arms["fixed"].vs_reference == {}
    text = render_seed_comparison(result)
    assert "seeds: 0, 1, 2" in text and "paired difference against fixed" in text and "+4.7 ±" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    with pytest.raises(ConfigError, match="seed 0 twice"):
        seed_comparison(runs + [_fake_run("rule", 0, 0.1)])


def test_seed_comparison__a_wide_interval_never_runs_into_the_next_cell():
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    text = render_seed_comparison(seed_comparison([_fake_run("fixed", 0, 0.9), _fake_run("fixed", 1, 0.1)]))
    row = next(line for line in text.splitlines() if line.startswith("fixed"))
    assert row.split()[1:5] == ["2", "50.0", "±", "508.2"]  # 2 seeds, then the valid cell on its own


def test_seed_comparison__without_the_reference_arm_has_no_differences():
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    result = seed_comparison([_fake_run("a", 0, 0.2, final=0.1), _fake_run("b", 0, 0.3, final=0.2)])
    assert result.reference is None
    assert result.arms["b"].metrics["test"].mean == pytest.approx(0.2)
    assert "paired" not in render_seed_comparison(result)


def test_run_figures__test_set_split_by_trained_agents_and_led_in_the_table():
    """Test cells with the agent counts the run trains on score ``test`` (greedy, optimal, sampled pass@1); the
    others ``transfer``; the evidence set's figures come after, as what the engineer saw."""
    from curriculum.reports.report import render_seed_comparison, run_figures, seed_comparison

    runs = []
    for arm, seed, rate in (("fixed", 0, 0.4), ("band", 0, 0.5), ("fixed", 1, 0.3), ("band", 1, 0.35)):
        run = _fake_run(arm, seed, rate)
        run.final = EvalTable.from_dict({"suite": "test-small", "cells": {
            "2x3": {"valid_rate": rate, "optimal_rate": rate / 2}, "2x4": {"valid_rate": rate / 2, "optimal_rate": 0.0},
            "3x3": {"valid_rate": rate / 4, "optimal_rate": 0.0}}})
        run.final_sampled = SampledPass1.from_dict({"k": 2, "cells": {"2x3": {"valid_rate": 0.2},
                                                                      "2x4": {"valid_rate": 0.1},
                                                                      "3x3": {"valid_rate": 0.9}}})
        runs.append(run)
    figures = run_figures(runs[0])
    assert figures["test"] == pytest.approx(0.3) and figures["test_opt"] == pytest.approx(0.1)
    assert figures["transfer"] == pytest.approx(0.1) and figures["test_pass1"] == pytest.approx(0.15)
    _with_config(runs[0], **{"initial_config.agents": [2, 3]})  # trains on 3 agents too: no transfer
    assert "transfer" not in run_figures(runs[0]) and run_figures(runs[0])["test"] == pytest.approx(0.7 / 3)
    _with_config(runs[0], **{"initial_config.agents": 2})
    text = render_seed_comparison(seed_comparison(runs))
    lines = text.splitlines()
    assert lines.index("test set (read by nothing but this score):") < lines.index(
        "evidence set (what the engineer saw):")
    assert "p (paired t on test %" in text and all(len(line) <= 80 for line in lines)



# --- how much to believe a comparison: p values, Holm, installations --------------------------------------------

@pytest.mark.parametrize("t, df, p, tolerance", [
    (2.776, 4, 0.05, 5e-4),            # the t table's 97.5% quantiles give p = 0.05 two-sided
    (12.706, 1, 0.05, 5e-5),
    (2.042, 30, 0.05, 5e-4),
    (2.228, 10, 0.05, 5e-4),
    (-2.776, 4, 0.05, 5e-4),           # two-sided: the sign does not matter
    (1.960, 1e6, 0.05, 5e-4),          # many degrees of freedom: the normal
    (0.0, 1, 1.0, 1e-12),
    (0.0, 7, 1.0, 1e-12),
    (1.0, 1, 0.5, 1e-12),              # df 1 is Cauchy: P(|T| >= 1) = 1 - 2 atan(1) / pi
    (3.0, 2, 1 - 3 / math.sqrt(11), 1e-12),  # df 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2)
    (4.604, 4, 0.01, 5e-5),
    (float("inf"), 3, 0.0, 0.0),
])
def test_student_t__two_sided_p_known_values(t, df, p, tolerance):
    assert student_t_two_sided_p(t, df) == pytest.approx(p, abs=tolerance)


@pytest.mark.parametrize("t", [-30.0, -2.5, -0.3, 0.0, 0.7, 1.0, 4.0, 100.0])
def test_student_t__cdf_matches_closed_forms(t):
    assert student_t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
    assert student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert student_t_cdf(t, 9) + student_t_cdf(-t, 9) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("a, b, x, expected", [
    (1.0, 1.0, 0.3, 0.3),                       # uniform
    (3.0, 1.0, 0.6, 0.6 ** 3),                  # I_x(a, 1) = x^a
    (1.0, 4.0, 0.2, 1 - 0.8 ** 4),              # I_x(1, b) = 1 - (1 - x)^b
    (7.5, 7.5, 0.5, 0.5),                       # symmetric
    (2.0, 3.0, 0.9, 1 - 0.1 ** 4 - 4 * 0.9 * 0.1 ** 3),  # integer a, b: I_x(a, b) = P(Binomial(a+b-1, x) >= a)
    (3.0, 2.0, 0.3, 4 * 0.3 ** 3 * 0.7 + 0.3 ** 4),
    (2.0, 0.5, 0.0, 0.0),
    (2.0, 0.5, 1.0, 1.0),
])
def test_regularized_incomplete_beta__known_values(a, b, x, expected):
    assert regularized_incomplete_beta(a, b, x) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("differences, p", [
    ([], None),
    ([0.3], None),                                   # one pair: no spread to judge by
    ([0.1, 0.1, 0.1], 0.0),                          # every seed agrees on a nonzero difference
    ([0.0, 0.0], 1.0),
    ([-1.0, 1.0], 1.0),                              # mean 0: t = 0
    ([1.0, 2.0, 3.0], 1 - 2 * math.sqrt(3) / math.sqrt(14)),     # t = 2 sqrt(3), df 2
    ([0.05, 0.04, 0.05], 1 - 14 / math.sqrt(198)),                # t = 14, df 2
    ([-0.05, -0.04, -0.05], 1 - 14 / math.sqrt(198)),
])
def test_paired_p_value__table(differences, p):
    got = paired_p_value(differences)
    assert got is None if p is None else got == pytest.approx(p, abs=1e-9)


def test_paired_p_value__refuses_non_finite():
    with pytest.raises(ValueError):
        paired_p_value([0.1, float("nan")])


@pytest.mark.parametrize("p_values, adjusted", [
    ({}, {}),
    ({"x": 0.2}, {"x": 0.2}),
    ({"a": 0.01, "b": 0.04, "c": 0.03}, {"a": 0.03, "b": 0.06, "c": 0.06}),   # 3 x .01; max(.03, 2 x .03); max(.06, .04)
    ({"a": 0.01, "b": 0.02, "c": 0.03, "d": 0.04}, {"a": 0.04, "b": 0.06, "c": 0.06, "d": 0.06}),
    ({"a": 0.001, "b": 0.03, "c": 0.02}, {"a": 0.003, "b": 0.04, "c": 0.04}),  # b's 1 x .03 raised to c's .04
    ({"a": 0.02, "b": 0.02}, {"a": 0.04, "b": 0.04}),                          # ties
    ({"a": 0.5, "b": 0.6}, {"a": 1.0, "b": 1.0}),                              # capped at 1
    ({"a": 0.0, "b": 1.0}, {"a": 0.0, "b": 1.0}),
])
def test_holm__table(p_values, adjusted):
    got = holm(p_values)
    assert list(got) == list(p_values)  # keyed as given
    assert got == pytest.approx(adjusted)


@pytest.mark.parametrize("bad", [{"a": -0.1}, {"a": 1.5}, {"a": float("nan")}, {"a": None}])
def test_holm__refuses_a_non_probability(bad):
    with pytest.raises(ValueError):
        holm(bad)


# stage valid rates per arm and seed: rule beats fixed steadily, gap by less and noisily, random not at all
THREE_ARMS = {"fixed": (0.40, 0.36, 0.45), "rule": (0.45, 0.40, 0.50), "gap": (0.43, 0.41, 0.46),
              "random": (0.41, 0.35, 0.46)}


def _three_arm_runs(versions: dict | None = None) -> list[RunRecord]:
    runs = [_fake_run(arm, seed, values[seed]) for arm, values in THREE_ARMS.items() for seed in range(3)]
    for run in runs:
        if versions is not None:
            _with_manifest(run, versions=dict(versions))
    return runs


def _headline(runs: list[RunRecord]) -> tuple[str, str]:
    """The key and label of the first compared metric any of ``runs`` has (what the text gives p values for)."""
    from curriculum.reports.report import COMPARE_METRICS, run_figures

    return next((key, label) for key, label, _ in COMPARE_METRICS if any(key in run_figures(run) for run in runs))


@pytest.mark.parametrize("valid_rates, cvar", [
    ([0.5], 0.5),  # one cell: itself
    ([0.9, 0.2, 0.7, 0.4, 0.8, 0.6, 0.5, 1.0, 0.3, 0.95], 0.2),  # 10 cells: the worst one
    ([0.9, 0.2, 0.7, 0.4, 0.8, 0.6, 0.5, 1.0, 0.3, 0.95, 0.1], 0.15),  # 11 cells: ceil(1.1) = the worst two
])
def test_run_figures__test_cvar_is_the_eval_tables_worst_tenth_of_the_trained_agent_counts_test_cells(valid_rates, cvar):
    from curriculum.reports.report import compare_table, render_seed_comparison, run_figures, seed_comparison
    from policy.evaluation import EvalTable

    run = _fake_run("fixed", 0, 0.5)
    # the trained agent count's cells (2 agents) are the test CVaR's, as they are test %'s; the transfer cells
    # (3 agents, all failed here) have their own column and must not drown the tail
    cells = {f"2x{3 + index}": {"valid_rate": rate, "optimal_rate": rate / 2, "episodes": 10}
             for index, rate in enumerate(valid_rates)}
    transfer = {f"3x{3 + index}": {"valid_rate": 0.0, "optimal_rate": 0.0, "episodes": 10}
                for index in range(len(valid_rates))}
    run.final = EvalTable.from_dict({"suite": "s", "cells": {**cells, **transfer}})
    table = EvalTable("s", {}, {tuple(int(part) for part in key.split("x")): (cell["valid_rate"],
                                                                             cell["optimal_rate"], 10)
                                for key, cell in cells.items()})
    assert run_figures(run)["test_cvar"] == pytest.approx(cvar) == table.cvar10_valid()
    text = compare_table([run])
    header, first, second = text.splitlines()[1:4]
    assert header.split()[-1] == "cvar10" and first.split()[-1] == f"{100 * cvar:.1f}"
    assert second.split()[1] == "3a" and second.split()[-1] == "0.0"  # each agent count's row its own tail
    assert "worst 10% of cells" in text.splitlines()[0]
    rendered = render_seed_comparison(seed_comparison([run]))
    assert "test CVaR %" in rendered and all(len(line) <= 80 for line in rendered.splitlines())
    assert run_figures(_fake_run("fixed", 0, 0.5)).get("test_cvar") is None  # no final evaluation: none


def test_seed_comparison__p_holm_and_per_seed_in_the_dict_and_the_text():
    from curriculum.reports.report import render_seed_comparison, run_arm, run_figures, run_seed, seed_comparison

    runs = _three_arm_runs({"python": "3.12.3", "torch": "2.12.0"})
    result = seed_comparison(runs)
    key, label = _headline(runs)
    assert key == "valid"  # the fake runs have no final evaluation: the evidence set's valid rate leads
    assert result.primary is None and result.mixed_installations == ()
    fixed = THREE_ARMS["fixed"]
    raw = {arm: paired_p_value([THREE_ARMS[arm][seed] - fixed[seed] for seed in range(3)])
           for arm in ("rule", "gap", "random")}
    adjusted = holm(raw)
    assert result.holm_arms["valid"] == ("rule", "gap", "random")
    for arm in raw:
        diff = result.arms[arm].vs_reference["valid"]
        assert diff.p == pytest.approx(raw[arm]) and diff.p_holm == pytest.approx(adjusted[arm])
        assert diff.p_holm >= diff.p
    for run in runs:  # every figure of every run, by arm and seed
        assert result.arms[run_arm(run)].per_seed[run_seed(run)] == run_figures(run)
    assert result.arms["fixed"].per_seed[2]["valid"] == pytest.approx(0.45)
    assert result.arms["rule"].per_seed[1]["lift"] == pytest.approx(0.40 - 0.3)
    assert result.arms["rule"].vs_reference["lift"].p_holm is not None  # every metric has its family
    document = json.loads(json.dumps(result.to_dict()))
    assert document["arms"]["gap"]["per_seed"]["1"]["valid"] == pytest.approx(0.41)
    assert list(document["arms"]["rule"]["vs_reference"]["valid"]) == ["mean", "half_width", "n", "low", "high", "p",
                                                                         "p_holm"]
    text = render_seed_comparison(result)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert f"p (paired t on {label}, Holm-adjusted over 3 arms" in " ".join(text.split()) and "primary" not in text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[-5:-1]}
    assert rows["arm"] == ["pairs", "p", "p", "Holm"]
    for arm in raw:
        assert rows[arm] == ["3", f"{raw[arm]:.3f}", f"{adjusted[arm]:.3f}"]


@pytest.mark.parametrize("first", ["lift", "pass1"])
def test_seed_comparison__the_headline_p_is_the_first_metric_shown(monkeypatch, first):
    from curriculum.reports import compare as report  # where the metrics are read

    metrics = [(key, label, help_text) for key, label, help_text in report.COMPARE_METRICS]
    monkeypatch.setattr(report, "COMPARE_METRICS", tuple(sorted(metrics, key=lambda metric: metric[0] != first)))
    label = {key: label for key, label, _ in metrics}[first]
    result = report.seed_comparison(_three_arm_runs())
    text = " ".join(report.render_seed_comparison(result).split())
    assert f"p (paired t on {label}, Holm-adjusted over 3 arms" in text
    p_rule = result.arms["rule"].vs_reference[first].p
    assert f"rule 3 {p_rule:.3f}" in text


def test_seed_comparison__a_pre_declared_primary_is_unadjusted_and_not_in_the_family():
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    result = seed_comparison(_three_arm_runs(), primary="gap")
    fixed = THREE_ARMS["fixed"]
    raw = {arm: paired_p_value([THREE_ARMS[arm][seed] - fixed[seed] for seed in range(3)])
           for arm in ("rule", "gap", "random")}
    gap = result.arms["gap"].vs_reference["valid"]
    assert result.primary == "gap" and gap.p_holm == gap.p == pytest.approx(raw["gap"])
    assert result.holm_arms["valid"] == ("rule", "random")
    assert result.arms["rule"].vs_reference["valid"].p_holm == pytest.approx(
        holm({"rule": raw["rule"], "random": raw["random"]})["rule"])
    text = render_seed_comparison(result)
    assert all(len(line) <= 80 for line in text.splitlines())
    flat = " ".join(text.split())
    assert f"primary comparison (pre-declared): gap vs fixed, p={raw['gap']:.3f}" in flat
    assert "Holm-adjusted over 2 arms" in flat
    assert not any(line.startswith("gap ") and len(line.split()) == 4 for line in text.splitlines())


@pytest.mark.parametrize("primary, runs", [
    ("nope", None),
    ("fixed", None),                     # the reference is not compared against itself
    ("rule", [_fake_run("rule", 0, 0.5), _fake_run("gap", 0, 0.4)]),  # no reference among the runs
])
def test_seed_comparison__primary_must_be_an_arm_compared(primary, runs):
    from curriculum.reports.report import seed_comparison

    with pytest.raises(ConfigError, match="--primary") as error:
        seed_comparison(runs or _three_arm_runs(), primary=primary)
    assert "one of the arms compared against fixed" in str(error.value)
    if runs is None:
        assert "rule, gap, random" in str(error.value)


def test_seed_comparison__single_pairs_have_no_p():
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    result = seed_comparison([_fake_run("fixed", 0, 0.4), _fake_run("rule", 0, 0.5)])
    diff = result.arms["rule"].vs_reference["valid"]
    assert diff.p is None and diff.p_holm is None and result.holm_arms == {}
    assert "Holm-adjusted over 0 arms; 2+ pairs needed" in " ".join(render_seed_comparison(result).split())


V12 = {"python": "3.12.3", "torch": "2.12.0", "trl": "0.20.0"}
V13 = {"python": "3.12.3", "torch": "2.13.0", "trl": "0.20.0"}


@pytest.mark.parametrize("manifest, installation", [
    ({}, {}),                                                     # an old or hand-made run: unknown
    ({"versions": V12}, V12),
    ({"versions": V12, "extended": [{"versions": V12}]}, V12),    # extended on the same installation
    ({"versions": V12, "extended": [{"versions": V13}]}, {**V12, "torch": "2.12.0 then 2.13.0"}),
    ({"versions": V12, "extended": [{"versions": V13}, {"versions": V12}]}, {**V12, "torch": "2.12.0 then 2.13.0"}),
    ({"versions": V12, "extended": [{"versions": {**V12, "peft": "0.17.0"}}]}, {**V12, "peft": "unknown then 0.17.0"}),
])
def test_run_installation__table(manifest, installation):
    from curriculum.reports.report import RunRecord, run_installation

    assert run_installation(RunRecord(dir="x", manifest=_manifest(manifest), stages=[])) == installation


def _with_versions(run, versions: dict | None, extended: dict | None = None):
    from curriculum.loop.manifest import Extension

    if versions is not None:
        _with_manifest(run, versions=dict(versions))
    if extended is not None:
        _with_manifest(run, extended=(Extension(from_stages=1, to_stages=2, versions=dict(extended)),))
    return run


@pytest.mark.parametrize("rule_s1, fixed_s1, differing", [
    ((V12, None), (V12, None), None),
    ((None, None), (None, None), None),                  # both unknown: the same
    ((V13, None), (V13, None), None),                    # seed 1's pair on another installation than seed 0's: fine
    ((V13, None), (V12, None), "torch 2.13.0 vs 2.12.0"),
    ((None, None), (V12, None), "versions unknown vs recorded"),
    ((V12, V13), (V12, None), "torch 2.12.0 then 2.13.0 vs 2.12.0"),  # extended after an upgrade
])
def test_seed_comparison__pairs_must_share_an_installation(rule_s1, fixed_s1, differing):
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    runs = [_with_versions(_fake_run("fixed", 0, 0.40), V12), _with_versions(_fake_run("rule", 0, 0.45), V12),
            _with_versions(_fake_run("fixed", 1, 0.36), *fixed_s1), _with_versions(_fake_run("rule", 1, 0.40), *rule_s1),
            _with_versions(_fake_run("other", 1, 0.30), *fixed_s1)]
    if differing is None:
        assert seed_comparison(runs).mixed_installations == ()
        return
    with pytest.raises(ConfigError, match="--allow-mixed") as error:
        seed_comparison(runs)
    message = str(error.value)
    assert f"runs made on one installation (differing: {differing})" in message
    assert "runs/x-rule-s1" in message and "runs/x-fixed-s1" in message and "s0" not in message
    result = seed_comparison(runs, allow_mixed=True)
    assert [entry.to_dict() for entry in result.mixed_installations] == [
        {"arm": "rule", "seeds": [1], "differing": [differing], "dirs": ["runs/x-rule-s1", "runs/x-fixed-s1"]}]
    text = render_seed_comparison(result)
    assert all(len(line) <= 80 for line in text.splitlines())
    flat = " ".join(text.split())
    assert f"WARNING: arm rule's pairs span installations ({differing}; seed 1): its differences against fixed " \
           "mix library effects with the engineer's" in flat
    assert any(line.startswith("rule!") for line in text.splitlines()) and "WARNING: arm other" not in flat


AVX512 = {"system": "Linux", "cpus": 2, "torch_cpu_capability": "AVX512", "kernel_env": {}}
AVX2 = {**AVX512, "torch_cpu_capability": "AVX2", "kernel_env": {"ATEN_CPU_CAPABILITY": "avx2"}}
OLD_MACHINE = {"system": "Linux", "machine": "x86_64", "processor": None, "cpus": 2}  # before the kernel facts


@pytest.mark.parametrize("manifest, kernels", [
    ({}, None),                                                    # no machine at all: not recorded
    ({"machine": OLD_MACHINE}, None),                              # written before the kernel facts
    ({"machine": AVX512}, {"torch_cpu_capability": "AVX512"}),
    ({"machine": {**AVX512, "torch_cpu_capability": None}}, {"torch_cpu_capability": "unknown"}),  # no torch
    ({"machine": AVX2}, {"torch_cpu_capability": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
    ({"machine": AVX512, "extended": [{"machine": AVX512}]}, {"torch_cpu_capability": "AVX512"}),
    ({"machine": AVX512, "extended": [{"machine": AVX2}]},
     {"torch_cpu_capability": "AVX512 then AVX2", "ATEN_CPU_CAPABILITY": "unset then avx2"}),
    ({"machine": AVX512, "extended": [{"versions": V12}]}, {"torch_cpu_capability": "AVX512"}),  # an old extension
    ({"machine": OLD_MACHINE, "extended": [{"machine": AVX2}]}, None),  # begun before the facts: as before
])
def test_run_kernels__table(manifest, kernels):
    from curriculum.reports.report import RunRecord, run_kernels

    assert run_kernels(RunRecord(dir="x", manifest=_manifest(manifest), stages=[])) == kernels


@pytest.mark.parametrize("rule_machine, fixed_machine, differing", [
    (AVX512, AVX512, None),
    (OLD_MACHINE, OLD_MACHINE, None),
    (OLD_MACHINE, AVX2, None),  # one run from before the kernel facts: compared on versions alone, as before
    ({**AVX512, "torch_cpu_capability": "AVX2"}, AVX512, "torch_cpu_capability AVX2 vs AVX512"),
    ({**AVX512, "kernel_env": {"OMP_NUM_THREADS": "4"}}, AVX512, "OMP_NUM_THREADS 4 vs unset"),
    ({**AVX512, "kernel_env": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}, {**AVX512, "kernel_env": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}},
     "ONEDNN_MAX_CPU_ISA AVX2 vs AVX512_CORE"),
    ({**AVX512, "cpu_model": "another CPU", "cpu_flags": []}, AVX512, None),  # the model alone chooses no kernels
])
def test_seed_comparison__pairs_must_share_the_cpu_kernels(rule_machine, fixed_machine, differing):
    from curriculum.reports.report import render_seed_comparison, seed_comparison

    runs = [_with_versions(_fake_run("fixed", 0, 0.40), V12), _with_versions(_fake_run("rule", 0, 0.45), V12)]
    from curriculum.loop.manifest import Machine

    _with_manifest(runs[0], machine=Machine.from_dict(fixed_machine))
    _with_manifest(runs[1], machine=Machine.from_dict(rule_machine))
    if differing is None:
        assert seed_comparison(runs).mixed_installations == ()
        return
    with pytest.raises(ConfigError, match="--allow-mixed") as error:
        seed_comparison(runs)
    assert f"runs made on one installation (differing: {differing})" in str(error.value)
    flat = " ".join(render_seed_comparison(seed_comparison(runs, allow_mixed=True)).split())
    assert f"WARNING: arm rule's pairs span installations ({differing}; seed 0)" in flat


@pytest.mark.parametrize("machine, field", [
    ({"torch_cpu_capability": 5}, "machine.torch_cpu_capability"),
    ({"torch_cpu_capability": "AVX2", "kernel_env": ["OMP_NUM_THREADS"]}, "machine.kernel_env"),
    ({"torch_cpu_capability": "AVX2", "kernel_env": {"OMP_NUM_THREADS": 4}}, "machine.kernel_env.'OMP_NUM_THREADS'"),
    ("x86_64", "machine"),
])
def test_load_run__ill_typed_kernel_facts_name_the_field(tmp_path, machine, field):
    from curriculum.reports.report import load_run

    run = _with_versions(_fake_run("fixed", 0, 0.40), V12)
    with pytest.raises(ConfigError) as error:
        load_run(_write_run(tmp_path, run, machine=machine))
    assert f"{field} =" in str(error.value) and "manifest.json" in str(error.value)


def _write_run(root: Path, run: RunRecord, **manifest_keys) -> Path:
    """A run folder on disk from a :func:`_fake_run` (manifest and stage records only; ``manifest_keys`` written
    into the manifest as they are)."""
    folder = root / Path(run.dir).name
    (folder / "stage-01").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({**run.manifest.to_dict(), **manifest_keys}))
    for record in run.stages:
        (folder / f"stage-{record.stage:02d}" / "stage.json").write_text(json.dumps(record.to_dict()))
    return folder


def test_cli_compare__help_names_primary_and_allow_mixed():
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "compare", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--primary ARM" in result.stdout and "--allow-mixed" in result.stdout and "Holm" in result.stdout


def test_cli_compare__primary_allow_mixed_and_json_pass_through(tmp_path):
    runs = _three_arm_runs(V12)
    _with_manifest(runs[5], versions=V13)  # rule, seed 2
    folders = [str(_write_run(tmp_path, run)) for run in runs]

    def compare(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "curriculum.cli", "compare", *folders, *flags], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    refused = compare("--json")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "torch 2.13.0 vs 2.12.0" in refused.stderr and "--allow-mixed" in refused.stderr
    unknown = compare("--primary", "nope", "--allow-mixed")
    assert unknown.returncode == 2 and "--primary" in unknown.stderr and "Traceback" not in unknown.stderr
    parsed = json.loads(compare("--json", "--primary", "rule", "--allow-mixed").stdout)
    assert parsed["primary"] == "rule" and [entry["arm"] for entry in parsed["mixed_installations"]] == ["rule"]
    rule = parsed["arms"]["rule"]
    assert rule["vs_reference"]["valid"]["p_holm"] == rule["vs_reference"]["valid"]["p"] is not None
    assert rule["per_seed"]["2"]["valid"] == pytest.approx(0.50)
    text = compare("--primary", "rule", "--allow-mixed")
    assert text.returncode == 0, text.stderr
    assert "primary comparison (pre-declared): rule vs fixed" in text.stdout
    assert "WARNING: arm rule's pairs span installations" in text.stdout

def test_parse_arms__named_overrides_and_clear_errors():
    from curriculum.commands import COMPARE_ENGINEERS, _parse_arms
    from curriculum.config import preset

    defaults = _parse_arms(None)
    assert {name: arm for name, arm in defaults.items() if name not in ("gap-drop", "gap-band")} == {
        spec.replace(":", "-"): {"engineer.spec": spec} for spec in COMPARE_ENGINEERS}
    # the extra default arms are valid run configs on the preset they were measured on
    config = preset("small").with_overrides(**defaults["gap-drop"])
    assert (config.engineer.spec, config.engineer.options, config.engineer.plan_first) == ("gap", {"remedy": "drop"}, True)
    config = preset("small").with_overrides(**defaults["gap-band"])
    assert config.engineer.options == {"remedy": "drop", "lengths": "frontier"} and config.engineer.plan_first
    # the field's curricula are default arms too, each a valid run config of the small preset by its bare name
    for name in ("window", "target", "replay", "failures"):
        assert _parse_arms([name]) == {name: {"engineer.spec": name}}
        assert preset("small").with_overrides(**defaults[name]).engineer.spec == name
    arms = _parse_arms(["nofail=engineer.context=[behavior]", "rft=training.trainer=rft;training.steps=3"])
    assert arms == {"nofail": {"engineer.context": ["behavior"]},
                    "rft": {"training.trainer": "rft", "training.steps": 3}}
    for bad in ["noequals", "=engineer.spec=rule", "x=", "a/b=engineer.spec=rule"]:
        with pytest.raises(ConfigError, match="--arm"):
            _parse_arms([bad])
    with pytest.raises(ConfigError, match="--arm"):
        _parse_arms(["a=engineer.spec=rule", "a=engineer.spec=fixed"])


TINY_COMPARE = ["stages=1", "training.steps=2", "training.prompts_per_step=2", "training.generations=2",
                "training.max_completion_length=24", "warm_start.steps=4", "warm_start.samples=32",
                "warm_start.batch_size=16", "validation.samples=8", "validation.sampled_k=2",
                "evaluation_suite=train-2agent-quick", "cpu_threads=1"]


def _compare_command(out: Path) -> list[str]:
    return [sys.executable, "-m", "curriculum.cli", "train", "--preset", "tiny", "--compare", "--seeds", "2",
            "--name", "cmp", "--output-dir", str(out), "--arm", "fixed=engineer.spec=fixed",
            "--arm", "rule=engineer.spec=rule", "--arm", "rft=engineer.spec=rule;training.trainer=rft;training.rft_rounds=2;training.rft_min_kept=1", "--set", *TINY_COMPARE]


def test_train_compare__two_seeds_two_arms_end_to_end_then_kill_and_resume(tmp_path):
    out = tmp_path / "runs"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Kill the comparison once the first seed's two runs are finished and the second seed's run has started.
    process = subprocess.Popen(_compare_command(out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    finished_first = [out / f"cmp-{arm}-s0" / "final" / "table.json" for arm in ("fixed", "rule", "rft")]
    deadline = time.time() + 600
    while time.time() < deadline and process.poll() is None:
        if all(p.exists() for p in finished_first) and (out / "cmp-fixed-s1" / "manifest.json").exists():
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    process.wait()
    assert all(p.exists() for p in finished_first), "the comparison ended before the first seed finished"
    kept = {p: p.read_bytes() for p in finished_first}
    stage_record = (out / "cmp-rft-s0" / "stage-01" / "stage.json").read_bytes()
    result = subprocess.run(_compare_command(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    for path, data in kept.items():  # finished runs are read back, not redone
        assert path.read_bytes() == data
    assert (out / "cmp-rft-s0" / "stage-01" / "stage.json").read_bytes() == stage_record
    assert "seeds: 0, 1" in result.stdout and "paired difference against fixed" in result.stdout
    assert (out / "cmp-compare" / "curves.png").stat().st_size > 1000
    # the warm start is shared within a seed and differs between seeds
    ws = {name: (out / name / "warm_start" / "model" / "model.safetensors").read_bytes()
          for name in ("cmp-fixed-s0", "cmp-rft-s0", "cmp-fixed-s1")}
    assert ws["cmp-fixed-s0"] == ws["cmp-rft-s0"] != ws["cmp-fixed-s1"]
    # stage 1 is trained once per seed for arms that differ only in the engineer, never across trainers
    stage_one = {name: (out / name / "stage-01" / "model" / "model.safetensors").read_bytes()
                 for name in ("cmp-fixed-s1", "cmp-rule-s1")}
    assert stage_one["cmp-fixed-s1"] == stage_one["cmp-rule-s1"]  # (the rft arm trains its own: not shared)
    assert "cmp-rule-s1: stage 1 shared with cmp-fixed-s1" in result.stderr and "cmp-rft-s1: stage 1" not in result.stderr
    decisions = [json.loads((out / name / "stage-01" / "decision.json").read_text())["engineer"]
                 for name in ("cmp-fixed-s1", "cmp-rule-s1")]
    assert decisions == ["fixed", "rule"]
    records = {name: json.loads((out / name / "stage-01" / "stage.json").read_text())
               for name in ("cmp-fixed-s1", "cmp-rule-s1")}
    assert "shared_from" not in records["cmp-fixed-s1"]  # the copy names the run that trained and timed it
    assert records["cmp-rule-s1"]["shared_from"] == str(out / "cmp-fixed-s1")
    record = json.loads((out / "cmp-rft-s1" / "stage-01" / "stage.json").read_text())
    assert record["train"]["trainer"] == "rft" and 0.0 <= record["scores"]["sampled_valid_rate"] <= 1.0
    # the rejection-sampling stage's groups reach the engineer, named as what they are
    assert record["train"]["signal"]["trainer"] == "rft" and record["train"]["signal"]["by_size"]
    context_text = json.loads((out / "cmp-rft-s1" / "stage-01" / "decision.json").read_text())["context_text"]
    assert "(its rejection-sampling groups: each instance's samples" in context_text
    summary = json.loads((out / "cmp-rft-s1" / "stage-01" / "summary.json").read_text())
    assert summary["sampled"]["k"] == 2 and set(summary["sampled"]["by_size"]) <= {"3", "4", "5", "6"}
    again = subprocess.run([sys.executable, "-m", "curriculum.cli", "compare", "--json",
                            *[str(out / f"cmp-{arm}-s{seed}") for arm in ("fixed", "rft") for seed in (0, 1)]],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    parsed = json.loads(again.stdout)
    assert parsed["arms"]["rft"]["seeds"] == [0, 1] and parsed["arms"]["rft"]["vs_reference"]["valid"]["n"] == 2
    report = subprocess.run([sys.executable, "-m", "curriculum.cli", "report", str(out / "cmp-fixed-s0"),
                             str(out / "cmp-rft-s0"), "--plots", str(tmp_path / "plots")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "plots" / "curves.png").exists()


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2]", '{"run_config": 5}', '{"seed": 0}'])
def test_compare__corrupt_or_empty_manifest_is_one_line_exit_2(tmp_path, text):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(text)
    for command in ("compare", "report"):
        result = subprocess.run([sys.executable, "-m", "curriculum.cli", command, str(run)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1000:]
        assert "manifest.json" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, field", [
    (["--seeds", "3"], "--seeds"),
    (["--arm", "a=engineer.spec=rule"], "--arm"),
    (["--compare", "--seeds", "0"], "--seeds"),
    (["--compare", "--arm", "bad"], "--arm"),
    (["--compare", "--arm", "fixed", "--arm", "x=seed=5"], "seed"),
    (["--compare", "--arm", "x=name=foo"], "name"),
])
def test_train__seed_and_arm_flags_are_checked_before_any_work(tmp_path, args, field):
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--output-dir", str(tmp_path), *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and field in result.stderr and "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())  # nothing was started


@pytest.mark.parametrize("arm, field", [
    ("bogus", "--arm = 'bogus'"),  # an unknown bare arm name
    ("x=engineer.spec=nope", "--arm x: engineer.spec = 'nope'"),
    ("x=engineer.spec=replay;engineer.options.share=5", "--arm x: engineer.options.share = 5"),
    ("x=initial_config.sizes.6.min_makespan=9;initial_config.sizes.6.max_makespan=2",
     "--arm x: initial_config.sizes.6.max_makespan = 2"),
    ("x=training.nope=1", "--arm x: training.nope = 1"),
])
def test_train_compare__print_config_refuses_an_arm_the_run_would_refuse(tmp_path, arm, field):
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--preset", "tiny", "--output-dir",
                             str(tmp_path), "--compare", "--arm", "fixed", "--arm", arm, "--print-config"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "" and field in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())
    valid = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--preset", "tiny", "--output-dir",
                            str(tmp_path), "--compare", "--arm", "fixed", "--arm", "gap-band", "--print-config"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert valid.returncode == 0 and valid.stdout.startswith("name: tiny"), valid.stderr


def test_train_compare__an_arm_folder_made_by_another_run_config_is_refused_before_any_arm_trains(tmp_path):
    from curriculum.config import preset
    from curriculum.loop.folder import RUN_PROTOCOL

    base = preset("tiny").with_overrides(output_dir=str(tmp_path))
    other = base.with_overrides(name=f"{base.name}-fixed", arm="fixed", seed=0, **{"training.steps": 7})
    other.run_dir.mkdir(parents=True)
    (other.run_dir / "manifest.json").write_text(json.dumps({"protocol": RUN_PROTOCOL, "run_config": other.to_dict()}))
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--preset", "tiny", "--output-dir",
                             str(tmp_path), "--compare", "--arm", "gap", "--arm", "fixed"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "differs in training.steps" in result.stderr, result.stderr
    assert "==" not in result.stderr and sorted(path.name for path in tmp_path.iterdir()) == [other.run_dir.name]


def test_train__repeated_set_flags_add_up():
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--preset", "small", "--print-config",
                             "--set", "engineer.spec=progress", "--set", "engineer.options={scale: absolute}",
                             "stages=2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "spec: progress" in result.stdout and "scale: absolute" in result.stdout and "stages: 2" in result.stdout


@pytest.mark.parametrize("spec, names", [
    ("x=seed=5", "seed"),  # the comparison sets seed, name and arm per run itself
    ("x=name=foo", "name"),
    ("x=arm=other", "arm"),
    ("x=engineer.spec=rule;seed=5", "seed"),
    ("a\nb=engineer.spec=rule", "newline"),
    ("a\tb=engineer.spec=rule", "control"),
    ("a" * 101 + "=engineer.spec=rule", "100 characters"),
    ("a\\b=engineer.spec=rule", "--arm"),
    ("x=training.learning_rate=1e309", "finite"),
    ("x=training.learning_rate=.nan", "finite"),
    ("x=engineer.options.low=[1e309]", "finite"),
    ("x=training.steps=3;training.steps=4", "training.steps"),  # a duplicate key within one arm
])
def test_parse_arms__reserved_keys_bad_names_non_finite_values_and_duplicates_are_refused(spec, names):
    from curriculum.commands import _parse_arms

    with pytest.raises(ConfigError) as caught:
        _parse_arms(["fixed", spec])
    message = str(caught.value)
    assert names in message and "--arm" in message and len(message) < 400 and "\n" not in message, message


def test_parse_arms__the_longest_name_and_a_bare_default_name_still_work():
    from curriculum.commands import _parse_arms, default_arms

    assert _parse_arms(["a" * 100 + "=engineer.spec=rule", "gap-band"]) == {
        "a" * 100: {"engineer.spec": "rule"}, "gap-band": default_arms()["gap-band"]}


def test_parse_arms__a_bare_default_name_picks_that_arm():
    from curriculum.commands import _parse_arms, default_arms

    arms = _parse_arms(["fixed", "gap-band", "mine=engineer.spec=rule"])
    assert arms == {"fixed": default_arms()["fixed"], "gap-band": default_arms()["gap-band"],
                    "mine": {"engineer.spec": "rule"}}
    with pytest.raises(ConfigError, match="default arm"):
        _parse_arms(["no-such-arm"])
    with pytest.raises(ConfigError, match="--arm"):
        _parse_arms(["fixed", "fixed"])


def _diff(mean, low, high, n, p):
    from curriculum.reports.report import PairedDifference
    from curriculum.reports.stats import Interval

    interval = Interval(mean, None if n < 2 else mean - low, n)
    assert (interval.low, interval.high) == pytest.approx((low, high)) if n >= 2 else interval.low is None
    return PairedDifference(interval, p, p)


@pytest.mark.parametrize("diff, expected", [
    (_diff(0.05, 0.01, 0.09, 6, 0.02), "verdict: band beat fixed on the test set: +5.0 points"),
    (_diff(0.02, -0.01, 0.05, 6, 0.15), "verdict: band did NOT beat fixed on the test set: +2.0 points"),
    (_diff(-0.03, -0.05, -0.01, 6, 0.01), "verdict: band did NOT beat fixed on the test set: -3.0 points"),
    (_diff(0.04, None, None, 1, None), "on one seed, which measures nothing"),
    (None, "verdict: no test-set comparison of band against fixed"),
])
def test_verdict__says_plainly_whether_the_primary_arm_beat_fixed(diff, expected):
    from curriculum.commands import verdict

    from curriculum.reports.report import ArmComparison, SeedComparison

    arm = ArmComparison(seeds=(), per_seed={}, metrics={}, vs_reference={"test": diff} if diff else {})
    result = SeedComparison("fixed", "band", {"band": arm, "fixed": ArmComparison((), {}, {}, {})}, {})
    assert verdict(result).startswith(expected) or expected in verdict(result)


def test_train_compare__every_arm_is_validated_before_the_first_run(tmp_path):
    """A bad second arm (or an unknown --primary) is refused before the first arm trains anything."""
    base = [sys.executable, "-m", "curriculum.cli", "train", "--preset", "tiny", "--compare", "--output-dir",
            str(tmp_path), "--arm", "fixed"]
    bad_arm = subprocess.run(base + ["--arm", "bad=training.steps=-3"], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    assert bad_arm.returncode == 2 and "training.steps" in bad_arm.stderr and "Traceback" not in bad_arm.stderr
    bad_primary = subprocess.run(base + ["--arm", "gap-band", "--primary", "rule"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=300)
    assert bad_primary.returncode == 2 and "--primary" in bad_primary.stderr
    assert not list(tmp_path.iterdir())  # nothing was started


MAIN_JOB_REDUCED = ["warm_start.steps=4", "warm_start.samples=64", "warm_start.batch_size=16", "training.steps=2",
                    "training.prompts_per_step=4", "training.rft_min_kept=1", "initial_config.samples=16",
                    "validation.samples=24", "evaluation_suite=test-small-quick", "cpu_threads=1"]


def test_main_job__the_readme_command_at_a_reduced_size_ends_with_the_test_set_and_a_verdict(tmp_path):
    """The README's first command (``train --preset demo --compare --arm fixed --arm gap-band --primary gap-band``)
    with its budget cut: both arms share the warm start, the engineered one decides, the run ends with the test
    set first and a verdict line."""
    from tests.project.test_readme import main_job_command

    command = main_job_command()
    assert command[:2] == ["mapf-lake", "train"] and "--primary" in command
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", *command[1:], "--output-dir", str(tmp_path),
                             "--set", *MAIN_JOB_REDUCED], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.index("test set (read by nothing but this score):") < out.index("evidence set (what the engineer saw):")
    assert out.strip().splitlines()[-1].startswith("verdict: gap-band vs fixed on the test set")
    assert "engineer gap" in result.stderr and "before stage 1: engineer gap" in result.stderr
    fixed, band = tmp_path / "demo-fixed", tmp_path / "demo-gap-band"
    assert (fixed / "warm_start" / "model" / "model.safetensors").read_bytes() == (
        band / "warm_start" / "model" / "model.safetensors").read_bytes()
    for run in (fixed, band):
        table = json.loads((run / "final" / "table.json").read_text())
        assert table["suite"] == "test-small-quick" and {key.split("x")[0] for key in table["cells"]} == {"2", "3"}


def test_seed_comparison__every_compare_json_under_docs_results_reads_back():
    """``compare --json`` files read back typed (SeedComparison.from_dict); the ones with every field written
    today round-trip to the same document."""
    from curriculum.reports.report import SeedComparison

    files = [path for path in sorted((ROOT / "docs" / "results").rglob("*.json"))
             if '"vs_reference"' in path.read_text()]
    assert len(files) >= 15
    full = 0
    for path in files:
        document = json.loads(path.read_text())
        comparison = SeedComparison.from_dict(document)
        assert comparison.arms and all(arm.metrics for arm in comparison.arms.values()), path
        if {"primary", "holm_arms", "mixed_installations"} <= set(document):
            full += 1
            assert json.loads(json.dumps(comparison.to_dict())) == document, path
    assert full >= 4


def test_seed_comparison__a_damaged_compare_json_is_refused_naming_the_key():
    from curriculum.reports.report import SeedComparison

    document = json.loads((ROOT / "docs" / "results" / "protocol" / "primary-s101-106.json").read_text())
    document["arms"]["band"]["vs_reference"]["test"]["p"] = 2.0
    with pytest.raises(ConfigError, match=r"arms\.band\.vs_reference\.test\.p"):
        SeedComparison.from_dict(document)
    document["arms"]["band"]["vs_reference"]["test"]["p"] = 0.5
    document["arms"]["band"]["per_seed"]["101"]["test"] = "x"
    with pytest.raises(ConfigError, match=r"arms\.band\.per_seed\.101\.test"):
        SeedComparison.from_dict(document)


def test_arm_variant__an_arm_of_another_engineer_drops_the_configs_engineer_options():
    """``smol-self``'s engineer options are its language model's: ``--arm fixed`` or ``--arm gap-band`` on it start
    from none (the fixed engineer refuses ``answer_mode``), an arm of the config's own engineer keeps them, and an
    arm that sets ``engineer.options`` itself gets what it set."""
    from curriculum.commands import _arm_variant, _parse_arms
    from curriculum.config import preset
    from engineer import make_engineer

    smol = preset("smol-self")
    assert smol.engineer.spec == "llm:self" and smol.engineer.options.get("answer_mode") == "constrained"
    arms = _parse_arms(["fixed", "gap-band", "llm-self", "own=engineer.spec=rule;engineer.options={}",
                        "self=engineer.spec=llm:self;engineer.options.max_new_tokens=64"])
    engineers = {name: _arm_variant(smol, name, 721, overrides, True).engineer for name, overrides in arms.items()}
    assert engineers["fixed"].options == {} and engineers["own"].options == {}
    assert engineers["gap-band"].options == {"remedy": "drop", "lengths": "frontier"}
    assert engineers["llm-self"].options == smol.engineer.options
    assert engineers["self"].options == {**smol.engineer.options, "max_new_tokens": 64}
    for name in ("fixed", "gap-band", "own"):
        make_engineer(engineers[name].spec, **engineers[name].options)  # each engineer takes its options
    # on a preset without engineer options nothing changes
    small = preset("small")
    assert _arm_variant(small, "fixed", 1, arms["fixed"], False) == small.with_overrides(
        name=f"{small.name}-fixed", arm="fixed", seed=1, **arms["fixed"])
