"""Env API, the PettingZoo adapter, the shipped conformance checker, and Gymnasium FrozenLake agreement."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapf_strategies import instances
from simulator import constants as C
from simulator.checker import ConformanceError, check_env
from simulator.env import MapfEnv
from simulator.errors import ConfigError
from simulator.parallel import ParallelMapfEnv
from simulator.types import Instance

CROWDED = Instance(grid=[[0, 0, 1], [0, 0, 0], [1, 0, 0]], starts=[[0, 0], [2, 2], [1, 1]], goals=[[0, 1], [2, 1], [1, 0]])


@settings(max_examples=40, deadline=None)
@given(instances(max_side=5, max_agents=4), st.sampled_from([0.0, 0.2]))
def test_check_env__passes_on_random_instances(instance, slip):
    check_env(instance, episodes=3, slip=slip)


def test_check_env__catches_a_broken_env(monkeypatch):
    original = MapfEnv.step

    def teleporting_step(self, joint_action):
        result = original(self, joint_action)
        result.observation["positions"][0] = [99, 99]
        return result

    monkeypatch.setattr(MapfEnv, "step", teleporting_step)
    with pytest.raises(ConformanceError, match="off the map"):
        check_env(CROWDED)


def test_parallel_env__passes_pettingzoo_api_test():
    from pettingzoo.test import parallel_api_test

    parallel_api_test(ParallelMapfEnv(CROWDED), num_cycles=200)


def test_env__truncates_at_horizon_and_refuses_further_steps():
    env = MapfEnv(CROWDED, horizon=3)
    env.reset(seed=0)
    results = [env.step([C.WAIT] * 3) for _ in range(3)]
    assert [r.truncated for r in results] == [False, False, True]
    with pytest.raises(ConfigError, match="reset"):
        env.step([C.WAIT] * 3)


def test_env__undo_restores_state():
    env = MapfEnv(CROWDED)
    env.reset(seed=0)
    before = env.state
    env.step([C.RIGHT, C.WAIT, C.WAIT])
    env.set_state(before)
    assert np.array_equal(env.state.pos, CROWDED.starts) and env.state.t == 0 and not env.done


@pytest.mark.parametrize(
    "kwargs, field", [({"horizon": 0}, "horizon"), ({"horizon": 10**6}, "horizon"), ({"slip": 1.5}, "slip"),
                      ({"slip": -0.1}, "slip")]
)
def test_env__bad_settings_raise(kwargs, field):
    with pytest.raises(ConfigError) as info:
        MapfEnv(CROWDED, **kwargs)
    assert info.value.field == field


@pytest.mark.parametrize("action, field", [([0, 0], "joint_action"), ([0, 0, 9], "joint_action[2]")])
def test_env__bad_joint_action_raises(action, field):
    env = MapfEnv(CROWDED)
    env.reset()
    with pytest.raises(ConfigError) as info:
        env.step(action)
    assert info.value.field == field


# Gymnasium's FrozenLake actions: 0 left, 1 down, 2 right, 3 up.
GYM_TO_OURS = {0: C.LEFT, 1: C.DOWN, 2: C.RIGHT, 3: C.UP}


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 8), st.lists(st.integers(0, 3), min_size=1, max_size=60))
def test_env__single_agent_matches_gymnasium_frozenlake(seed, side, actions):
    gym = pytest.importorskip("gymnasium")
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    desc = generate_random_map(size=side, p=0.75, seed=seed)
    grid = [[int(ch == "H") for ch in row] for row in desc]
    start = next((r, row.index("S")) for r, row in enumerate(desc) if "S" in row)
    goal = next((r, row.index("G")) for r, row in enumerate(desc) if "G" in row)
    theirs = gym.make("FrozenLake-v1", desc=desc, is_slippery=False)
    theirs.reset(seed=seed)
    ours = MapfEnv(Instance(grid=grid, starts=[start], goals=[goal]), horizon=len(actions),
                   illegal_move_ends_episode=False)
    ours.reset(seed=seed)
    for action in actions:
        state, _reward, terminated, _truncated, _info = theirs.step(action)
        result = ours.step([GYM_TO_OURS[action]])
        assert tuple(result.observation["positions"][0]) == divmod(int(state), side)
        assert result.terminated == terminated
        if terminated:
            in_hole = grid[state // side][state % side] == 1
            assert bool(result.events[0] & C.EV_HOLE) == in_hole
            assert bool(result.events[0] & C.EV_GOAL) == (not in_hole)
            break


def test_parallel_env__rgb_array_and_human_render_modes(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from simulator.errors import ConfigError
    from simulator.parallel import ParallelMapfEnv
    from simulator.types import Instance

    inst = Instance(grid=[[0, 0, 0], [0, 1, 0], [0, 0, 0]], starts=[[0, 0], [2, 2]], goals=[[0, 2], [2, 0]])
    env = ParallelMapfEnv(inst, render_mode="rgb_array")
    env.reset(seed=0)
    start = env.render()
    assert start.shape == (400, 640, 3) and start.dtype == np.uint8
    env.step({"agent_0": C.DOWN, "agent_1": C.LEFT})  # both move on ice
    moved = env.render()
    assert (moved != start).any()
    text = ParallelMapfEnv(inst, render_mode="ansi")
    text.reset(seed=0)
    assert isinstance(text.render(), str)
    with pytest.raises(ConfigError, match="render_mode"):
        ParallelMapfEnv(inst, render_mode="video")
    human = ParallelMapfEnv(inst, render_mode="human")
    human.reset(seed=0)
    with pytest.raises(ConfigError, match="a display"):  # the dummy driver is no display
        human.render()
    assert ParallelMapfEnv.metadata["render_modes"] == ["ansi", "rgb_array", "human"]


def test_mapf_env__rgb_array_frames_show_the_failure_of_the_last_step(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from render import colors as P
    from simulator.types import Instance

    inst = Instance(grid=[[0, 0, 0], [0, 1, 0], [0, 0, 0]], starts=[[0, 1], [2, 2]], goals=[[0, 2], [2, 0]])
    env = MapfEnv(inst, render_mode="rgb_array")
    env.reset(seed=0)
    red = lambda frame: int(np.all(frame == np.array(P.FAILURE), axis=-1).sum())  # noqa: E731
    assert red(env.render()) == 0
    env.step(np.array([C.DOWN, C.WAIT]))  # agent 0 walks into the hole at (1, 1)
    assert red(env.render()) > 50 and env.render().shape == (400, 640, 3)
    with pytest.raises(ConfigError, match="render_mode"):
        MapfEnv(inst, render_mode="video")
