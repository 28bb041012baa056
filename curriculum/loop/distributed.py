"""Which process this is under ``accelerate launch`` / ``torchrun``, and how the others wait for its files.

Every process runs the stage loop and takes part in training; only the main one (rank 0) generates validation
answers, runs the engineer, evaluates and writes the run's records and the checkpoints' own files. The others
read those records back once they exist (:func:`wait_for_file`). One process alone is the main one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def process_rank() -> int:
    """This process's rank among the processes ``accelerate launch`` / ``torchrun`` started (0 when alone)."""
    try:
        return int(os.environ.get("RANK") or 0)
    except ValueError:
        return 0


def is_main_process() -> bool:
    """Whether this process writes the run's records and files (one process, or rank 0 of several)."""
    return process_rank() == 0


def wait_for_file(path: Path, poll_s: float = 2.0) -> Path:
    """Block until the main process has written ``path`` (files are written atomically, so existing = complete).
    A failed main process ends the launch (the launcher stops the others), so no timeout is needed here."""
    while not path.exists():
        time.sleep(poll_s)
    return path
