"""The tiny preset at test size: ``SMALL`` (two stages of two steps, a six-step warm start, 12 evidence instances,
the quick test suite) and ``small_config``, a run config of it in a test's folder.

Shared by the tests that run a curriculum (``tests/curriculum/``; their ``finished_run`` fixture is one such run)
and by the atomic-write tests of a run's folders (``tests/simulator/test_atomic.py``).
"""

from __future__ import annotations

from pathlib import Path

from curriculum.config import RunConfig, preset

SMALL = {
    "stages": 2,
    "training.steps": 2,
    "training.prompts_per_step": 2,
    "training.generations": 4,
    "warm_start.steps": 6,
    "warm_start.samples": 64,
    "warm_start.batch_size": 16,
    "validation.samples": 12,
    "evaluation_suite": "train-2agent-quick",
    "cpu_threads": None,  # the one-thread default: steady while other tests share the machine
}


def small_config(tmp_path: Path, name: str, **extra) -> RunConfig:
    return preset("tiny").with_overrides(name=name, output_dir=str(tmp_path), **{**SMALL, **extra})
