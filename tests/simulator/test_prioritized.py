"""Prioritized planning: its plans pass the rules, and their makespan bounds the optimal makespan from above."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from simulator import rules
from simulator.errors import ConfigError
from simulator.judge import judge_plan
from simulator.prioritized import makespan_upper_bound, prioritized_plan
from simulator.solver import brute_force_optimum, random_instance, solve
from simulator.types import Instance
from tests.mapf_strategies import instances, make

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])




def check_plan(instance: Instance, solver_nodes: int = 1_000_000) -> int | None:
    """The prioritized plan, when there is one, is valid under the plain-Python rules and the batched judge, and its
    makespan is the upper bound reported and at least the solver's optimum (when the solver finds it within
    ``solver_nodes``). Returns that makespan."""
    plan = prioritized_plan(instance)
    bound = makespan_upper_bound(instance)
    solution = solve(instance, max_nodes=solver_nodes)
    if plan is None:
        assert bound is None
        return None
    verdict = rules.judge(instance, plan)
    assert verdict.valid, (instance.to_dict(), verdict)
    assert judge_plan(instance, plan) == verdict
    assert plan.horizon == verdict.makespan == bound
    assert solution.status != "unsolvable", (instance.to_dict(), solution.reason)  # a valid plan exists
    assert solution.status == "limit" or bound >= solution.makespan
    return bound


@settings(SETTINGS, max_examples=400)
@given(instances(max_side=5, max_agents=5))
def test_prioritized_plan__is_valid_and_bounds_the_optimal_makespan_from_above(instance):
    check_plan(instance)


@settings(SETTINGS, max_examples=1500)
@given(instances(max_side=6, max_agents=6, hole_ratio_max=0.3))
def test_prioritized_plan__is_valid_under_the_rules_on_crowded_maps(instance):
    # validity alone (no solver), on more and more crowded cases: swaps, followers, agents on their goals
    plan = prioritized_plan(instance)
    if plan is not None:
        verdict = rules.judge(instance, plan)
        assert verdict.valid, (instance.to_dict(), verdict)
        assert verdict.makespan == plan.horizon == makespan_upper_bound(instance)


@settings(SETTINGS, max_examples=200)
@given(instances(max_side=3, max_agents=3, hole_ratio_max=0.3))
def test_makespan_upper_bound__is_at_least_the_brute_force_optimum(instance):
    bound = makespan_upper_bound(instance)
    optimum = brute_force_optimum(instance, 40)
    if bound is not None:
        assert optimum is not None and bound >= optimum[0]


def test_prioritized_plan__valid_on_benchmark_sized_instances():
    rng = np.random.default_rng(7)
    found = 0
    for side, n_agents, holes in [(8, 6, 0.2), (10, 8, 0.3), (16, 12, 0.2), (32, 16, 0.2)]:
        for _ in range(5):
            found += check_plan(random_instance(rng, side, n_agents, holes), solver_nodes=20_000) is not None
    assert found >= 15  # prioritized planning rarely fails on maps with room to spare


def test_prioritized_plan__waits_until_no_earlier_agent_crosses_its_goal():
    # Agent 1 (farther, planned first) crosses cell a, agent 0's goal, at time 2; agent 0 is one step from a but
    # may arrive only at time 3 (arrival is for good), which is also the optimum: makespan 4.
    instance = make([".0a.b", "##.##", "##1##"])
    plan = prioritized_plan(instance)
    assert plan is not None and plan.lengths.tolist() == [3, 4]
    assert check_plan(instance) == 4 == brute_force_optimum(instance)[0]


def test_prioritized_plan__follows_but_never_swaps():
    instance = make(["012.abc"])  # a chain of followers: no waits
    assert check_plan(instance) == 4
    instance = make(["0.1", "#.#", "#a#", "#b#"])  # two agents into one corridor: the second waits a step
    assert check_plan(instance) == 4


def test_prioritized_plan__restarts_with_a_boxed_in_agent_first():
    # Farthest first plans agent 0 (3 steps) straight through agent 1's start, and agent 1 has nowhere to dodge
    # but agent 0's goal, which it must leave by a swap. Starting over with agent 1 first: it steps up, agent 0
    # follows a step later (makespan 4).
    instance = make([".b#", "0.1", ".#a"])
    assert check_plan(instance) == 4


def test_prioritized_plan__none_without_a_plan():
    assert prioritized_plan(make(["0.#.a"])) is None  # holes cut agent 0 off
    assert prioritized_plan(make(["0B.a"])) is None  # an agent sitting on its goal walls agent 0 off
    swap = Instance(grid=np.zeros((1, 4)), starts=[(0, 0), (0, 3)], goals=[(0, 3), (0, 0)])
    assert makespan_upper_bound(swap) is None  # two agents trade places in a closed corridor (unsolvable)


def test_prioritized_plan__agents_on_their_goals_and_node_budget():
    plan = prioritized_plan(make(["A.B", "..."]))
    assert plan is not None and plan.horizon == 0
    far = make(["0.........", "#########.", "a........."])
    assert makespan_upper_bound(far) == 20
    assert makespan_upper_bound(far, max_nodes=5) is None  # the budget ran out: no claim


@pytest.mark.parametrize(("args", "field"), [((None,), "instance"), ((make(["0a"]), 0), "max_nodes"),
                                              ((make(["0a"]), True), "max_nodes")])
def test_prioritized_plan__bad_arguments_raise_config_error(args, field):
    with pytest.raises(ConfigError) as info:
        prioritized_plan(*args)
    assert info.value.field == field
