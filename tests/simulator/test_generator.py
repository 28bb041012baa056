"""The generator: certified labels, determinism across processes, wait ratios hit, clear failures."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import constants as C
from simulator import generator
from simulator.config import MAX_HORIZON, StageConfig
from simulator.errors import ConfigError
from simulator.generator import LabelledInstance, bare_distances, generate, read_jsonl, to_jsonl
from simulator.judge import judge_plans
from simulator.needs_wait import needs_wait, needs_wait_reference
from simulator.solver import brute_force_optimum, solve

MIXED = {
    "agents": [2, 3],
    "samples": 120,
    "seed": 5,
    "sizes": {
        3: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.5},
        5: {"data_ratio": 0.25, "hole_ratio": 0.4, "wait_ratio": 0.3},
        8: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.6},
    },
}


@pytest.fixture(scope="module")
def mixed_stage():
    return generate(StageConfig.from_dict(MIXED))


def test_generate__certificates_pass_the_judge_with_optimal_makespan(mixed_stage):
    items = mixed_stage.instances
    result = judge_plans([it.instance for it in items], [it.plan for it in items])
    assert result.valid.all()
    assert np.array_equal(result.makespan, [it.optimal_makespan for it in items])
    assert (result.sum_of_costs >= [it.optimal_sum_of_costs for it in items]).all()


def test_generate__labels_match_their_definitions(mixed_stage):
    for item in mixed_stage.instances:
        distances = bare_distances(item.instance)
        assert item.sum_of_distances == distances.sum() and (distances > 0).all()
        assert item.needs_wait == needs_wait(item.instance)
        assert item.needs_wait == (item.optimal_sum_of_costs > item.sum_of_distances)
        if item.size <= 3:
            assert item.needs_wait == needs_wait_reference(item.instance)
            assert brute_force_optimum(item.instance, 30) == (item.optimal_makespan, item.optimal_sum_of_costs)


def test_generate__hits_counts_hole_counts_and_wait_ratios(mixed_stage):
    config = StageConfig.from_dict(MIXED)
    by_size = {}
    for item in mixed_stage.instances:
        by_size.setdefault(item.size, []).append(item)
        assert (item.instance.grid == C.HOLE).sum() == config.sizes[item.size].hole_count(item.size)
        assert item.instance.n_agents in (2, 3)
        assert not np.any(np.all(item.instance.starts == item.instance.goals, axis=1))
    assert {size: len(v) for size, v in by_size.items()} == config.size_counts()
    for size, items in by_size.items():
        wanted = int(np.floor(config.sizes[size].wait_ratio * len(items) + 0.5))
        assert sum(it.needs_wait for it in items) == wanted
        assert mixed_stage.reports[size].achieved_wait_ratio == wanted / len(items)


def test_generate__same_config_and_seed_same_bytes_across_processes(tmp_path):
    code = (
        "import sys; from simulator.config import StageConfig; from simulator.generator import generate, to_jsonl;"
        f"sys.stdout.buffer.write(to_jsonl(generate(StageConfig.from_dict({MIXED!r})).instances))"
    )
    outputs = [subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout for _ in range(2)]
    assert outputs[0] == outputs[1]
    assert outputs[0] == to_jsonl(generate(StageConfig.from_dict(MIXED)).instances)


def test_generate__different_seeds_differ():
    config = StageConfig.from_dict({**MIXED, "samples": 20})
    assert generate(config, seed=1).checksum() != generate(config, seed=2).checksum()


def test_generate__instance_does_not_depend_on_the_others():
    small = generate(StageConfig.from_dict({**MIXED, "samples": 8}))
    large = generate(StageConfig.from_dict({**MIXED, "samples": 16}))
    first_small = [it for it in small.instances if it.size == 3][0]
    first_large = [it for it in large.instances if it.size == 3][0]
    assert first_small.instance == first_large.instance


@pytest.mark.parametrize(
    "document, field",
    [
        ({"agents": 2, "samples": 5, "sizes": {10: {"data_ratio": 1, "hole_ratio": 0.0, "wait_ratio": 1.0}}},
         "sizes.10.wait_ratio"),
        ({"agents": 4, "samples": 5, "sizes": {3: {"data_ratio": 1, "hole_ratio": 0.5556, "wait_ratio": 0.0}}},
         "sizes.3.hole_ratio"),
    ],
)
def test_generate__unsatisfiable_configs_fail_fast_naming_the_knob(document, field):
    with pytest.raises(ConfigError) as info:
        generate(StageConfig.from_dict(document), max_attempts=200)
    assert info.value.field == field


BOUNDED = {
    "agents": 2,
    "samples": 60,
    "seed": 11,
    "sizes": {
        3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0, "min_makespan": 2, "max_makespan": 3},
        5: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.4, "max_makespan": 4},
    },
}


def test_generate__makespan_bounds_keep_only_instances_in_the_band_with_checked_certificates():
    stage = generate(StageConfig.from_dict(BOUNDED))
    items = stage.instances
    assert [it.size for it in items] == [3] * 30 + [5] * 30
    result = judge_plans([it.instance for it in items], [it.plan for it in items])
    assert result.valid.all() and np.array_equal(result.makespan, [it.optimal_makespan for it in items])
    for item in items:
        assert (2 if item.size == 3 else 1) <= item.optimal_makespan <= (3 if item.size == 3 else 4)
        if item.size == 3:  # the solver's optimum, checked by exhaustive search on the small map
            assert brute_force_optimum(item.instance, 30) == (item.optimal_makespan, item.optimal_sum_of_costs)
    assert sum(it.needs_wait for it in items if it.size == 5) == 12  # the wait ratio is still met inside the band
    assert stage.reports[3].rejected_makespan > 0 and stage.reports[5].rejected_makespan > 0
    # without the bounds the same seed draws longer plans too: the band is what removed them
    unbounded = {**BOUNDED, "sizes": {side: {key: value for key, value in spec.items() if "makespan" not in key}
                                      for side, spec in BOUNDED["sizes"].items()}}
    lengths = [it.optimal_makespan for it in generate(StageConfig.from_dict(unbounded)).instances]
    assert max(lengths) > 4 and min(lengths) < 2


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(side=st.integers(3, 5), least=st.integers(1, 9), width=st.integers(0, 3), seed=st.integers(0, 2**32))
def test_generate__any_band_gives_instances_inside_it_or_an_error_naming_a_bound(side, least, width, seed):
    spec = {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0, "min_makespan": least,
            "max_makespan": least + width}
    config = StageConfig.from_dict({"agents": 2, "samples": 4, "seed": seed, "sizes": {side: spec}})
    try:
        items = generate(config, max_attempts=300).instances
    except ConfigError as error:
        assert error.field in (f"sizes.{side}.min_makespan", f"sizes.{side}.max_makespan")
        assert "makespan outside the band" in error.allowed
        return
    assert all(least <= it.optimal_makespan <= least + width for it in items)


def test_generate__a_band_no_map_of_the_size_has_names_the_bound():
    document = {"agents": 2, "samples": 2, "sizes": {3: {"data_ratio": 1, "hole_ratio": 0.0, "wait_ratio": 0.0,
                                                         "min_makespan": 40}}}
    with pytest.raises(ConfigError) as info:
        generate(StageConfig.from_dict(document), max_attempts=50)
    assert info.value.field == "sizes.3.min_makespan"
    assert "of 50 candidates" in info.value.allowed and "outside the band of at least 40" in info.value.allowed
    document["sizes"][3].update(min_makespan=None, max_makespan=1, wait_ratio=0.0)
    document["sizes"][4] = document["sizes"].pop(3)
    document["sizes"][4]["hole_ratio"] = 0.0
    document["agents"] = 8  # eight agents on a 4x4 map are never all one step from their goals and conflict-free
    with pytest.raises(ConfigError) as info:
        generate(StageConfig.from_dict(document), max_attempts=50)
    assert info.value.field in ("sizes.4.max_makespan", "sizes.4.hole_ratio")


def test_jsonl__round_trip_and_corrupt_line(tmp_path, mixed_stage):
    path = tmp_path / "stage.jsonl"
    path.write_bytes(to_jsonl(mixed_stage.instances))
    loaded = read_jsonl(path)
    assert to_jsonl(loaded) == path.read_bytes()
    assert isinstance(loaded[0], LabelledInstance)
    path.write_bytes(to_jsonl(mixed_stage.instances[:2]) + b'{"size": 3\n')
    with pytest.raises(ConfigError, match="line 3"):
        read_jsonl(path)


def test_generate__an_impossible_top_band_is_refused_by_the_distance_bound_before_any_search():
    # 16 agents on 32x32 all within 1 step of their goals: every candidate fails the cheap bare-distance bound, so
    # none reaches the wait search or the solver (the refusal takes seconds, not minutes: mapf-lake gen --size 32
    # --agents 16 --max-makespan 1 --n 3 went from 3 min to 3 s)
    config = StageConfig.from_dict({"agents": 16, "samples": 1, "seed": 0, "sizes": {
        32: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0, "max_makespan": 1}}})
    with pytest.raises(ConfigError, match=r"sizes\.32\.max_makespan .* 50 of 50 candidates"):
        generate(config, max_attempts=50)


@pytest.mark.parametrize(("side", "agents"), [(3, 2), (5, 3), (8, 4), (10, 5), (16, 8), (32, 16)])
def test_generate__an_impossible_floor_is_refused_by_the_plan_bound_at_every_size(monkeypatch, side, agents):
    # A valid plan by prioritized planning bounds the optimal makespan from above: a floor above it is refused
    # before the wait search and the solver (mapf-lake gen --size 32 --agents 16 --min-makespan 200 --n 3 went from
    # 3 min 41 s, refused naming wait_ratio, to 4 s naming min_makespan). Only candidates the planner finds no plan
    # for reach the solver.
    solved = []

    def counting_solve(instance, **options):
        solved.append(instance)
        return solve(instance, **options)

    monkeypatch.setattr(generator, "solve", counting_solve)
    floor = min(4 * side * side, MAX_HORIZON)
    config = StageConfig.from_dict({"agents": agents, "samples": 1, "seed": 0, "sizes": {
        side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3, "min_makespan": floor}}})
    with pytest.raises(ConfigError) as info:
        generate(config, max_attempts=300)
    assert info.value.field == f"sizes.{side}.min_makespan" and info.value.value == floor
    assert f"outside the band of at least {floor}" in info.value.allowed
    assert len(solved) <= 3  # of 300 candidates


FLOORS = {
    "agents": [2, 4],
    "samples": 48,
    "seed": 3,
    "sizes": {
        4: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3, "min_makespan": 4},
        6: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.5, "min_makespan": 7, "max_makespan": 9},
        8: {"data_ratio": 0.25, "hole_ratio": 0.3, "wait_ratio": 0.3, "min_makespan": 11},
        10: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3, "min_makespan": 14, "max_makespan": 18},
    },
}


def test_generate__the_floor_pre_check_changes_no_instance(monkeypatch):
    # The plan bound only refuses candidates the solver would refuse too, so a seed gives the same instances with it
    # as without it (the reports only move rejections from the wait label and the solver to the makespan band).
    config = StageConfig.from_dict(FLOORS)
    with_bound = generate(config)
    monkeypatch.setattr(generator, "makespan_upper_bound", lambda instance: None)
    without_bound = generate(config)
    assert with_bound.checksum() == without_bound.checksum()
    for size, report in with_bound.reports.items():
        other = without_bound.reports[size]
        assert report.candidates == other.candidates
        assert report.rejected_makespan >= other.rejected_makespan
    assert sum(r.rejected_makespan for r in with_bound.reports.values()) > sum(
        r.rejected_makespan for r in without_bound.reports.values())
