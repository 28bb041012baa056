"""Test helper: write a replay file slowly, announcing each episode, so a test can SIGKILL it mid-stream.

Usage: ``python tests/replays/replay_kill_writer.py PATH COUNT DELAY_S``. Prints ``wrote <n>`` (flushed) after each
episode; the test kills the process after a few and checks what is left under PATH.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402 - after the path setup

from replays.types import Episode, Outcome, ReplayHeader  # noqa: E402
from replays.writer import ReplayWriter  # noqa: E402
from simulator.types import Instance  # noqa: E402


def main() -> None:
    path, count, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    instance = Instance(grid=np.zeros((3, 3), np.int8), starts=[[0, 0]], goals=[[2, 2]])
    episode = Episode(
        instance=instance, labels=None, plan=None, parse_error="killed-writer episode",
        positions=np.zeros((1, 1, 2), np.int32), events=np.zeros((0, 1), np.int8),
        outcome=Outcome(False, 1, 0, -1, -1, -1, 0, optimal=False), completion="x" * 1000,
    )
    header = ReplayHeader.new(run_id="killed", stage=0, split="rollout", policy={"name": "slow"})
    with ReplayWriter(path, header) as writer:
        for n in range(count):
            writer.write(episode)
            writer.flush()  # make the temporary file grow on disk, as a long stream would
            print(f"wrote {n + 1}", flush=True)
            time.sleep(delay)


if __name__ == "__main__":
    main()
