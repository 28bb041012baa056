"""Evaluation on a user's own instances and on a stage config, recorded in the replay headers; the CVaR column."""

from __future__ import annotations

import pytest

from policy.evaluation import EvalTable, cell_file, config_set, evaluate, instances_set
from policy.policies import make_policy
from replays.reader import read_replay
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import to_jsonl

CONFIG = StageConfig.from_dict({"agents": [2, 3], "samples": 8, "seed": 4, "sizes": {
    4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
    5: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0}}})


def test_evaluate__instances_file_cells_by_agents_and_size_and_the_header_records_the_file(tmp_path, items):
    import hashlib

    path = tmp_path / "mine.jsonl"
    path.write_bytes(to_jsonl(items))
    chosen = instances_set(path)
    assert [(cell.agents, cell.size, cell.count) for cell in chosen.cells] == [(2, 4, 2), (2, 5, 2), (3, 4, 2),
                                                                               (3, 5, 2)]
    table = evaluate(make_policy("oracle"), chosen, tmp_path / "out")
    assert table.suite == f"instances:{path}" and all(v == 1.0 and o == 1.0 for v, o, _ in table.rates.values())
    header, episodes = read_replay(cell_file(tmp_path / "out", 3, 5))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert header.extra["instances"] == {"path": str(path), "sha256": digest} and "suite" not in header.extra
    assert header.stage_config is None and len(episodes) == 2
    assert [ep.instance for ep in episodes] == [item.instance for item in items
                                                if item.instance.n_agents == 3 and item.size == 5]
    assert table.to_dict()["source"] == {"instances": {"path": str(path), "sha256": digest}}


def test_evaluate__a_moved_instances_file_reuses_its_cells_and_an_edited_one_is_refused(tmp_path, items):
    first, moved, edited = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    first.write_bytes(to_jsonl(items))
    moved.write_bytes(to_jsonl(items))
    edited.write_bytes(to_jsonl(items[:-1]))
    evaluate(make_policy("greedy"), instances_set(first), tmp_path / "out")
    again = evaluate(make_policy("greedy"), instances_set(moved), tmp_path / "out")
    assert again.reused_cells == 4
    with pytest.raises(ConfigError, match="instances"):
        evaluate(make_policy("greedy"), instances_set(edited), tmp_path / "out")
    with pytest.raises(ConfigError, match="suite"):
        evaluate(make_policy("greedy"), "train-2agent-quick", tmp_path / "out")


def test_evaluate__config_generated_now_with_a_seed_is_recorded_and_another_seed_is_refused(tmp_path, items):
    chosen = config_set(CONFIG, seed=4, source="stage.yaml")
    assert chosen.name == "config:stage.yaml" and chosen.record == {"config": CONFIG.to_dict()}
    assert sum(cell.count for cell in chosen.cells) == 8
    table = evaluate(make_policy("oracle"), chosen, tmp_path)
    assert all(v == 1.0 for v, _, _ in table.rates.values())
    header, episodes = read_replay(cell_file(tmp_path, 2, 4))
    assert header.extra["config"] == CONFIG.to_dict() and header.stage_config == CONFIG.to_dict()
    assert [ep.instance for ep in episodes] == [item.instance for item in items
                                                if item.instance.n_agents == 2 and item.size == 4]
    assert evaluate(make_policy("oracle"), config_set(CONFIG, seed=4), tmp_path).reused_cells == 4
    other = config_set(CONFIG, seed=5)
    assert other.record["config"]["seed"] == 5
    with pytest.raises(ConfigError, match="config"):
        evaluate(make_policy("oracle"), other, tmp_path)


def test_instances_set__missing_and_empty_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="--instances"):
        instances_set(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="at least one instance"):
        instances_set(empty)


def _table(valid_rates: list[float]) -> EvalTable:
    return EvalTable("hand-made", {"spec": "test"},
                     rates={(2, 3 + i): (valid, valid / 2, 10) for i, valid in enumerate(valid_rates)})


@pytest.mark.parametrize(
    ("valid_rates", "cells", "cvar"),
    [
        ([0.7], 1, 0.7),  # at least one cell
        ([0.9, 0.2, 0.5], 1, 0.2),
        ([1.0] * 9 + [0.3], 1, 0.3),  # 10 cells: exactly one
        ([1.0] * 9 + [0.4, 0.6], 2, 0.5),  # 11 cells: ceil(1.1) = 2
        ([1.0] * 27 + [0.1, 0.2, 0.3], 3, 0.2),  # 30 cells: 3, not ceil(3.0000000000000004) = 4
        ([0.5, 0.5, 0.5], 1, 0.5),  # ties change nothing
    ],
)
def test_eval_table__cvar10_valid_is_the_mean_of_the_worst_tenth_of_cells(valid_rates, cells, cvar):
    table = _table(valid_rates)
    assert table.cvar_cells() == cells and table.cvar10_valid() == pytest.approx(cvar)
    data = table.to_dict()
    assert data["cvar10_valid"] == pytest.approx(cvar) and data["cvar10_cells"] == cells
    assert (f"worst 10% of cells (cvar10_valid, the {cells} of {len(valid_rates)} cells with the lowest valid "
            f"rate): valid {100 * cvar:.1f}%") in table.render()


def test_eval_table__no_cells_no_cvar():
    table = _table([])
    assert table.cvar10_valid() is None and table.to_dict()["cvar10_valid"] is None
    assert "worst" not in table.render()
