"""Known episodes for the render tests (shared by ``tests/render/test_render_*.py``), and a check that they are what
they claim to be.

The map (3 x 4; row 0 is the top)::

    A0 .  H  .
    .  .  .  G0
    A1 .  .  G1

Agent 0 walks D R R R to its goal, agent 1 walks R R R: a valid, optimal plan of makespan 4. The other
episodes break it in each way the rules know: a fall into the hole, a vertex conflict, an edge conflict, an
off-grid move, a goal not reached, and a completion that did not parse.
"""

from __future__ import annotations

from pathlib import Path

import msgpack
import numpy as np

from replays.types import Episode, Outcome, ReplayHeader
from replays.writer import ReplayWriter
from render.game import PlayGame
from simulator import constants as C
from simulator.types import Instance

U, D, L, R, W = C.UP, C.DOWN, C.LEFT, C.RIGHT, C.WAIT

INSTANCE = Instance(
    grid=[[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
    starts=[[0, 0], [2, 0]],
    goals=[[1, 3], [2, 3]],
)
HOLE_CELL = (0, 2)
OPTIMAL_MAKESPAN = 4
VALID_COMPLETION = "<think>agent 0 goes around the hole</think>\n<answer>\nagent 0: D R R R\nagent 1: R R R\n</answer>"

# name -> (joint actions per step, expected failure category)
CASES = {
    "valid": ([(D, R), (R, R), (R, R), (R, W)], C.NO_FAILURE),
    "hole": ([(R, W), (R, W)], C.FELL_IN_HOLE),
    "vertex": ([(D, U)], C.VERTEX_CONFLICT),
    "edge": ([(D, W), (D, U)], C.EDGE_CONFLICT),
    "illegal": ([(U, W)], C.ILLEGAL_MOVE),
    "not_reached": ([(R, R)], C.GOAL_NOT_REACHED),
}
ORDER = ("valid", "hole", "vertex", "edge", "illegal", "not_reached", "parse_error")


def played_episode(name: str) -> Episode:
    """Episode ``name`` of ``CASES``, made by playing its joint actions through ``PlayGame`` (so ``MapfEnv``)."""
    game = PlayGame(INSTANCE, optimal_makespan=OPTIMAL_MAKESPAN, origin="test")
    for joint in CASES[name][0]:
        for agent, action in enumerate(joint):
            game.select(agent)
            game.set_action(action, advance=False)
        game.commit()
    episode = game.to_episode()
    if name == "valid":
        episode.completion = VALID_COMPLETION
    return episode


def parse_error_episode() -> Episode:
    return Episode(
        instance=INSTANCE, labels=None, plan=None, parse_error="no line of the answer names an agent",
        positions=INSTANCE.starts[None].copy(), events=np.zeros((0, 2), np.int8),
        outcome=Outcome(False, C.PARSE_ERROR, 0, -1, -1, -1, 0, optimal=False), completion="I would rather not say.",
    )


# Several failures in one step (3 x 4; a hole at (1, 3))::
#
#     A0 .  A2 .
#     G1 G0 G2 H
#     A1 .  G3 A3
#
# Step 1: agents 0 and 2 both move into (0, 1) (a vertex conflict) while agent 3 moves up into the hole. The
# judge reports the first by priority (the hole, agent 3); the viewers must name all three failing agents.
MULTI_INSTANCE = Instance(
    grid=[[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]],
    starts=[[0, 0], [2, 0], [0, 2], [2, 3]],
    goals=[[1, 1], [1, 0], [1, 2], [2, 2]],
)
MULTI_ACTIONS = [(R, W, L, U)]
MULTI_SENTENCES = ("step 1: agent 3 fell into the hole at (1, 3)",
                   "step 1: agents 0 and 2 collided in cell (0, 1) (vertex conflict)")


def multi_failure_episode() -> Episode:
    """``MULTI_INSTANCE`` played through ``PlayGame`` (so the simulator's rules flag every failure)."""
    game = PlayGame(MULTI_INSTANCE, optimal_makespan=None, origin="test")
    for joint in MULTI_ACTIONS:
        for agent, action in enumerate(joint):
            game.select(agent)
            game.set_action(action, advance=False)
        game.commit()
    return game.to_episode()


def write_multi(path: Path) -> Path:
    """A replay file holding ``multi_failure_episode`` alone."""
    header = ReplayHeader.new(run_id="render-test", stage=0, split="eval", policy={"name": "tester", "spec": "multi"})
    with ReplayWriter(path, header) as writer:
        writer.write_all([multi_failure_episode()])
    return path


def all_episodes() -> list[Episode]:
    return [played_episode(name) for name in ORDER[:-1]] + [parse_error_episode()]


def write_cases(path: Path) -> Path:
    """A replay file with the episodes of ``ORDER``, in that order."""
    header = ReplayHeader.new(run_id="render-test", stage=3, split="eval", policy={"name": "tester", "spec": "cases"})
    with ReplayWriter(path, header) as writer:
        writer.write_all(all_episodes())
    return path


def corrupt_first_record(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose episode 0 has a first position that is not agent 0's start (same length, so the
    file still opens; decoding the episode fails)."""
    from replays.reader import ReplayReader

    data = bytearray(source.read_bytes())
    with ReplayReader(source) as reader:
        start, end = int(reader._bounds[0]), int(reader._bounds[1])
    record = msgpack.unpackb(bytes(data[start:end]), raw=False)
    positions = bytearray(record[8])
    positions[0] = (positions[0] + 1) % 12
    record[8] = bytes(positions)
    packed = msgpack.packb(record, use_bin_type=True)
    assert len(packed) == end - start
    data[start:end] = packed
    target.write_bytes(bytes(data))
    return target


def test_render_fixtures__cases_end_as_named(tmp_path):
    for name, (_, failure) in CASES.items():
        outcome = played_episode(name).outcome
        assert outcome.failure == failure, name
    valid = played_episode("valid").outcome
    assert valid.valid and valid.optimal and valid.makespan == OPTIMAL_MAKESPAN
    path = write_cases(tmp_path / "cases.mlr")
    from replays.reader import read_replay

    _, episodes = read_replay(path)
    assert [e.outcome.failure for e in episodes][-1] == C.PARSE_ERROR and len(episodes) == len(ORDER)


def test_render_fixtures__multi_failure_step_is_flagged_for_every_agent_but_judged_by_the_first():
    episode = multi_failure_episode()
    assert (episode.outcome.failure, episode.outcome.fail_step, episode.outcome.fail_agent) == (C.FELL_IN_HOLE, 1, 3)
    flags = episode.events[0].tolist()
    assert flags[0] & C.EV_VERTEX and flags[2] & C.EV_VERTEX and flags[3] & C.EV_HOLE and not flags[1]
