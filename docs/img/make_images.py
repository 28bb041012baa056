"""Remake the pictures of the README and the docs with the project's own export (``mapf-lake watch --png/--gif``).

    SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy .venv/bin/python docs/img/make_images.py

Writes ``replay.png`` and ``replay.gif`` (a greedy rollout's episode with path trails and a collision marked) and one
PNG per failure kind (``failure-<kind>.png``: episodes of a random policy, and optimal plans cut one move short for
``goal_not_reached``) next to this file. Same seeds, same pictures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAPF_LAKE = [sys.executable, "-m", "curriculum.cli"]
FRAME = "720x456"  # small enough that every picture stays well under 100 KB


def _lake(*args: str) -> None:
    subprocess.run([*MAPF_LAKE, *args], check=True, stdout=subprocess.DEVNULL)


def _first_episode_per_failure(replay_dir: Path) -> dict[str, tuple[int, int]]:
    """The first episode of each failure kind in the folder's replay file: kind -> (episode index, failure step)."""
    from replays.reader import read_replay
    from simulator.constants import FAILURE_NAMES

    (path,) = replay_dir.glob("*.mlr")
    _, episodes = read_replay(path)
    found: dict[str, tuple[int, int]] = {}
    for index, episode in enumerate(episodes):
        name = FAILURE_NAMES[episode.outcome.failure]
        if name != "none" and name not in found:
            found[name] = (index, episode.outcome.fail_step)
    return found


def _write_short_plans(out_dir: Path) -> None:
    """A replay of optimal plans with agent 0's last move cut: every episode ends with ``goal_not_reached`` (no
    scripted policy makes that failure often; they fail earlier)."""
    from policy.rollout import judge_episodes
    from replays.types import ReplayHeader
    from replays.writer import ReplayWriter
    from simulator.config import StageConfig
    from simulator.generator import generate
    from simulator.types import JointPlan

    config = StageConfig.from_dict({"agents": 3, "samples": 5, "seed": 2, "sizes": {
        5: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    items = generate(config).instances
    plans = []
    for item in items:
        sequences = [list(sequence) for sequence in item.plan.sequences()]
        sequences[0] = sequences[0][:-1]
        plans.append(JointPlan.from_sequences(sequences))
    header = ReplayHeader.new(run_id="docs-images", stage=0, split="rollout",
                              policy={"name": "oracle-cut", "spec": "oracle-cut", "kind": "scripted"},
                              stage_config=config.to_dict())
    out_dir.mkdir(parents=True)
    with ReplayWriter(out_dir / "short-plans.mlr", header) as writer:
        for episode in judge_episodes(items, plans):
            writer.write(episode)


def main() -> None:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    with tempfile.TemporaryDirectory() as tmp:
        greedy, scripted_random = Path(tmp, "greedy"), Path(tmp, "random")
        # Episode 3 of this rollout: two agents collide at step 3 while the third walks to its goal.
        _lake("rollout", "--policy", "greedy", "--size", "6", "--agents", "3", "--n", "20", "--seed", "4",
              "--out", str(greedy))
        _lake("watch", str(greedy), "--episode", "3", "--png", str(HERE / "replay.png"), "--resolution", FRAME)
        _lake("watch", str(greedy), "--episode", "3", "--gif", str(HERE / "replay.gif"), "--resolution", FRAME,
              "--fps", "2")
        _lake("rollout", "--policy", "random", "--size", "5", "--agents", "3", "--n", "200", "--seed", "1",
              "--out", str(scripted_random))
        short_plans = Path(tmp, "short-plans")
        _write_short_plans(short_plans)
        found = {**_first_episode_per_failure(short_plans), **_first_episode_per_failure(scripted_random)}
        for kind, (episode, step) in sorted(found.items()):
            source = short_plans if kind == "goal_not_reached" else scripted_random
            _lake("watch", str(source), "--episode", str(episode), "--step", str(step),
                  "--png", str(HERE / f"failure-{kind}.png"), "--resolution", FRAME)
    for picture in sorted(HERE.glob("*.png")) + sorted(HERE.glob("*.gif")):
        print(f"{picture.name}: {picture.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
