"""``report`` and ``compare`` read a run folder through ``load_run``: every record is a regular file of bounded
size holding the types and ranges ``train`` writes; anything else is one ConfigError naming the file and the key,
never a traceback, a hang, a memory blow-up or a rate printed as 700%.

The folder is written by hand (``run_folder_fixture``); each case damages one field of one file.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_folder_fixture import RECORD_FILES, run_documents, write_run_folder

from curriculum.reports.report import (compare_table, load_run, render_report, render_seed_comparison, run_figures,
                               seed_comparison)
from simulator.errors import ConfigError
from tests.documents import DELETE, set_at

ROOT = Path(__file__).resolve().parents[2]


def test_load_run__the_hand_made_folder_reads_and_renders(tmp_path):
    run = load_run(write_run_folder(tmp_path / "run"))
    assert run.stages[0].scores.valid_rate == 0.5 and run.warm_start.valid_rate == 0.25
    assert "kept: no change" in render_report(run)
    assert "r" in compare_table([run]) and "seeds: 5" in render_seed_comparison(seed_comparison([run]))
    assert run_figures(run)["test"] == 0.5


def test_load_run__a_run_config_written_before_its_newer_fields_reads_their_defaults(tmp_path):
    """A manifest from before ``arm``, ``training.trainer``, ``protocol`` and ``extended`` existed reads as the run it
    was: RunConfig's defaults for the fields added since (a run before ``trainer`` trained with GRPO)."""
    from curriculum.commands import arm_trainers
    from curriculum.reports.report import run_arm

    documents = run_documents()
    manifest = documents["manifest.json"]
    del manifest["protocol"], manifest["extended"], manifest["run_config"]["arm"]
    manifest["run_config"]["training"] = {"steps": 60, "learning_rate": 5e-5}
    run = load_run(write_run_folder(tmp_path / "run", documents))
    assert (run.run_config.arm, run.run_config.training.trainer, run.manifest.protocol) == ("", "grpo", None)
    assert run_arm(run) == "fixed" and arm_trainers([run]) == {"fixed": "grpo"}


def test_run_manifest__reads_back_what_it_writes(tmp_path):
    from curriculum.loop.manifest import RunManifest

    documents = run_documents()
    documents["manifest.json"]["machine"] = {"system": "Linux", "cpus": 2, "cpu_flags": ["avx512f"],
                                             "torch_cpu_capability": None, "kernel_env": {"OMP_NUM_THREADS": "1"}}
    documents["manifest.json"]["extended"] = [{"from_stages": 1, "to_stages": 2, "versions": {"torch": "2.13.0"}}]
    manifest = load_run(write_run_folder(tmp_path / "run", documents)).manifest
    assert manifest.machine.kernels.kernel_env == {"OMP_NUM_THREADS": "1"} and manifest.extended[0].to_stages == 2
    assert RunManifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest


# (file, dotted key set to the value, what the error names besides the file)
BAD_FIELDS = [
    ("manifest.json", "run_config.engineer", {}, "engineer"),
    ("manifest.json", "run_config.engineer.spec", ["fixed"], "spec"),
    ("manifest.json", "run_config.model", {}, "model"),
    ("manifest.json", "run_config.model", DELETE, "model"),
    ("manifest.json", "run_config.seed", "5", "seed"),
    ("manifest.json", "run_config.seed", 1e309, "'Infinity' is not allowed"),
    ("manifest.json", "run_config.seed", 10**400, "at most 40 digits"),
    ("manifest.json", "run_config.seed", True, "seed"),
    ("manifest.json", "run_config.arm", ["a"], "arm"),
    ("manifest.json", "run_config.initial_config", [1], "initial_config"),
    ("manifest.json", "run_config.initial_config.agents", [1, 10**12], "run_config.initial_config.agents"),
    ("manifest.json", "run_config.engineer.spec", DELETE, "run_config.engineer.spec"),
    ("manifest.json", "run_config.validation", DELETE, "run_config.validation.config"),
    ("manifest.json", "run_config.training", {"steps": 0}, "run_config.training.steps"),  # RunConfig's own bounds
    ("manifest.json", "run_config.prompt_style", "gone", "run_config.prompt_style"),
    ("manifest.json", "run_config.stale_key", 1, "run_config.stale_key"),
    ("manifest.json", "protocol", "2", "protocol"),
    ("manifest.json", "run_id", "not-hex", "run_id"),
    ("manifest.json", "seed", -1, "seed"),
    ("manifest.json", "machine", {"cpus": "2"}, "machine.cpus"),
    ("manifest.json", "machine", {"cpu_flags": [1]}, "machine.cpu_flags[0]"),
    ("manifest.json", "extended", [{"to_stages": 0}], "extended[0].to_stages"),
    ("manifest.json", "extended", [5], "extended[0]"),
    ("manifest.json", "versions", [], "versions"),
    ("manifest.json", "versions.torch", ["2.1"], "torch"),
    ("manifest.json", "extended", [{"versions": {"torch": {"a": 1}}}], "torch"),
    ("stage-01/stage.json", "stage", 1e309, "stage"),
    ("stage-01/stage.json", "stage", "1", "stage"),
    ("stage-01/stage.json", "stage", 1.5, "stage"),
    ("stage-01/stage.json", "stage", 10**30, "stage"),
    ("stage-01/stage.json", "stage", 2, "stage"),  # stage-01/ holding stage 2's record
    ("stage-01/stage.json", "scores.valid_rate", "0.5", "valid_rate"),
    ("stage-01/stage.json", "scores.valid_rate", [0.5], "valid_rate"),
    ("stage-01/stage.json", "scores.valid_rate", 7, "valid_rate"),
    ("stage-01/stage.json", "scores.valid_rate", -0.25, "valid_rate"),
    ("stage-01/stage.json", "scores.valid_rate", math.nan, "'NaN' is not allowed"),
    ("stage-01/stage.json", "scores.optimal_rate", math.inf, "'Infinity' is not allowed"),
    ("stage-01/stage.json", "scores.optimal_rate", None, "optimal_rate"),
    ("stage-01/stage.json", "scores.sampled_valid_rate", 2, "sampled_valid_rate"),
    ("stage-01/stage.json", "scores.reward_mean", math.nan, "'NaN' is not allowed"),
    ("stage-01/stage.json", "scores.zero_variance_share", "x", "zero_variance_share"),
    ("stage-01/stage.json", "train", [1], "train"),
    ("stage-01/stage.json", "train.step_seconds", 10**400, "at most 40 digits"),
    ("stage-01/stage.json", "train.reward_mean", math.inf, "'Infinity' is not allowed"),
    ("stage-01/stage.json", "timings", "x", "timings"),
    ("stage-01/stage.json", "timings.train", "10", "train"),
    ("stage-01/stage.json", "timings.train", -1, "train"),
    ("stage-01/stage.json", "decision.engineer", {}, "engineer"),
    ("stage-01/stage.json", "decision.outcome", ["kept"], "outcome"),
    ("stage-01/stage.json", "decision.diff", "abc", "diff"),
    ("stage-01/stage.json", "decision.diff", [1], "diff"),
    ("stage-01/stage.json", "decision.reason", 5, "reason"),
    ("stage-01/stage.json", "decision.accepted", "yes", "accepted"),
    ("stage-01/stage.json", "shared_from", 5, "shared_from"),
    ("stage-01/stage.json", "model", {}, "model"),
    ("stage-01/stage.json", "churn", [], "churn"),
    ("stage-01/stage.json", "config", [], "config"),
    ("stage-01/stage.json", "next_config", 5, "next_config"),
    ("untrained/summary.json", "valid_rate", 7, "valid_rate"),
    ("warm_start/summary.json", "valid_rate", math.nan, "'NaN' is not allowed"),
    ("warm_start/summary.json", "optimal_rate", "x", "optimal_rate"),
    ("final/table.json", "cells", {}, "cells"),
    ("final/table.json", "cells", [], "cells"),
    ("final/table.json", "cells.2x3", {}, "2x3"),
    ("final/table.json", "cells.2x3.valid_rate", "0.5", "valid_rate"),
    ("final/table.json", "cells.2x3.valid_rate", 7, "valid_rate"),
    ("final/table.json", "cells.2x3.optimal_rate", math.nan, "'NaN' is not allowed"),
    ("final/table.json", "cells.bad", {"valid_rate": 0.5, "optimal_rate": 0.5}, "bad"),
    ("final/table.json", "cells." + "9" * 5000 + "x3", {"valid_rate": 0.5, "optimal_rate": 0.5}, "cells"),
    ("final/table.json", "mean.2", 5, "2"),
    ("final/table.json", "mean.2.valid_rate", 2, "valid_rate"),
    ("final/table.json", "suite", 5, "suite"),
    ("final/sampled.json", "k", 0, "k"),
    ("final/sampled.json", "k", "2", "k"),
    ("final/sampled.json", "k", 1e309, "'Infinity' is not allowed"),
    ("final/sampled.json", "cells", [], "cells"),
    ("final/sampled.json", "cells.2x3.valid_rate", 2, "valid_rate"),
]


@pytest.mark.parametrize("name, key, value, names", BAD_FIELDS,
                         ids=[f"{name}:{key[:30]}={str(value)[:12]}" for name, key, value, _ in BAD_FIELDS])
def test_load_run__a_wrong_typed_or_out_of_range_field_names_file_and_key(tmp_path, name, key, value, names):
    documents = run_documents()
    set_at(documents[name], key.split("."), value)
    folder = write_run_folder(tmp_path / "run", documents)  # NaN and Infinity: json writes and reads them back
    with pytest.raises(ConfigError) as caught:
        load_run(folder)
    message = str(caught.value)
    assert str(folder / name) in message and names in message, message
    assert len(message) < 600


@pytest.mark.parametrize("name", RECORD_FILES)
@pytest.mark.parametrize("how", ["dev-zero", "fifo", "huge", "folder"])
def test_load_run__a_record_that_is_not_a_small_regular_file_is_refused_at_once(tmp_path, monkeypatch, name, how):
    import curriculum.loop.records as records_module

    folder = write_run_folder(tmp_path / "run")
    path = folder / name
    path.unlink()
    if how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(path)  # opening it for reading would block until a writer comes
    elif how == "huge":
        monkeypatch.setattr(records_module, "MAX_RECORD_BYTES", 1000)
        path.write_text(json.dumps(run_documents()[name]) + " " * 1000)
    else:
        path.mkdir()
    with pytest.raises(ConfigError) as caught:
        load_run(folder)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("name", RECORD_FILES)
def test_cli_report_and_compare__a_damaged_record_is_one_line_exit_2(tmp_path, name):
    documents = run_documents()
    damaged = {"manifest.json": "run_config", "stage-01/stage.json": "scores", "final/table.json": "suite",
               "final/sampled.json": "k"}.get(name, "valid_rate")
    documents[name][damaged] = ["wrong"]
    folder = write_run_folder(tmp_path / "run", documents)
    for command in ("report", "compare"):
        result = subprocess.run([sys.executable, "-m", "curriculum.cli", command, str(folder)], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1500:]
        assert name in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_write_curves__names_the_evidence_set_counts_seeds_and_ticks_whole_stages(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from curriculum.reports.report import write_curves

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read its axes
    write_curves([load_run(write_run_folder(tmp_path / "run"))], tmp_path / "plots")
    ax = figures[0].axes[0]
    assert ax.get_ylabel() == "evidence valid %"
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["fixed (1 seed)", "fixed pass@1"]
    low, high = ax.get_xlim()
    ticks = [tick for tick in ax.get_xticks() if low <= tick <= high]
    assert ticks and all(float(tick).is_integer() for tick in ticks)
