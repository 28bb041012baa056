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

import pytest

from curriculum.stats import mean_interval, paired_difference, t_quantile_975
from simulator.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


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


def _fake_run(arm: str, seed: int, stage_valid: float, warm: float = 0.3, final: float | None = None) -> dict:
    from curriculum.records import StageRecord
    from simulator.config import default_stage_config

    record = {"stage": 1, "config": default_stage_config().to_dict(), "decision": {"accepted": True},
              "scores": {"valid_rate": stage_valid, "optimal_rate": stage_valid / 2,
                         "sampled_valid_rate": stage_valid - 0.1}}
    run = {"dir": f"runs/x-{arm}-s{seed}", "warm_start": {"valid_rate": warm, "optimal_rate": warm / 2},
           "manifest": {"run_config": {"arm": arm, "seed": seed, "engineer": {"spec": arm}}},
           "stages": [StageRecord.from_dict(record)]}
    if final is not None:
        run["final"] = {"suite": "s", "cells": {"2a_3x3": {"valid_rate": final, "optimal_rate": final}}}
    return run


def test_seed_comparison__means_intervals_and_paired_differences():
    from curriculum.report import render_seed_comparison, seed_comparison

    runs = [_fake_run("rule", 0, 0.50), _fake_run("fixed", 0, 0.45), _fake_run("rule", 1, 0.40),
            _fake_run("fixed", 1, 0.36), _fake_run("rule", 2, 0.45), _fake_run("fixed", 2, 0.40)]
    result = seed_comparison(runs)
    assert result["reference"] == "fixed" and list(result["arms"]) == ["rule", "fixed"]
    rule = result["arms"]["rule"]
    assert rule["seeds"] == [0, 1, 2]
    assert rule["metrics"]["valid"]["mean"] == pytest.approx(0.45)
    assert rule["metrics"]["lift"]["mean"] == pytest.approx(0.15)
    assert rule["metrics"]["pass1"]["mean"] == pytest.approx(0.35)
    assert rule["vs_reference"]["valid"]["mean"] == pytest.approx(0.14 / 3)
    assert rule["vs_reference"]["valid"]["low"] > 0
    assert "final" not in rule["metrics"] and result["arms"]["fixed"]["vs_reference"] == {}
    text = render_seed_comparison(result)
    assert "seeds: 0, 1, 2" in text and "paired difference against fixed" in text and "+4.7 ±" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    with pytest.raises(ConfigError, match="seed 0 twice"):
        seed_comparison(runs + [_fake_run("rule", 0, 0.1)])


def test_seed_comparison__a_wide_interval_never_runs_into_the_next_cell():
    from curriculum.report import render_seed_comparison, seed_comparison

    text = render_seed_comparison(seed_comparison([_fake_run("fixed", 0, 0.9), _fake_run("fixed", 1, 0.1)]))
    row = next(line for line in text.splitlines() if line.startswith("fixed"))
    assert row.split()[1:5] == ["2", "50.0", "±", "508.2"]  # 2 seeds, then the valid cell on its own


def test_seed_comparison__without_the_reference_arm_has_no_differences():
    from curriculum.report import render_seed_comparison, seed_comparison

    result = seed_comparison([_fake_run("a", 0, 0.2, final=0.1), _fake_run("b", 0, 0.3, final=0.2)])
    assert result["reference"] is None
    assert result["arms"]["b"]["metrics"]["final"]["mean"] == pytest.approx(0.2)
    assert "paired" not in render_seed_comparison(result)


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
])
def test_train__seed_and_arm_flags_are_checked_before_any_work(tmp_path, args, field):
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--output-dir", str(tmp_path), *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and field in result.stderr and "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())  # nothing was started


def test_train__repeated_set_flags_add_up():
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--preset", "small", "--print-config",
                             "--set", "engineer.spec=progress", "--set", "engineer.options={scale: absolute}",
                             "stages=2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "spec: progress" in result.stdout and "scale: absolute" in result.stdout and "stages: 2" in result.stdout
