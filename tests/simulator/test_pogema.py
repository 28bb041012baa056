"""POGEMA GridConfig import and export: hand-written documents, round trips, refused documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator import constants as C
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate
from simulator.pogema import (
    from_grid_config,
    grid_config_text,
    read_grid_config,
    to_grid_config,
    write_grid_config,
)
from simulator.types import Instance

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pogema"
I, H = C.ICE, C.HOLE
LAKE = Instance(np.array([[I, I, H, I], [I, I, I, I], [H, I, I, H]], np.int8), [[0, 0], [2, 1]], [[2, 2], [0, 3]])


@pytest.mark.parametrize("name", ["lake.yaml", "lake.json"])
def test_read_grid_config__hand_written_files_give_the_instance(name):
    assert read_grid_config(FIXTURES / name) == LAKE


@pytest.mark.parametrize(
    "board",
    ["..#.\n....\n#..#", "\n  ..#.\n  ....\n  #..#\n", ["..#.", "....", "#..#"],
     [[0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 1]]],
)
def test_from_grid_config__every_form_of_the_map_reads_alike(board):
    assert from_grid_config({"map": board, "agents_xy": [[0, 0], [2, 1]], "targets_xy": [[2, 2], [0, 3]]}) == LAKE


def test_to_grid_config__the_document_pogema_reads():
    assert to_grid_config(LAKE) == {"map": "..#.\n....\n#..#", "agents_xy": [[0, 0], [2, 1]],
                                    "targets_xy": [[2, 2], [0, 3]], "num_agents": 2}


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_grid_config__round_trip_of_generated_instances_through_files(tmp_path, suffix):
    config = StageConfig.from_dict({"agents": [1, 4], "samples": 8, "seed": 2, "sizes": {
        5: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.25},
        7: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.25}}})
    for number, item in enumerate(generate(config).instances):
        path = tmp_path / f"instance-{number}{suffix}"
        write_grid_config(item.instance, path)
        assert read_grid_config(path) == item.instance
        assert from_grid_config(to_grid_config(item.instance)) == item.instance


def test_grid_config_text__yaml_keeps_obstacle_rows_out_of_comments():
    board = Instance(np.array([[H, I], [I, I]], np.int8), [[0, 1]], [[1, 0]])
    text = grid_config_text(board, "yaml")
    assert text.startswith("map: |\n  #.\n  ..\n")
    with pytest.raises(ConfigError, match="'json' or 'yaml'"):
        grid_config_text(board, "toml")


BASE = {"map": "...\n.#.", "agents_xy": [[0, 0]], "targets_xy": [[1, 2]]}


@pytest.mark.parametrize(
    ("change", "field", "allowed"),
    [
        ({"map": None}, "doc.map", "present"),
        ({"targets_xy": None}, "doc.targets_xy", "present"),
        ({"map": ""}, "doc.map", "a string of rows"),
        ({"map": "...\n.x."}, "doc.map row 1 column 1", "'.' (free) or '#' (obstacle)"),
        ({"map": "...\n.."}, "doc.map row 1", "3 tiles like row 0"),
        ({"map": [[0, 0, 0], [0, 2, 0]]}, "doc.map row 1", "0 (free) or 1 (obstacle)"),
        ({"map": [[0, 0, 0], [0, True, 0]]}, "doc.map row 1", "0 (free) or 1 (obstacle)"),
        ({"map": ["." * 257]}, "doc.map row 0", "1..256 tiles"),
        ({"map": ["."] * 257}, "doc.map", "at most 256 rows"),
        ({"agents_xy": [[0, 0, 1]]}, "doc.agents_xy[0]", "[row, col]: two integers"),
        ({"agents_xy": [[0, True]]}, "doc.agents_xy[0]", "[row, col]: two integers"),
        ({"agents_xy": []}, "doc.agents_xy", "a list of 1..64 [row, col] pairs"),
        ({"agents_xy": [[2, 0]]}, "doc.agents_xy[0]", "0 <= row < 2 and 0 <= col < 3"),
        ({"targets_xy": [[1, 1]]}, "doc.targets_xy[0]", "a free cell ('.'), not an obstacle"),
        ({"agents_xy": [[0, 0], [0, 0]], "targets_xy": [[1, 2], [1, 0]]}, "doc.agents_xy[1]", "(agents_xy[0] has it)"),
        ({"targets_xy": [[1, 2], [1, 0]]}, "doc.targets_xy", "one per agent (1 agent)"),
        ({"num_agents": 2}, "doc.num_agents", "the number of agents_xy (1)"),
        ({"possible_agents_xy": [[0, 1]]}, "doc.possible_agents_xy", "a GridConfig key this importer knows"),
    ],
)
def test_from_grid_config__bad_documents_name_the_field_and_what_is_allowed(change, field, allowed):
    with pytest.raises(ConfigError) as caught:
        from_grid_config({**BASE, **change}, "doc")
    assert str(caught.value).startswith(field + " =") and allowed in str(caught.value)


def test_read_grid_config__bad_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="ending in .json, .yaml or .yml"):
        read_grid_config(tmp_path / "lake.toml")
    broken = tmp_path / "broken.json"
    broken.write_text('{"map": "..", "map": "..."}')
    with pytest.raises(ConfigError, match="duplicate key"):
        read_grid_config(broken)
    listed = tmp_path / "listed.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="a mapping with map, agents_xy and targets_xy"):
        read_grid_config(listed)
