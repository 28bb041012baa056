"""MovingAI .map/.scen import and export: hand-written files from the format spec, round trips, malformed files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator import constants as C
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate
from simulator.judge import judge_plan
from simulator.movingai import (
    MAX_SCEN_BYTES,
    export_movingai,
    format_map,
    format_scen,
    import_movingai,
    instances_from_scenarios,
    parse_map,
    parse_scen,
    read_map,
)
from simulator.solver import brute_force_optimum
from simulator.types import Instance

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "movingai"
LAKE_MAP = FIXTURES / "lake-6x4.map"
LAKE_SCEN = FIXTURES / "lake-6x4.scen"
I, H = C.ICE, C.HOLE
# lake-6x4.map, tile by tile: "..@.@." / ".T...T" / "..S..." / "OW..G."
LAKE_GRID = np.array([[I, I, H, I, H, I], [I, H, I, I, I, H], [I, I, I, I, I, I], [H, H, I, I, I, I]], np.int8)


def test_read_map__every_tile_of_the_spec_becomes_ice_or_hole():
    grid = read_map(LAKE_MAP)
    assert grid.dtype == np.int8 and grid.shape == (4, 6)
    assert np.array_equal(grid, LAKE_GRID)


def test_import_movingai__groups_of_k_lines_certified_labelled_and_skips_counted():
    result = import_movingai(LAKE_MAP, LAKE_SCEN, agents=2)
    report = result.report
    assert (report.scenario_lines, report.groups, report.imported) == (11, 5, 2)
    assert (report.skipped_shared, report.skipped_on_hole, report.skipped_unsolvable,
            report.skipped_solver_limit, report.leftover_lines) == (1, 1, 1, 0, 1)
    assert [(group, line) for group, line, _ in report.skipped] == [(1, 4), (2, 6), (3, 8)]
    assert "share the goal x 3, y 2" in report.skipped[0][2] and "unsolvable" in report.skipped[2][2]
    assert "imported 2 of 5" in report.render()
    first, second = result.items
    # x is the column, y the row: line 2 "0 0 -> 5 3" is (row 0, col 0) -> (row 3, col 5)
    assert first.instance == Instance(LAKE_GRID, [[0, 0], [2, 5]], [[3, 5], [0, 0]])
    assert second.instance == Instance(LAKE_GRID, [[3, 2], [1, 4]], [[1, 4], [3, 2]])
    assert [item.index for item in result.items] == [0, 4] and all(item.size == 6 for item in result.items)
    for item in result.items:
        assert brute_force_optimum(item.instance) == (item.optimal_makespan, item.optimal_sum_of_costs)
        verdict = judge_plan(item.instance, item.plan)
        assert verdict.valid and verdict.makespan == item.optimal_makespan
    # agent 0 crosses the corridor (0,0)-(1,0)-(2,0)-(2,1) that agent 1 must enter: one of them waits
    assert (first.sum_of_distances, first.needs_wait) == (15, True)
    assert (second.optimal_makespan, second.sum_of_distances, second.needs_wait) == (4, 8, False)


def test_import_movingai__one_agent_per_instance_and_a_window_of_groups():
    whole = import_movingai(LAKE_MAP, LAKE_SCEN, agents=1)
    assert whole.report.groups == 11 and whole.report.leftover_lines == 0
    window = import_movingai(LAKE_MAP, LAKE_SCEN, agents=1, first_group=8, max_groups=2)
    assert window.report.groups == 2 and [item.index for item in window.items] == [8, 9]
    assert [item.instance for item in window.items] == [item.instance for item in whole.items if item.index in (8, 9)]


def test_parse_scen__version_1_0_whitespace_fields_and_crlf_read_alike():
    tabbed = parse_scen(LAKE_SCEN.read_text())
    spaced = parse_scen(LAKE_SCEN.read_text().replace("version 1\n", "version 1.0\n").replace("\t", "  ")
                        .replace("\n", "\r\n"))
    assert tabbed == spaced
    assert tabbed[6].optimal_length == pytest.approx(7.82843) and tabbed[0].map_file == "lake-6x4.map"


def test_export_movingai__round_trip_gives_back_the_instances_and_labels(tmp_path):
    config = StageConfig.from_dict({"agents": [2, 3], "samples": 6, "seed": 5, "sizes": {
        4: {"data_ratio": 0.5, "hole_ratio": 0.25, "wait_ratio": 0.5},
        5: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0}}})
    items = generate(config).instances
    paths = export_movingai(items, tmp_path, stem="stage")
    maps = [path for path in paths if path.suffix == ".map"]
    assert len(maps) == len(items) and all(path.exists() for path in paths)
    back = []
    for scen in (path for path in paths if path.suffix == ".scen"):
        agents = int(scen.stem.rsplit("-a", 1)[1])
        map_path = scen.with_name(scen.stem.rsplit("-a", 1)[0] + ".map")
        result = import_movingai(map_path, scen, agents=agents)
        assert result.report.imported == result.report.groups
        back.extend(result.items)
    by_content = {item.instance.content_key(): item for item in back}
    for original in items:
        imported = by_content[original.instance.content_key()]
        assert imported.instance == original.instance
        assert (imported.optimal_makespan, imported.optimal_sum_of_costs, imported.sum_of_distances,
                imported.needs_wait, imported.plan) == (original.optimal_makespan, original.optimal_sum_of_costs,
                                                        original.sum_of_distances, original.needs_wait, original.plan)
    assert len(back) == len(items)


def test_export_movingai__instances_on_one_board_share_its_map_and_lengths_are_bare_distances(tmp_path):
    one = Instance(LAKE_GRID, [[0, 0], [2, 5]], [[3, 5], [0, 0]])
    two = Instance(LAKE_GRID, [[3, 2], [1, 4]], [[1, 4], [3, 2]])
    three = Instance(LAKE_GRID, [[2, 2]], [[0, 3]])
    paths = export_movingai([one, two, three], tmp_path, stem="lake")
    assert [path.name for path in paths] == ["lake-0000.map", "lake-0000-a1.scen", "lake-0000-a2.scen"]
    assert paths[0].read_text() == "type octile\nheight 4\nwidth 6\nmap\n..@.@.\n.@...@\n......\n@@....\n"
    assert paths[2].read_text().splitlines() == [
        "version 1",
        "0\tlake-0000.map\t6\t4\t0\t0\t5\t3\t8", "0\tlake-0000.map\t6\t4\t5\t2\t0\t0\t7",
        "1\tlake-0000.map\t6\t4\t2\t3\t4\t1\t4", "1\tlake-0000.map\t6\t4\t4\t1\t2\t3\t4",
    ]
    result = import_movingai(paths[0], paths[2], agents=2)
    assert [item.instance for item in result.items] == [one, two]


def test_format__a_board_and_its_text_round_trip_exactly():
    text = format_map(LAKE_GRID)
    assert np.array_equal(parse_map(text), LAKE_GRID)
    assert format_map(parse_map(text)) == text


def test_format_scen__unreachable_goals_and_mixed_boards_are_refused():
    cut_off = Instance(LAKE_GRID, [[2, 0]], [[0, 5]])
    with pytest.raises(ConfigError, match=r"instances\[0\].goals\[0\]"):
        format_scen([cut_off], "lake.map")
    other = Instance(np.zeros((4, 6), np.int8), [[0, 0]], [[1, 1]])
    with pytest.raises(ConfigError, match=r"instances\[1\].grid"):
        format_scen([Instance(LAKE_GRID, [[0, 0]], [[2, 2]]), other], "lake.map")


MAP_HEAD = "type octile\nheight 2\nwidth 3\nmap\n"


@pytest.mark.parametrize(
    ("text", "where", "allowed"),
    [
        ("", "line 1", "missing: type, height, width, map"),
        ("type grid\nheight 2\nwidth 3\nmap\n...\n...\n", "line 1", "'type octile'"),
        ("type octile\nheight two\nwidth 3\nmap\n", "line 2", "'height N' with N an integer 1..256"),
        ("type octile\nheight 0\nwidth 3\nmap\n", "line 2", "a height of 1..256"),
        ("type octile\nheight 2\nwidth 257\nmap\n", "line 3", "a width of 1..256"),
        ("type octile\nheight 2\nheight 2\nwidth 3\nmap\n", "line 3", "each header line once"),
        ("type octile\nheight 2\nmap\n...\n...\n", "line 3", "missing: width"),
        ("type octile\nheight 2\nwidth 3\nlegend x\nmap\n", "line 4", "a header line"),
        (MAP_HEAD + "...\n", "line 6", "2 map rows (height 2); the file has 1"),
        (MAP_HEAD + "...\n..\n", "line 6", "a row of exactly 3 tiles"),
        (MAP_HEAD + "...\n.#.\n", "line 6 column 2", "one of . G S (passable: ice) or @ O T W (impassable: hole)"),
        (MAP_HEAD + "...\n...\n...\n", "line 7", "nothing after the 2 map rows"),
    ],
)
def test_parse_map__malformed_files_name_the_file_line_and_what_is_allowed(text, where, allowed):
    with pytest.raises(ConfigError) as caught:
        parse_map(text, "user.map")
    message = str(caught.value)
    assert f"user.map {where}" in message and allowed in message


def test_parse_map__trailing_blank_lines_and_crlf_are_fine():
    assert parse_map((MAP_HEAD + "..@\nGST\n\n\n").replace("\n", "\r\n")).tolist() == [[I, I, H], [I, I, H]]


SCEN_LINE = "0\tm.map\t3\t2\t0\t0\t2\t1\t3"


@pytest.mark.parametrize(
    ("text", "where", "allowed"),
    [
        ("", "user.scen", "'version 1' then one line per problem"),
        ("version 2\n" + SCEN_LINE, "line 1", "'version 1' or 'version 1.0'"),
        (SCEN_LINE + "\n", "line 1", "'version 1' or 'version 1.0'"),
        ("version 1\n0\tm.map\t3\t2\t0\t0\t2\t1\n", "line 2", "9 tab-separated fields"),
        ("version 1\n0\tm.map\t3\t2\t-1\t0\t2\t1\t3\n", "line 2", "start_x: an integer >= 0"),
        ("version 1\n0\tm.map\t3\t2\t0\t0\t2\ty\t3\n", "line 2", "goal_y: an integer >= 0"),
        ("version 1\nb\tm.map\t3\t2\t0\t0\t2\t1\t3\n", "line 2", "bucket: an integer >= 0"),
        ("version 1\n\n0\tm.map\t3\t2\t0\t0\t2\t1\tnan\n", "line 3", "optimal_length: a finite number >= 0"),
    ],
)
def test_parse_scen__malformed_files_name_the_file_line_and_what_is_allowed(text, where, allowed):
    with pytest.raises(ConfigError) as caught:
        parse_scen(text, "user.scen")
    message = str(caught.value)
    assert (where if where == "user.scen" else f"user.scen {where}") in message and allowed in message


@pytest.mark.parametrize(
    ("line", "allowed"),
    [
        ("0\tm.map\t4\t2\t0\t0\t2\t1\t3", "the map's own size, width 3 height 2"),
        ("0\tm.map\t3\t2\t3\t0\t2\t1\t3", "0 <= start_x < 3 and 0 <= start_y < 2"),
        ("0\tm.map\t3\t2\t0\t0\t2\t2\t3", "0 <= goal_x < 3 and 0 <= goal_y < 2"),
    ],
)
def test_instances_from_scenarios__lines_that_do_not_fit_the_map_are_errors_before_any_solving(line, allowed):
    scenarios = parse_scen(f"version 1\n{SCEN_LINE}\n{line}\n")
    with pytest.raises(ConfigError) as caught:
        instances_from_scenarios(np.zeros((2, 3), np.int8), scenarios, agents=2, source="user.scen")
    assert "user.scen line 3" in str(caught.value) and allowed in str(caught.value)


@pytest.mark.parametrize("agents", [0, 65, True, 2.0])
def test_import_movingai__agents_out_of_range_are_refused(agents):
    with pytest.raises(ConfigError, match="agents"):
        import_movingai(LAKE_MAP, LAKE_SCEN, agents=agents)


def test_read__oversized_missing_and_binary_files_are_clear_errors(tmp_path):
    big = tmp_path / "big.scen"
    big.write_bytes(b"version 1\n" + b"x" * MAX_SCEN_BYTES)
    with pytest.raises(ConfigError, match="at most 16,777,216 bytes"):
        import_movingai(LAKE_MAP, big)
    with pytest.raises(ConfigError, match="missing.map"):
        import_movingai(tmp_path / "missing.map", LAKE_SCEN)
    binary = tmp_path / "binary.map"
    binary.write_bytes(b"\xff\xfe" * 10)
    with pytest.raises(ConfigError, match="UTF-8"):
        read_map(binary)


def test_import_one__solves_only_its_group_and_says_why_a_group_is_no_instance():
    from simulator.movingai import import_one

    item = import_one(LAKE_MAP, LAKE_SCEN, agents=2, group=4)
    assert item.index == 4 and item.instance == Instance(LAKE_GRID, [[3, 2], [1, 4]], [[1, 4], [3, 2]])
    with pytest.raises(ConfigError, match=r"--episode = 3 is not allowed.*from line 8.*unsolvable"):
        import_one(LAKE_MAP, LAKE_SCEN, agents=2, group=3, field_name="--episode")
    with pytest.raises(ConfigError, match=r"group = 5 is not allowed: 0\.\.4"):
        import_one(LAKE_MAP, LAKE_SCEN, agents=2, group=5)
