"""``mapf_lake(...)``: the command line run as a user runs it, in a subprocess from the repository root.

Shared by the subprocess tests of the CLI (``test_cli.py``, ``test_cli_users_sets.py``, ``test_render_cli.py``,
``test_gpu_path.py``); ``ROOT`` is the repository root.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mapf_lake(
    *args: str,
    stdin: str | None = None,
    check: bool = True,
    timeout: float = 300,
    without_env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``mapf-lake ARGS`` (``python -m curriculum.cli``) in the repository root, its output captured as text.

    Args:
        stdin: the text on its standard input; None gives it an empty one (a command that reads it sees the end).
        check: raise AssertionError, with its stderr, when it exits with a non-zero status.
        timeout: seconds before ``subprocess.TimeoutExpired``.
        without_env: environment variables it does not inherit (``DISPLAY``: no display, on purpose).
    """
    env = {key: value for key, value in os.environ.items() if key not in without_env} if without_env else None
    result = subprocess.run(
        [sys.executable, "-m", "curriculum.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
        env=env, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"mapf-lake {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result
