"""Table-driven tests of every failure category (with its step and agent) and of bad input."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import constants as C
from simulator import rules
from simulator.errors import ConfigError
from simulator.judge import judge_plan, judge_plans, success_probability
from simulator.types import Instance, JointPlan

U, D, L, R, W = C.UP, C.DOWN, C.LEFT, C.RIGHT, C.WAIT
OPEN_3x3 = [[0, 0, 0], [0, 0, 0], [0, 0, 0]]
HOLE_MID = [[0, 0, 0], [0, 1, 0], [0, 0, 0]]

# (name, grid, starts, goals, plan, failure, step, agent, makespan, sum_of_costs)
JUDGE_TABLE = [
    ("valid crossing", OPEN_3x3, [[0, 0], [2, 2]], [[0, 2], [2, 0]], [[R, R], [L, L]], "none", -1, -1, 2, 4),
    ("valid, one waits then follows", OPEN_3x3, [[1, 0], [0, 1]], [[1, 2], [2, 1]], [[W, R, R], [D, D]],
     "none", -1, -1, 3, 5),
    ("start on goal", OPEN_3x3, [[0, 0], [1, 1]], [[0, 0], [1, 2]], [[], [R]], "none", -1, -1, 1, 1),
    ("empty plan, all on goal", OPEN_3x3, [[0, 0]], [[0, 0]], [[]], "none", -1, -1, 0, 0),
    ("actions after arrival ignored", OPEN_3x3, [[0, 0]], [[0, 1]], [[R, R, R]], "none", -1, -1, 1, 1),
    ("off the grid at step 2", OPEN_3x3, [[0, 0], [2, 2]], [[0, 2], [2, 0]], [[R, U], [L, L]],
     "illegal_move", 2, 0, -1, -1),
    ("second agent falls", HOLE_MID, [[0, 0], [1, 0]], [[0, 2], [2, 0]], [[R, R], [R]], "hole", 1, 1, -1, -1),
    ("vertex conflict", OPEN_3x3, [[0, 0], [0, 2]], [[2, 1], [2, 0]], [[R, D, D], [L, D]],
     "vertex_conflict", 1, 0, -1, -1),
    ("edge conflict (swap)", OPEN_3x3, [[0, 0], [0, 1]], [[0, 2], [0, 0]], [[R, R], [L]], "edge_conflict", 1, 0, -1, -1),
    ("into a parked agent", OPEN_3x3, [[0, 0], [1, 1]], [[0, 2], [0, 1]], [[W, R, R], [U]],
     "vertex_conflict", 2, 0, -1, -1),
    ("goal not reached", OPEN_3x3, [[0, 0], [2, 2]], [[0, 2], [2, 0]], [[R, R], [L]], "goal_not_reached", 2, 1, -1, -1),
    ("empty plan, not on goal", OPEN_3x3, [[0, 0]], [[0, 1]], [[]], "goal_not_reached", 0, 0, -1, -1),
    ("illegal beats hole in one step", HOLE_MID, [[0, 1], [1, 0]], [[0, 2], [2, 0]], [[U], [R]],
     "illegal_move", 1, 0, -1, -1),
    ("hole beats vertex", HOLE_MID, [[0, 1], [1, 0], [2, 1]], [[0, 2], [2, 0], [2, 2]], [[D], [R], [U]],
     "hole", 1, 0, -1, -1),
    ("lowest agent reported", OPEN_3x3, [[0, 0], [2, 0], [2, 2]], [[0, 2], [1, 1], [0, 0]], [[W], [W], [D]],
     "illegal_move", 1, 2, -1, -1),
    ("follow chain is fine", [[0, 0, 0, 0]], [[0, 0], [0, 1], [0, 2]], [[0, 1], [0, 2], [0, 3]],
     [[R], [R], [R]], "none", -1, -1, 1, 3),
]


@pytest.mark.parametrize("name, grid, starts, goals, plan, failure, step, agent, makespan, soc", JUDGE_TABLE)
def test_judge__failure_table(name, grid, starts, goals, plan, failure, step, agent, makespan, soc):
    inst = Instance(grid=grid, starts=starts, goals=goals)
    joint = JointPlan.from_sequences(plan)
    for verdict in (rules.judge(inst, joint), judge_plan(inst, joint)):
        assert (verdict.failure_name, verdict.fail_step, verdict.fail_agent) == (failure, step, agent), name
        assert (verdict.makespan, verdict.sum_of_costs) == (makespan, soc), name
        assert verdict.valid == (failure == "none")


BAD_INSTANCES = [
    ("start on a hole", dict(grid=HOLE_MID, starts=[[1, 1]], goals=[[0, 0]]), "instance.starts[0]"),
    ("goal on a hole", dict(grid=HOLE_MID, starts=[[0, 0]], goals=[[1, 1]]), "instance.goals[0]"),
    ("duplicate goals", dict(grid=OPEN_3x3, starts=[[0, 0], [0, 1]], goals=[[2, 2], [2, 2]]), "instance.goals"),
    ("duplicate starts", dict(grid=OPEN_3x3, starts=[[0, 0], [0, 0]], goals=[[2, 2], [2, 1]]), "instance.starts"),
    ("start off the map", dict(grid=OPEN_3x3, starts=[[3, 0]], goals=[[0, 0]]), "instance.starts[0]"),
    ("negative coordinate", dict(grid=OPEN_3x3, starts=[[-1, 0]], goals=[[0, 0]]), "instance.starts[0]"),
    ("more agents than free cells", dict(grid=[[0, 1]], starts=[[0, 0], [0, 0]], goals=[[0, 0], [0, 0]]),
     "instance.starts"),
    ("empty grid", dict(grid=np.zeros((0, 3)), starts=[[0, 0]], goals=[[0, 0]]), "instance.grid height"),
    ("unknown tile", dict(grid=[[0, 7]], starts=[[0, 0]], goals=[[0, 0]]), "instance.grid[0][1]"),
    ("goals count", dict(grid=OPEN_3x3, starts=[[0, 0], [1, 1]], goals=[[2, 2]]), "instance.goals"),
    ("ragged grid", dict(grid=[[0, 0], [0]], starts=[[0, 0]], goals=[[0, 1]]), "instance.grid"),
    ("float coordinates", dict(grid=OPEN_3x3, starts=[[0.5, 0]], goals=[[0, 1]]), "instance.starts"),
]


@pytest.mark.parametrize("name, kwargs, field", BAD_INSTANCES)
def test_instance__bad_input_names_the_field(name, kwargs, field):
    with pytest.raises(ConfigError) as info:
        Instance(**kwargs)
    assert info.value.field == field, name
    assert field in str(info.value)


@pytest.mark.parametrize(
    "sequences, field",
    [([[0, 5]], "plan.actions[0][1]"), ([[-1]], "plan.actions[0][0]"), ([[1.5]], "plan.actions[0][0]"),
     ([["up"]], "plan.actions[0][0]")],
)
def test_plan__unknown_action_codes_raise(sequences, field):
    with pytest.raises(ConfigError) as info:
        JointPlan.from_sequences(sequences)
    assert info.value.field == field


def test_judge__wrong_agent_count_raises():
    inst = Instance(grid=OPEN_3x3, starts=[[0, 0], [1, 1]], goals=[[0, 1], [1, 2]])
    with pytest.raises(ConfigError, match="plans\\[0\\].agents"):
        judge_plans([inst], [JointPlan.from_sequences([[R]])])
    with pytest.raises(ConfigError, match="plan.agents"):
        rules.judge(inst, JointPlan.from_sequences([[R]]))


def test_judge__over_long_plan_raises():
    with pytest.raises(ConfigError, match="at most"):
        JointPlan.from_sequences([[R] * (C.MAX_PLAN_LENGTH + 1)])


@pytest.mark.parametrize("slip", [-0.1, 1.5, float("nan")])
def test_success_probability__slip_outside_unit_interval_raises(slip):
    inst = Instance(grid=OPEN_3x3, starts=[[0, 0]], goals=[[0, 1]])
    with pytest.raises(ConfigError, match="slip"):
        success_probability(inst, JointPlan.from_sequences([[R]]), slip)


def test_success_probability__matches_closed_form():
    # one move on open ice: it fails only by slipping off the top edge... which is no failure (stays put), so
    # a single-step plan succeeds exactly when it does not slip: probability 1 - p.
    inst = Instance(grid=OPEN_3x3, starts=[[1, 0]], goals=[[1, 1]])
    estimate = success_probability(inst, JointPlan.from_sequences([[R]]), 0.4, n_samples=20_000, seed=3)
    assert abs(estimate - 0.6) < 0.02
    assert success_probability(inst, JointPlan.from_sequences([[R]]), 0.0, n_samples=10) == 1.0


def test_public_api__wrong_types_raise_the_documented_error():
    from simulator.config import parse_config_text
    from simulator.errors import ConfigError
    from simulator.judge import judge_plans
    from simulator.text import parse_instance
    from simulator.types import Instance, JointPlan

    instance = parse_instance("A0 .\n. G0\n")
    assert isinstance(instance, Instance)
    for call in (lambda: judge_plans([instance], ["RR"]), lambda: JointPlan.from_sequences(None),
                 lambda: JointPlan.from_sequences(["RR"]), lambda: JointPlan.from_sequences([5]),
                 lambda: parse_instance(None), lambda: parse_config_text(None, "yaml")):
        with pytest.raises(ConfigError):
            call()


@pytest.mark.parametrize("grid, starts, field", [
    ([[0, 0], [0, 0]], [[0, 4294967296]], "instance.starts"),
    ([[256, 0], [0, 0]], [[0, 0]], "instance.grid"),
    ([[257, 0], [0, 0]], [[0, 0]], "instance.grid"),
    ([[0, 0], [0, 0]], [[-(2**40), 0]], "instance.starts"),
])
def test_instance__out_of_range_integers_are_refused_not_wrapped(grid, starts, field):
    from simulator.errors import ConfigError
    from simulator.types import Instance

    with pytest.raises(ConfigError) as caught:
        Instance(grid=grid, starts=starts, goals=[[1, 1]])
    assert caught.value.field.startswith(field)
