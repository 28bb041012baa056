"""Tests of the optimal solver (``simulator.solver``), its kernels and ``needs_wait``.

The references are plain Python: ``brute_force_optimum`` (exhaustive search over joint states, its successor
function checked against ``simulator.rules.step``), ``needs_wait_reference`` and ``simulator.rules.judge``.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import constants as C
from simulator import grid_kernels, needs_wait_kernels, pair_tables, rules
from simulator import independence_kernels as K
from simulator.errors import ConfigError
from simulator.needs_wait import needs_wait, needs_wait_reference
from simulator.solver import _joint_successors, brute_force_optimum, random_instance, solve
from simulator.types import Instance
from tests.mapf_strategies import make

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------------- helpers


def bare_distance_sum(instance: Instance) -> int | None:
    total = 0
    for k in range(instance.n_agents):
        alone = Instance(grid=instance.grid, starts=instance.starts[k : k + 1], goals=instance.goals[k : k + 1])
        optimum = brute_force_optimum(alone)
        if optimum is None:
            return None
        total += optimum[1]
    return total


def check_solution(instance: Instance, solution) -> None:
    """Every solved answer's plan passes the judge with the claimed makespan; the rest carry no plan."""
    if solution.status == "solved":
        verdict = rules.judge(instance, solution.plan)
        assert verdict.valid, (instance.to_dict(), verdict)
        assert verdict.makespan == solution.makespan
        assert verdict.sum_of_costs >= solution.sum_of_costs
        # The plan is trimmed: one action per step up to each agent's arrival, horizon = makespan.
        assert solution.plan.horizon == solution.makespan
        assert verdict.sum_of_costs == int(solution.plan.lengths.sum())
    else:
        assert solution.plan is None and solution.makespan == -1 and solution.sum_of_costs == -1
        assert solution.reason


@st.composite
def small_instances(draw, max_side: int = 4, max_agents: int = 3):
    # Sampled rather than drawn as integers, which Hypothesis skews small: crowded maps are the interesting ones.
    sides = [max_side] * 3 + list(range(1, max_side))
    height = draw(st.sampled_from(sides))
    width = draw(st.sampled_from(sides))
    hole_share = draw(st.sampled_from([0.0, 0.15, 0.3]))
    draws = draw(st.lists(st.floats(0, 1), min_size=height * width, max_size=height * width))
    grid = np.array(draws).reshape(height, width) < hole_share
    free = [tuple(int(v) for v in cell) for cell in np.argwhere(~grid)]
    if not free:
        grid[0, 0] = False
        free = [(0, 0)]
    n_agents = min(len(free), draw(st.sampled_from([max_agents] * 3 + list(range(1, max_agents)))))
    starts = draw(st.permutations(free).map(lambda cells: cells[:n_agents]))
    goals = draw(st.permutations(free).map(lambda cells: cells[:n_agents]))
    return Instance(grid=grid.astype(np.int8), starts=list(starts), goals=list(goals))


# ---------------------------------------------------------------------------------------- reference checks
@settings(SETTINGS, max_examples=150)
@given(small_instances(max_side=3, max_agents=3), st.data())
def test_joint_successors__agree_with_rules_step(instance, data):
    """The brute force's successor function is exactly the failure-free joint steps of ``rules.step``."""
    state = tuple(tuple(int(v) for v in s) for s in instance.starts)
    expected = set()
    status = np.array(
        [C.ON_GOAL if state[k] == tuple(instance.goals[k]) else C.MOVING for k in range(instance.n_agents)], np.int8
    )
    for actions in itertools.product(range(C.N_ACTIONS), repeat=instance.n_agents):
        new_pos, _, events = rules.step(instance.grid, np.array(state), instance.goals, status, np.array(actions))
        if not (events & C.EV_FAILURE_MASK).any():
            expected.add(tuple(tuple(int(v) for v in p) for p in new_pos))
    assert set(_joint_successors(instance, state)) == expected


@settings(SETTINGS, max_examples=500)
@given(small_instances())
def test_solve__matches_brute_force(instance):
    """Optimal makespan and sum of costs equal the exhaustive search; unsolvable exactly when it finds none."""
    reference = brute_force_optimum(instance)
    solution = solve(instance)
    check_solution(instance, solution)
    if reference is None:
        assert solution.status == "unsolvable", (instance.to_dict(), solution)
    else:
        assert solution.status == "solved", (instance.to_dict(), solution)
        assert (solution.makespan, solution.sum_of_costs) == reference, instance.to_dict()


SEARCH_PATHS = {
    # (ESCALATE_AFTER, REPLAN_BUDGET): knobs that change the route through the search, never the answer.
    "default": (K.ESCALATE_AFTER, K.REPLAN_BUDGET),
    "pair_tables_at_once": (0, K.REPLAN_BUDGET),
    "no_replans": (0, 0),
    "plain_heuristic_no_replans": (10**9, 0),
    "unbounded_replans": (0, 10**6),
}


@pytest.mark.parametrize("path", sorted(SEARCH_PATHS))
@settings(SETTINGS, max_examples=100)
@given(instance=small_instances(max_side=4, max_agents=4))
def test_solve__every_search_path_matches_brute_force(path, instance):
    """Pairwise tables, independence-detection re-plans and plain merges all reach the same optimum."""
    if instance.n_agents == 4 and instance.height * instance.width > 12:
        instance = Instance(grid=instance.grid, starts=instance.starts[:3], goals=instance.goals[:3])
    reference = brute_force_optimum(instance)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(K, "ESCALATE_AFTER", SEARCH_PATHS[path][0])
        patch.setattr(K, "REPLAN_BUDGET", SEARCH_PATHS[path][1])
        solution = solve(instance)
    check_solution(instance, solution)
    got = (solution.makespan, solution.sum_of_costs) if solution.status == "solved" else None
    assert got == reference, (path, instance.to_dict(), solution)


def test_solve__search_paths_agree_on_benchmark_sized_instances(monkeypatch):
    """On 5-6 agents over 7x7..10x10 maps every route through the search gives the same optimum and a valid
    plan (no brute force is feasible there; the routes share little code beyond the A* core)."""
    rng = np.random.default_rng(7)
    for _ in range(25):
        instance = random_instance(rng, int(rng.integers(7, 11)), int(rng.integers(5, 7)), 0.3)
        answers = set()
        for escalate, replan in SEARCH_PATHS.values():
            monkeypatch.setattr(K, "ESCALATE_AFTER", escalate)
            monkeypatch.setattr(K, "REPLAN_BUDGET", replan)
            solution = solve(instance, max_nodes=60_000)
            check_solution(instance, solution)
            if solution.status != "limit":
                answers.add((solution.status, solution.makespan, solution.sum_of_costs))
        assert len(answers) <= 1, (instance.to_dict(), answers)


@settings(SETTINGS, max_examples=150)
@given(small_instances(max_side=4, max_agents=3), st.data())
def test_pair_cost_to_go__matches_brute_force(instance, data):
    """The pairwise tables hold the exact two-agent optimum from any pair of cells."""
    if instance.n_agents < 2:
        return
    grid = instance.grid
    height, width = grid.shape
    blocked = (grid != C.ICE).ravel()
    nbr = grid_kernels.neighbor_table(blocked, height, width)
    free_cells = np.flatnonzero(~blocked).astype(np.int64)
    free_index = np.full(height * width, -1, np.int64)
    free_index[free_cells] = np.arange(free_cells.size)
    goal_a, goal_b = (int(g[0]) * width + int(g[1]) for g in instance.goals[:2])
    soc = np.empty(free_cells.size**2, np.int32)
    makespan = np.empty(free_cells.size**2, np.int32)
    pair_tables.pair_cost_to_go(nbr, free_index, free_cells, goal_a, goal_b, soc, makespan)
    cell_a, cell_b = data.draw(st.permutations(free_cells.tolist()).map(lambda cells: cells[:2]))
    pair = Instance(grid=grid, starts=[divmod(cell_a, width), divmod(cell_b, width)], goals=instance.goals[:2])
    reference = brute_force_optimum(pair)
    index = free_index[cell_a] * free_cells.size + free_index[cell_b]
    got = None if soc[index] >= grid_kernels.INF else (int(makespan[index]), int(soc[index]))
    assert got == reference


# ------------------------------------------------------------------------------------------- hand-made cases
CORRIDOR_SWAP = Instance(grid=[[0, 0, 0, 0]], starts=[(0, 1), (0, 2)], goals=[(0, 2), (0, 1)])


def test_solve__dead_end_corridor_swap_is_unsolvable():
    # Two agents must trade places in a corridor closed at both ends: every joint state is explored.
    solution = solve(CORRIDOR_SWAP)
    assert solution.status == "unsolvable"
    assert "joint state space exhausted" in solution.reason and "agents 0, 1" in solution.reason


def test_solve__unreachable_goal_is_unsolvable_with_reason():
    solution = solve(make(["0.#.a"]))
    assert solution.status == "unsolvable"
    assert solution.reason == "agent 0 cannot reach its goal (0, 4) from (0, 0): holes cut it off"


def test_solve__agent_sitting_on_its_goal_walls_off_another():
    solution = solve(make(["0B.a"]))
    assert solution.status == "unsolvable"
    assert "agent 1 at (0, 1)" in solution.reason


def test_solve__absorbing_goal_forces_order():
    # Agent 1 must pass through cell a (agent 0's goal, one step from agent 0) before agent 0 arrives, so agent 0
    # waits two steps: it cannot step onto its goal and off again as standard MAPF would allow.
    instance = make([".0a.b", "##.##", "##1##"])
    solution = solve(instance)
    check_solution(instance, solution)
    assert (solution.makespan, solution.sum_of_costs) == brute_force_optimum(instance) == (4, 7)


def test_solve__following_chain_needs_no_wait():
    instance = make(["012.abc"])  # each agent steps into the cell its neighbour leaves
    solution = solve(instance)
    assert (solution.makespan, solution.sum_of_costs) == (4, 12)
    assert not needs_wait(instance)


def test_solve__rotation_of_four_agents_takes_one_step():
    cycle = [(0, 0), (0, 1), (1, 1), (1, 0)]  # each agent moves to the next cell of the 2x2 cycle
    instance = Instance(grid=np.zeros((2, 2)), starts=cycle, goals=cycle[1:] + cycle[:1])
    solution = solve(instance)
    check_solution(instance, solution)
    assert (solution.makespan, solution.sum_of_costs) == (1, 4)


def test_solve__every_agent_already_on_goal():
    instance = make(["A.B", "..."])
    solution = solve(instance)
    check_solution(instance, solution)
    assert (solution.status, solution.makespan, solution.sum_of_costs, solution.plan.horizon) == ("solved", 0, 0, 0)


HARD = make(  # five agents in a holey 10x10 map: tens of thousands of expansions
    [
        ".#.....#..",
        ".c.##....2",
        "a3###.....",
        "...#.###..",
        "#..0#.eb.#",
        "1.....#..#",
        ".###d#...#",
        "##..#.#.4.",
        ".....#....",
        "....###.#.",
    ]
)


def test_solve__hard_instance_is_optimal():
    solution = solve(HARD)
    check_solution(HARD, solution)
    assert (solution.status, solution.makespan, solution.sum_of_costs) == ("solved", 18, 52)


def test_solve__node_limit_gives_limit_not_unsolvable():
    solution = solve(HARD, max_nodes=1)
    assert (solution.status, solution.plan) == ("limit", None)
    assert "max_nodes = 1" in solution.reason


def test_solve__node_limit_on_an_unsolvable_instance_is_still_limit():
    # Unsolvable, but proving it takes a joint search: with too small a budget there is no proof yet.
    assert solve(CORRIDOR_SWAP).status == "unsolvable"
    assert solve(CORRIDOR_SWAP, max_nodes=2).status == "limit"


def test_solve__time_limit_gives_limit():
    solution = solve(HARD, time_limit=1e-6)
    assert solution.status == "limit" and "time_limit" in solution.reason


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_nodes": 0}, "solve.max_nodes"),
        ({"max_nodes": -5}, "solve.max_nodes"),
        ({"max_nodes": True}, "solve.max_nodes"),
        ({"max_nodes": 2.5}, "solve.max_nodes"),
        ({"max_nodes": 10**12}, "solve.max_nodes"),
        ({"time_limit": 0}, "solve.time_limit"),
        ({"time_limit": -1.0}, "solve.time_limit"),
        ({"time_limit": float("nan")}, "solve.time_limit"),
        ({"time_limit": float("inf")}, "solve.time_limit"),
        ({"time_limit": "1"}, "solve.time_limit"),
    ],
)
def test_solve__bad_limit_raises_config_error(kwargs, field):
    with pytest.raises(ConfigError) as error:
        solve(make(["0a"]), **kwargs)
    assert error.value.field == field
    assert field in str(error.value) and "allowed" in str(error.value)


def test_solve__rejects_a_non_instance():
    with pytest.raises(ConfigError, match="solve.instance"):
        solve({"grid": [[0]], "starts": [[0, 0]], "goals": [[0, 0]]})


# ---------------------------------------------------------------------------------------------- needs_wait
NEEDS_WAIT_CASES = {
    # Two agents cross one bottleneck cell at the same time: one must wait.
    "bottleneck_crossing": (["#0#", "1.b", "#a#"], True),
    # Disjoint shortest paths.
    "disjoint_paths": (["0.a", "...", "1.b"], False),
    # Agent 1's only shortest path crosses agent 0's goal after agent 0 has arrived there.
    "path_through_arrived_goal": ([".0a.b", "##.##", "##1##"], True),
    # A chain of agents following each other along a corridor.
    "following_chain": (["012.abc"], False),
    # An agent already on its goal, another walking past elsewhere.
    "sitting_agent_not_in_the_way": (["B..", "0.a"], False),
}


@pytest.mark.parametrize("case", sorted(NEEDS_WAIT_CASES))
def test_needs_wait__hand_made_cases(case):
    rows, expected = NEEDS_WAIT_CASES[case]
    instance = make(rows)
    assert needs_wait(instance) is expected
    assert needs_wait_reference(instance) is expected


def test_needs_wait__no_plan_at_all_counts_as_needing_a_wait():
    assert needs_wait(make(["0#.a"])) is True  # unreachable goal
    assert needs_wait(CORRIDOR_SWAP) is True


@settings(SETTINGS, max_examples=300)
@given(small_instances(max_side=4, max_agents=3))
def test_needs_wait__matches_reference_and_optimal_sum_of_costs(instance):
    """Kernel, plain-Python twin and the characterisation (optimal sum of costs > sum of bare distances)."""
    expected = needs_wait_reference(instance)
    assert needs_wait(instance) is expected
    bare = bare_distance_sum(instance)
    optimum = brute_force_optimum(instance)
    assert expected is (bare is None or optimum is None or optimum[1] > bare)


def test_needs_wait__matches_optimal_sum_of_costs_on_benchmark_sized_instances():
    """Up to 7 agents on up to 10x10 maps (independent groups split apart): no wait needed exactly when the
    optimal sum of costs equals the sum of bare-map distances."""
    rng = np.random.default_rng(3)
    checked = 0
    while checked < 60:
        instance = random_instance(rng, int(rng.integers(5, 11)), int(rng.integers(2, 8)), 0.3)
        solution = solve(instance, max_nodes=50_000)
        if solution.status == "limit":
            continue
        verdict, bare_sum = needs_wait_kernels.needs_wait_kernel(
            instance.grid, instance.starts, instance.goals, 100_000, 10**9, 0.0
        )
        assert verdict in (0, 1)
        assert bool(verdict) is (solution.status == "unsolvable" or solution.sum_of_costs > bare_sum)
        assert needs_wait(instance) is bool(verdict)
        checked += 1


def test_needs_wait__falls_back_to_the_solver_past_its_state_limit():
    instance = make([".Ba.", "0.##"])  # the search records a second dead state, past max_states = 1
    assert needs_wait_kernels.needs_wait_kernel(instance.grid, instance.starts, instance.goals, 1, 10**9, 0.0)[0] == -1
    assert needs_wait(instance, max_states=1) is needs_wait_reference(instance) is True


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3"])
def test_needs_wait__bad_max_states_raises_config_error(value):
    with pytest.raises(ConfigError, match="needs_wait.max_states"):
        needs_wait(make(["0a"]), max_states=value)


@pytest.mark.parametrize("kwargs, field", [
    ({"max_steps": 0}, "needs_wait.max_steps"), ({"max_steps": 1.5}, "needs_wait.max_steps"),
    ({"time_limit": 0}, "needs_wait.time_limit"), ({"time_limit": float("nan")}, "needs_wait.time_limit"),
    ({"time_limit": "1"}, "needs_wait.time_limit"),
])
def test_needs_wait__bad_step_or_time_budget_raises_config_error(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        needs_wait(make(["0a"]), **kwargs)


def documented_maxima_instance(seed: int = 0) -> Instance:
    """A 256x256 map with 64 agents (the documented maxima), 10% holes: the no-wait search alone ran for minutes."""
    rng = np.random.default_rng(seed)
    grid = (rng.random((256, 256)) < 0.1).astype(np.int8)
    free = np.argwhere(grid == C.ICE)
    cells = free[rng.choice(len(free), 128, replace=False)]
    return Instance(grid, cells[:64], cells[64:])


def test_needs_wait__search_is_bounded_by_steps_and_time_on_the_documented_maxima():
    from simulator.needs_wait import NeedsWaitLimit, needs_wait_search

    instance = documented_maxima_instance()
    started = time.perf_counter()
    assert needs_wait_search(instance, max_steps=1000) == (None, "step limit (1000 choices tried)")
    verdict, reason = needs_wait_search(instance, time_limit=0.05, max_steps=10**15)
    assert (verdict, reason) == (None, "time limit (0.05 s)")
    with pytest.raises(NeedsWaitLimit, match="limit reached, no verdict: the search hit its step limit .*node limit reached"):
        needs_wait(instance, max_steps=1000, solver_nodes=1)
    assert time.perf_counter() - started < 20  # the old search ran for minutes


def test_needs_wait__ctrl_c_stops_a_search_without_a_time_limit():
    """Ctrl-C was not seen while the compiled search ran (it read no clock without a time limit); it now stops
    the search as a KeyboardInterrupt, not as numba's SystemError."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import os, signal, threading, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # as in a terminal, even when run in background
        "from tests.simulator.test_solver import documented_maxima_instance\n"
        "from simulator.needs_wait import needs_wait_search\n"
        "instance = documented_maxima_instance()\n"
        "needs_wait_search(instance, max_steps=10)\n"
        "threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
        "started = time.perf_counter()\n"
        "try:\n"
        "    needs_wait_search(instance, max_steps=10**15)\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', time.perf_counter() - started)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[2])
    words = result.stdout.split()
    assert words[:1] == ["interrupted"], result.stdout + result.stderr
    assert float(words[1]) < 10
