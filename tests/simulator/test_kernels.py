"""The numba kernels equal the pure-Python reference rules (hypothesis), including the nasty cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapf_strategies import instance_and_plan, instances
from simulator import constants as C
from simulator import kernels, rules
from simulator.judge import judge_plans, pack_instances, success_counts
from simulator.step import BatchState, step_batch
from simulator.types import Instance, JointPlan

SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(st.lists(instances(max_side=4, max_agents=5), min_size=1, max_size=6), st.integers(0, 2**32 - 1),
       st.sampled_from([0.0, 0.0, 0.3, 1.0]))
def test_step_batch__equals_reference_on_random_batches(batch, seed, slip):
    rng = np.random.default_rng(seed)
    packed = pack_instances(batch)
    state = BatchState.initial(packed)
    for _ in range(6):
        actions = rng.integers(0, C.N_ACTIONS, size=state.status.shape)
        draws = rng.random(state.status.shape)
        expected = []
        for b, inst in enumerate(batch):
            k = inst.n_agents
            expected.append(rules.step(inst.grid, state.pos[b, :k], inst.goals, state.status[b, :k],
                                       actions[b, :k], slip, draws[b, :k]))
        step_batch(packed, state, actions, slip, draws if slip > 0 else None)
        for b, (pos, status, events) in enumerate(expected):
            k = batch[b].n_agents
            assert np.array_equal(state.pos[b, :k], pos)
            assert np.array_equal(state.status[b, :k], status)
            assert np.array_equal(state.events[b, :k], events)
            assert (state.status[b, k:] == C.ABSENT).all()


@SETTINGS
@given(st.lists(instance_and_plan(), min_size=1, max_size=8))
def test_judge_batch__equals_reference_judge(cases):
    instances_, plans = zip(*cases)
    result = judge_plans(instances_, plans, record=True)
    for b, (inst, plan) in enumerate(cases):
        assert result.judgement(b) == rules.judge(inst, plan)
        # the recorded trace replays the reference step by step up to where judging stopped
        pos, status = inst.starts.copy(), rules.initial_status(inst)
        assert np.array_equal(result.trace_pos[b, 0, : inst.n_agents], pos)
        last = result.fail_step[b] if result.fail_step[b] > 0 else result.makespan[b]
        for t in range(1, max(last, 0) + 1):
            pos, status, events = rules.step(inst.grid, pos, inst.goals, status, plan.actions[:, t - 1])
            assert np.array_equal(result.trace_pos[b, t, : inst.n_agents], pos)
            assert np.array_equal(result.trace_events[b, t - 1, : inst.n_agents], events)


@settings(max_examples=60, deadline=None)
@given(instance_and_plan(max_side=4, max_agents=3), st.floats(0.0, 1.0), st.integers(0, 2**40))
def test_mc_judge__equals_reference_sample_by_sample(case, slip, seed):
    inst, plan = case
    n_samples = 70  # more than one lane block
    counts = success_counts([inst, inst], [plan, plan], slip, n_samples, seed)
    for b in range(2):
        expected = sum(rules.judge(inst, plan, slip, seed + b, s).valid for s in range(n_samples))
        assert counts[b] == expected


@given(st.integers(0, 2**62), st.integers(0, 2**40), st.integers(0, 5000), st.integers(0, 63))
def test_slip_draw__python_and_numba_agree(seed, sample, step, agent):
    assert kernels.slip_draw(seed, sample, step, agent) == rules.slip_draw(seed, sample, step, agent)


def _one_step(grid, starts, goals, actions):
    inst = Instance(grid=grid, starts=starts, goals=goals)
    packed = pack_instances([inst])
    state = BatchState.initial(packed)
    step_batch(packed, state, np.array([actions]))
    ref = rules.step(inst.grid, inst.starts, inst.goals, rules.initial_status(inst), actions)
    assert np.array_equal(state.events[0], ref[2])
    return state.pos[0].tolist(), state.events[0].tolist()


@pytest.mark.parametrize(
    "name, starts, goals, actions, expected_events",
    [
        ("swap", [[0, 0], [0, 1]], [[2, 2], [2, 1]], [C.RIGHT, C.LEFT], [C.EV_EDGE, C.EV_EDGE]),
        ("follow chain", [[0, 0], [0, 1], [0, 2]], [[2, 2], [2, 1], [2, 0]], [C.RIGHT, C.RIGHT, C.DOWN], [0, 0, 0]),
        ("rotation of four", [[0, 0], [0, 1], [1, 1], [1, 0]], [[2, 2], [2, 1], [2, 0], [0, 2]],
         [C.RIGHT, C.DOWN, C.LEFT, C.UP], [0, 0, 0, 0]),
        ("chain into a waiting agent", [[0, 0], [0, 1], [1, 1]], [[2, 2], [2, 1], [2, 0]],
         [C.RIGHT, C.DOWN, C.WAIT], [0, C.EV_VERTEX, C.EV_VERTEX]),
        ("head-on into one cell", [[0, 0], [0, 2]], [[2, 2], [2, 1]], [C.RIGHT, C.LEFT], [C.EV_VERTEX, C.EV_VERTEX]),
        ("into a waiting agent", [[0, 0], [0, 1]], [[2, 2], [2, 1]], [C.RIGHT, C.WAIT], [C.EV_VERTEX, C.EV_VERTEX]),
        ("off the grid", [[0, 0], [2, 2]], [[1, 1], [2, 1]], [C.UP, C.WAIT], [C.EV_ILLEGAL, 0]),
        ("onto an agent parked on its goal", [[0, 0], [0, 1]], [[2, 2], [0, 1]], [C.RIGHT, C.UP],
         [C.EV_VERTEX, C.EV_VERTEX]),
    ],
)
def test_step__conflict_table(name, starts, goals, actions, expected_events):
    grid = np.zeros((3, 3), np.int8)
    _pos, events = _one_step(grid, starts, goals, actions)
    assert events == expected_events, name


def test_step__hole_next_to_goal_falls_and_goal_arrives():
    grid = np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]], np.int8)
    pos, events = _one_step(grid, [[0, 0], [1, 1]], [[1, 0], [2, 1]], [C.RIGHT, C.DOWN])
    assert events == [C.EV_HOLE, C.EV_GOAL]
    assert pos == [[0, 1], [2, 1]]


def test_step__agent_on_goal_ignores_its_action():
    grid = np.zeros((2, 2), np.int8)
    pos, events = _one_step(grid, [[0, 0], [1, 1]], [[0, 0], [1, 0]], [C.RIGHT, C.WAIT])
    assert pos == [[0, 0], [1, 1]] and events == [0, 0]


def test_judge__large_random_batch_matches_reference():
    rng = np.random.default_rng(7)
    from curriculum.benches.sim import random_packed

    packed = random_packed(300, 6, 3, 0.2, 1)
    instances_ = [Instance(grid=packed.grids[b], starts=packed.starts[b], goals=packed.goals[b]) for b in range(300)]
    plans = [JointPlan.from_sequences(rng.integers(0, 5, size=(3, rng.integers(0, 12))).tolist()) for _ in range(300)]
    result = judge_plans(instances_, plans)
    for b in range(300):
        assert result.judgement(b) == rules.judge(instances_[b], plans[b])
