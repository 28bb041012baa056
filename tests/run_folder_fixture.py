"""A small finished run folder written by hand, every record file ``report`` and ``compare`` read (manifest, a
stage record, the untrained and warm-start validation summaries, the final table and its sampled pass@1), as
``mapf-lake train`` writes them: nothing here trains or generates anything.

Used by the reader tests (``test_load_run.py``) and the fuzz tests (``test_fuzz.py``), which damage one file at a
time.
"""

from __future__ import annotations

import json
from pathlib import Path

# Where each record of the folder lies, relative to the run folder.
RECORD_FILES = ("manifest.json", "stage-01/stage.json", "untrained/summary.json", "warm_start/summary.json",
                "final/table.json", "final/sampled.json")


def _stage_config() -> dict:
    return {"agents": 2, "samples": 8, "seed": 3, "sizes": {"3": {"data_ratio": 0.5, "hole_ratio": 0.2,
                                                                  "wait_ratio": 0.0},
                                                            "4": {"data_ratio": 0.5, "hole_ratio": 0.2,
                                                                  "wait_ratio": 0.0}}}


def _summary(valid_rate: float) -> dict:
    """A validation summary (``FailureSummary.to_dict`` of no episodes) with its rates set to ``valid_rate``."""
    from replays.mining import summarize

    return {**summarize([]).to_dict(), "valid_rate": valid_rate, "optimal_rate": valid_rate / 2}


def run_documents() -> dict[str, dict]:
    """{relative path: JSON document} of a finished one-stage run."""
    config = _stage_config()
    # the fields a run config needs (RunConfig reads the rest as their defaults, as for a run made before they existed)
    run_config = {"name": "hand", "arm": "", "model": "tiny", "seed": 5, "initial_config": _stage_config(),
                  "validation": {"config": _stage_config()}, "engineer": {"spec": "fixed"},
                  "evaluation_suite": "test-small"}
    return {
        "manifest.json": {"protocol": 2, "run_config": run_config, "versions": {"python": "3.12.0", "torch": None},
                          "extended": []},
        "stage-01/stage.json": {
            "stage": 1, "config": config, "next_config": config, "model": "stage-01/model",
            "generation": {}, "churn": {"changed": 0.25, "gained": 1, "lost": 0},
            "timings": {"train": 10.0, "validation": 2.0, "judging": 0.5},
            "train": {"step_seconds": 1.5, "reward_mean": 0.4, "zero_variance_share": 0.25,
                      "completion_tokens_mean": 20.0},
            "scores": {"valid_rate": 0.5, "optimal_rate": 0.25, "reward_mean": 0.4, "sampled_valid_rate": 0.375,
                       "zero_variance_share": 0.25},
            "decision": {"outcome": "kept", "engineer": "fixed", "accepted": True, "reason": "fixed", "diff": [],
                         "repairs": []}},
        "untrained/summary.json": _summary(0.0),
        "warm_start/summary.json": _summary(0.25),
        "final/table.json": {"suite": "test-small", "policy": {"spec": "tiny"},
                             "cells": {"2x3": {"valid_rate": 0.5, "optimal_rate": 0.25, "episodes": 4},
                                       "3x4": {"valid_rate": 0.25, "optimal_rate": 0.0, "episodes": 4}},
                             "mean": {"2": {"valid_rate": 0.5, "optimal_rate": 0.25},
                                      "3": {"valid_rate": 0.25, "optimal_rate": 0.0}},
                             "failures": {}, "reused_cells": 0},
        "final/sampled.json": {"suite": "test-small", "k": 2, "temperature": 1.0, "valid_rate": 0.5,
                               "optimal_rate": 0.25,
                               "cells": {"2x3": {"valid_rate": 0.5, "optimal_rate": 0.25}}},
    }


def write_run_folder(folder: Path, documents: dict[str, dict] | None = None) -> Path:
    """Write ``documents`` (default :func:`run_documents`) under ``folder``; returns the folder."""
    for relative, document in (documents or run_documents()).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document))
    return folder
