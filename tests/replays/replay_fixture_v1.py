"""THE v1 REPLAY FIXTURE: its known content, and the script that wrote ``tests/fixtures/replay_v1.mlr``.

``tests/replays/test_replay_format.py`` checks that the checked-in file still loads and equals :func:`fixture_header`
and :func:`fixture_episodes`, so readers keep loading version-1 files after the format moves on.

Do not regenerate the file once a newer format version exists: it must stay a file written by the v1 writer.
While ``FORMAT_VERSION == 1`` it can be rewritten (byte-identical) with::

    .venv/bin/python tests/replays/replay_fixture_v1.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

FIXTURE_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "replay_v1.mlr"

if __name__ == "__main__":  # run as a script: make the package importable from the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from replays.types import Episode, InstanceLabels, Outcome, ReplayHeader  # noqa: E402 - after the path setup
from simulator import constants as C  # noqa: E402
from simulator.types import Instance, JointPlan  # noqa: E402

U, D, L, R, W = C.UP, C.DOWN, C.LEFT, C.RIGHT, C.WAIT


def fixture_header() -> ReplayHeader:
    return ReplayHeader(
        format_version=1,
        producer_version="mapf-frozenlake 0.1.0",
        run_id="fixture-v1",
        stage=2,
        split="validation",
        policy={"name": "oracle", "spec": "oracle", "prompt_style": "grid"},
        stage_config={
            "agents": [1, 3],
            "samples": 3,
            "seed": 7,
            "slip": 0.0,
            "horizon": 32,
            "sizes": {"4": {"data_ratio": 1.0, "hole_ratio": 0.125, "wait_ratio": 0.0}},
        },
        created="2026-01-01T00:00:00+00:00",
        extra={"note": "checked-in v1 fixture"},
    )


def fixture_episodes() -> list[Episode]:
    """Three episodes that cover the format: a valid one with text and every optional field, a parse error
    with no steps, and a hole fall on a map of more than 256 cells (two-byte cells)."""
    valid = Episode(
        instance=Instance(
            grid=[[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]],
            starts=[[0, 0], [0, 3]],
            goals=[[3, 0], [0, 1]],
        ),
        labels=InstanceLabels(size=4, seed=12_345_678_901, index=0, optimal_makespan=3, optimal_sum_of_costs=5,
                              sum_of_distances=5, needs_wait=False),
        plan=JointPlan.from_sequences([[D, D, D], [L, L]]),
        parse_error=None,
        positions=np.array([[[0, 0], [0, 3]], [[1, 0], [0, 2]], [[2, 0], [0, 1]], [[3, 0], [0, 1]]], np.int32),
        events=np.array([[0, 0], [0, C.EV_GOAL], [C.EV_GOAL, 0]], np.int8),
        outcome=Outcome(valid=True, optimal=True, failure=C.NO_FAILURE, fail_step=-1, fail_agent=-1, makespan=3,
                        sum_of_costs=5, agents_on_goal=2),
        reward=1.0,
        reward_components={"valid": 1.0, "optimal": 1.0, "length_penalty": -0.125},
        prompt="Map:\n....\n.H..\n...H\n....\nA0 (0,0) → G0 (3,0); A1 (0,3) → G1 (0,1)",
        completion="<think>short paths ✓</think>\nA0: D D D\nA1: L L",
        prompt_tokens=42,
        completion_tokens=17,
        timings={"generate_s": 0.5, "judge_s": 0.00025},
        slip=0.0,
        extra={"group": 3, "tags": ["ok", "ünïcode"], "blob": b"\x00\x01", "nested": {"depth": [1, [2, None]]}},
    )
    parse_error = Episode(
        instance=Instance(grid=np.zeros((3, 3), np.int8), starts=[[0, 0]], goals=[[2, 2]]),
        labels=None,
        plan=None,
        parse_error="line 1: expected 'A0:', found 'Agent zero'",
        positions=np.array([[[0, 0]]], np.int32),
        events=np.zeros((0, 1), np.int8),
        outcome=Outcome(valid=False, optimal=False, failure=C.PARSE_ERROR, fail_step=0, fail_agent=-1, makespan=-1,
                        sum_of_costs=-1, agents_on_goal=0),
        reward=-1.0,
        reward_components={"format": -1.0},
        prompt=None,
        completion="Agent zero goes down 🙂",
        prompt_tokens=0,
        completion_tokens=9,
        slip=0.1,
    )
    grid = np.zeros((17, 16), np.int8)
    grid[5, 5] = C.HOLE
    hole = Episode(
        instance=Instance(grid=grid, starts=[[5, 3], [0, 0], [16, 15]], goals=[[5, 8], [0, 2], [16, 13]]),
        labels=InstanceLabels(size=17, seed=0, index=2, optimal_makespan=5, optimal_sum_of_costs=9,
                              sum_of_distances=9, needs_wait=True),
        plan=JointPlan.from_sequences([[R, R, R, R, R], [R, R], [L, L, W]]),
        parse_error=None,
        positions=np.array(
            [[[5, 3], [0, 0], [16, 15]], [[5, 4], [0, 1], [16, 14]], [[5, 5], [0, 2], [16, 13]]], np.int32
        ),
        events=np.array([[0, 0, 0], [C.EV_HOLE, C.EV_GOAL, C.EV_GOAL | C.EV_SLIP]], np.int8),
        outcome=Outcome(valid=False, optimal=False, failure=C.FELL_IN_HOLE, fail_step=2, fail_agent=0, makespan=-1,
                        sum_of_costs=-1, agents_on_goal=2),
        reward=0.0,
        slip=0.05,
    )
    return [valid, parse_error, hole]


def write_fixture(path: Path = FIXTURE_PATH) -> None:
    from replays.container import FORMAT_VERSION
    from replays.writer import write_replay

    if FORMAT_VERSION != 1:
        raise SystemExit(f"refusing: the writer is at format version {FORMAT_VERSION}; the v1 fixture must stay v1")
    write_replay(path, fixture_header(), fixture_episodes())


if __name__ == "__main__":
    write_fixture()
    print(f"wrote {FIXTURE_PATH}")
