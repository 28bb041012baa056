"""Users' files, fuzzed: the readers of users' own maps, scenarios, instance files, engineer states and handed-over
instances load, or raise one :class:`~simulator.errors.ConfigError` line, in bounded time; what they accept is
valid, and every label they accept is the solver's.

The style of ``test_fuzz.py`` (hypothesis strategies, each reader called under ``bounded``; nothing but ConfigError
escapes, since any other exception fails the test), on inputs built valid and then damaged:

* MovingAI maps and scenarios (``simulator.movingai``): ``read_map``, ``read_scen``, ``instances_from_scenarios``
  (what ``mapf-lake gen --map --scen`` runs), ``import_one`` (``play --map --scen``) and the ``gen`` command itself.
  Valid files from random boards and agent placements, then cut, with characters flipped or inserted, numbers
  replaced by huge, negative or out-of-range ones, header lines wrong, dropped or doubled, a byte-order mark, tabs,
  NUL, bytes that are not UTF-8, or replaced by hostile text.
* Instance records (``gen --out`` JSON lines) as ``eval --instances`` (``policy.evaluation.instances_set``),
  ``play --load`` (``render.game.load_instance``) and ``simulator.generator.read_jsonl`` read them: generated
  instances with a value replaced by another JSON value (strings for numbers, 4.7, "false", nesting), a label off by
  one, a plan or board changed, tokens no encoder writes (NaN, 1e309, 5,000 digits), keys dropped or doubled,
  bytes flipped or cut.
* Engineer states (``load_state`` of gap, bandit, progress, target and replay): a state the engineer wrote, with
  values and keys replaced; an accepted state round-trips and lets ``propose`` decide a valid config.
* Instances a decision record hands the next stage (``EngineerDecision.from_dict`` then ``certify_handed``): a
  damaged entry is refused naming its index, or certified.

Files are written to a temporary folder made per example (function-scoped fixtures are not reset between
hypothesis examples).
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from simulator import constants as C
from simulator.errors import ConfigError
from tests.project.test_fuzz import bounded, hostile_text

READERS = settings(max_examples=100, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SOLVING = 10.0  # seconds per call that certifies (tiny boards take milliseconds; generous for a loaded machine)


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """The solver, judge and generator compiled (numba) and the shared inputs built once, untimed."""
    _pool()
    _engineer_cases()


def _refused(error: ConfigError, *names: str) -> None:
    """A refusal is one printable line that says what is wrong and, where ``names`` are given, starts with one
    of them (the file, or the flag that named it)."""
    message = str(error)
    assert message.strip() and len(message.splitlines()) == 1 and message.isprintable(), repr(message[:400])
    assert len(message) < 2000, message[:400]
    if names:
        assert message.startswith(names), (names, message[:400])


def _check_certified(item) -> None:
    """``item`` (a LabelledInstance) carries the solver's labels and a valid plan of the optimal makespan."""
    from simulator.generator import bare_distances
    from simulator.judge import judge_plan
    from simulator.solver import solve

    instance = item.instance
    solution = solve(instance)
    assert solution.status == "solved", solution.reason
    distances = int(bare_distances(instance).sum())
    assert (item.optimal_makespan, item.optimal_sum_of_costs, item.sum_of_distances, item.needs_wait) == (
        solution.makespan, solution.sum_of_costs, distances, solution.sum_of_costs > distances)
    assert item.size == max(instance.height, instance.width)
    verdict = judge_plan(instance, item.plan)
    assert verdict.valid and verdict.makespan == item.optimal_makespan


def _check_instance_cells(instance, grid: np.ndarray | None = None) -> None:
    """Starts and goals in bounds, on ice, distinct; the board ``grid`` when given."""
    if grid is not None:
        assert np.array_equal(instance.grid, grid)
    height, width = instance.grid.shape
    assert 1 <= height <= C.MAX_SIDE and 1 <= width <= C.MAX_SIDE
    for points in (instance.starts.tolist(), instance.goals.tolist()):
        assert len(set(map(tuple, points))) == len(points)
        for row, col in points:
            assert 0 <= row < height and 0 <= col < width and instance.grid[row, col] == C.ICE


# --- MovingAI maps and scenarios ---------------------------------------------------------------------------------
PASSABLE, IMPASSABLE = ".GS", "@OTW"
# Numbers a damaged file may hold instead of one of its own. Not yet: thousands of leading zeros before a small
# number (see test_movingai__thousands_of_leading_zeros_are_refused_not_converted below).
HUGE_NUMBERS = ["9" * 5000, "1" + "0" * 60, "-1", "-3", "+1", "0", "00", "256", "257", "1000000", "4294967296",
                "18446744073709551616", "1e309", "nan", "inf", "-0", "4.0", "0x10", "1_0", "٣", "²", "", "4 4"]
CHARACTERS = [".", "@", "T", "W", "G", "S", "O", "\t", " ", "\n", "\r", "\x00", "\ufeff", "é", "9", "-", "٣", "\x0c",
              "\u2028", "\x85", "\u202e"]
WRONG_LINES = ["type grid", "type octile octile", "height", "width 0", "height 300", "map 1", "version 2", "version",
               "VERSION 1", "Map", "#comment", "height 4 4", "width -2", "type", "0\tlake.map\t1\t1\t0\t0\t0\t0\t0"]
NOT_UTF8 = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x82", b"\xc0\x80"]
TEXT_DAMAGE = ["cut", "flip", "insert", "number", "wrong_line", "drop_line", "double_line", "hostile"]
BYTE_DAMAGE = ["bom", "not_utf8", "cut_bytes"]
BENIGN = {"bom"}  # a leading byte-order mark is dropped by every reader: the file reads as written


@dataclass
class MovingAICase:
    """A map and a scenario as written, and what they say."""

    map_bytes: bytes
    scen_bytes: bytes
    agents: int
    grid: np.ndarray  # (H, W) int8: the board as written
    lines: list[tuple[tuple[int, int], tuple[int, int]]]  # (start, goal) as (row, col) per scenario line
    damage: list[tuple[str, str]]  # (file, kind): what was done to the files after writing them

    @property
    def intact(self) -> bool:
        """Read as written: nothing done but one byte-order mark per file."""
        return {kind for _, kind in self.damage} <= BENIGN and len(set(self.damage)) == len(self.damage)


def _damaged_text(draw, text: str, kind: str) -> str:
    if kind == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if kind in ("flip", "insert"):
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(CHARACTERS)) + text[at + (kind == "flip"):]
    if kind == "number":
        runs = list(re.finditer(r"\d+", text))
        if not runs:
            return text
        run = runs[draw(st.integers(0, len(runs) - 1))]
        return text[: run.start()] + draw(st.sampled_from(HUGE_NUMBERS)) + text[run.end():]
    if kind == "hostile":
        return draw(hostile_text)
    lines = text.split("\n")
    at = draw(st.integers(0, min(len(lines) - 1, 5) if kind == "wrong_line" else len(lines) - 1))
    if kind == "wrong_line":
        lines[at:at + draw(st.integers(0, 1))] = [draw(st.sampled_from(WRONG_LINES))]
    elif kind == "drop_line":
        del lines[at]
    else:
        lines.insert(at, lines[at])
    return "\n".join(lines)


def _damaged_bytes(draw, data: bytes, kind: str) -> bytes:
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    at = draw(st.integers(0, len(data)))
    if kind == "not_utf8":
        return data[:at] + draw(st.sampled_from(NOT_UTF8)) + data[at:]
    return data[:at]


@st.composite
def movingai_cases(draw, max_side: int = 6, max_agents: int = 3) -> MovingAICase:
    """A valid ``.map`` and ``.scen`` (random board, tiles of every kind, header order, line ends, separators,
    agents mostly on distinct passable cells, some on holes or sharing), then damaged 0-3 times."""
    height, width = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    holes = rng.random((height, width)) < draw(st.floats(0.0, 0.5))
    tiles = np.where(holes, rng.choice(list(IMPASSABLE), holes.shape), rng.choice(list(PASSABLE), holes.shape))
    grid = np.where(holes, C.HOLE, C.ICE).astype(np.int8)
    agents = draw(st.integers(1, max_agents))
    groups = draw(st.integers(1, 3))
    free = [tuple(map(int, cell)) for cell in np.argwhere(~holes)]
    every = [tuple(map(int, cell)) for cell in np.argwhere(np.ones_like(holes))]

    def placements(count: int) -> list[tuple[int, int]]:
        pool = free if len(free) >= count else every
        chosen = [pool[i] for i in rng.permutation(len(pool))[:count]]
        chosen += [every[rng.integers(len(every))] for _ in range(count - len(chosen))]
        return [every[rng.integers(len(every))] if rng.random() < 0.08 else cell for cell in chosen]

    lines = []
    for _ in range(groups):
        lines += list(zip(placements(agents), placements(agents)))
    lines += [(every[rng.integers(len(every))], every[rng.integers(len(every))])
              for _ in range(draw(st.integers(0, agents - 1)))]  # left over after the last whole group
    header = ["type octile", f"height {height}", f"width {width}"]
    if draw(st.booleans()):
        header[1], header[2] = header[2], header[1]
    end = draw(st.sampled_from(["\n", "\r\n"]))
    map_text = end.join([*header, "map", *("".join(row) for row in tiles)]) + end * draw(st.integers(1, 3))
    separator = draw(st.sampled_from(["\t", " ", "  "]))
    scen_text = "\n".join([draw(st.sampled_from(["version 1", "version 1.0"]))] + [
        separator.join(map(str, (number // agents, "lake.map", width, height, start[1], start[0], goal[1], goal[0],
                                 draw(st.sampled_from(["0", "3", "2.41421356", "1e2"])))))
        for number, (start, goal) in enumerate(lines)]) + "\n"
    texts = {"map": map_text, "scen": scen_text}
    damage = draw(st.lists(st.tuples(st.sampled_from(sorted(texts)), st.sampled_from(TEXT_DAMAGE + BYTE_DAMAGE)),
                           max_size=3))
    for target, kind in damage:
        if kind in TEXT_DAMAGE:
            texts[target] = _damaged_text(draw, texts[target], kind)
    data = {target: text.encode("utf-8") for target, text in texts.items()}
    for target, kind in damage:
        if kind in BYTE_DAMAGE:
            data[target] = _damaged_bytes(draw, data[target], kind)
    return MovingAICase(data["map"], data["scen"], agents, grid, lines, damage)


def _check_import(result, grid: np.ndarray, scenarios: list, agents: int) -> None:
    """An import's report adds up and each instance is its group's lines on the map, certified."""
    report = result.report
    assert np.array_equal(result.grid, grid)
    assert report.imported == len(result.items) and report.scenario_lines == len(scenarios)
    assert report.groups == len(scenarios) // agents and report.leftover_lines == len(scenarios) % agents
    assert report.groups == report.imported + report.skipped_shared + report.skipped_on_hole + \
        report.skipped_unsolvable + report.skipped_solver_limit == report.imported + len(report.skipped)
    for item in result.items:
        group = scenarios[item.index * agents:(item.index + 1) * agents]
        assert item.instance.starts.tolist() == [list(entry.start) for entry in group]
        assert item.instance.goals.tolist() == [list(entry.goal) for entry in group]
        _check_instance_cells(item.instance, grid)
        _check_certified(item)


def _check_intact_import(case: MovingAICase, result) -> None:
    """A file read as written imports exactly the groups whose agents have distinct cells on ice and that the
    solver solves."""
    from simulator.solver import solve
    from simulator.types import Instance

    imported = {item.index for item in result.items}
    for group in range(len(case.lines) // case.agents):
        lines = case.lines[group * case.agents:(group + 1) * case.agents]
        starts, goals = [start for start, _ in lines], [goal for _, goal in lines]
        placeable = (len(set(starts)) == len(set(goals)) == case.agents
                     and all(case.grid[cell] == C.ICE for cell in starts + goals))
        if not placeable:
            assert group not in imported, group
        elif group not in imported:
            assert solve(Instance(grid=case.grid, starts=starts, goals=goals)).status != "solved", group


def _write_case(folder: str, case: MovingAICase) -> tuple[Path, Path]:
    map_path, scen_path = Path(folder) / "lake.map", Path(folder) / "lake.scen"
    map_path.write_bytes(case.map_bytes)
    scen_path.write_bytes(case.scen_bytes)
    return map_path, scen_path


@settings(READERS, max_examples=150)
@given(case=movingai_cases(), group=st.integers(0, 2) | st.sampled_from([-1, 5]))
def test_fuzz_readers__movingai_files_import_certified_instances_or_raise_one_config_error(case, group):
    """``read_map``, ``read_scen``, the import ``gen --map --scen`` runs and ``import_one``: each refuses with one
    line naming its file (or the group), or gives a board of ice and holes, scenario lines in range, and instances
    that are their group's lines on passable, distinct cells with the solver's labels. Files read as written (no
    damage, or a byte-order mark) always load and import every group that is an instance."""
    from simulator.movingai import import_one, instances_from_scenarios, read_map, read_scen

    with tempfile.TemporaryDirectory() as folder:
        map_path, scen_path = _write_case(folder, case)
        grid = scenarios = result = None
        with bounded():
            try:
                grid = read_map(map_path)
            except ConfigError as error:
                _refused(error, str(map_path))
            try:
                scenarios = read_scen(scen_path)
            except ConfigError as error:
                _refused(error, str(scen_path))
        if grid is not None:
            assert grid.dtype == np.int8 and grid.ndim == 2 and np.isin(grid, (C.ICE, C.HOLE)).all()
            assert 1 <= min(grid.shape) and max(grid.shape) <= C.MAX_SIDE
        for entry in scenarios or []:
            assert min(entry.bucket, entry.width, entry.height, *entry.start, *entry.goal) >= 0
            assert np.isfinite(entry.optimal_length) and entry.optimal_length >= 0
        if grid is not None and scenarios is not None:
            with bounded(SOLVING):
                try:
                    result = instances_from_scenarios(grid, scenarios, case.agents, source=str(scen_path))
                except ConfigError as error:
                    _refused(error, str(scen_path))
            if result is not None:
                _check_import(result, grid, scenarios, case.agents)
        event("movingai: " + ("imported " + str(len(result.items)) if result is not None else
                              "map and scenario read, lines refused" if grid is not None and scenarios is not None
                              else "a file refused"))
        if case.intact:
            assert result is not None and np.array_equal(grid, case.grid)
            assert [(entry.start, entry.goal) for entry in scenarios] == case.lines
            _check_intact_import(case, result)
        with bounded(SOLVING):
            try:
                item = import_one(map_path, scen_path, case.agents, group)
            except ConfigError as error:
                _refused(error, str(map_path), str(scen_path), "group")
                item = None
        event(f"import_one: {'certified' if item is not None else 'refused'}")
        if result is not None:  # one group alone is the same instance as in the whole import, or refused with it
            whole = {one.index: one for one in result.items}
            assert (item is None) == (group not in whole), group
            if item is not None:
                assert item.to_dict() == whole[group].to_dict()
        elif item is not None:
            _check_instance_cells(item.instance)
            _check_certified(item)


@settings(READERS, max_examples=40)
@given(case=movingai_cases(max_side=5))
def test_fuzz_readers__gen_map_scen_exits_0_with_certified_instances_or_2_with_one_line(capsys, case):
    """``mapf-lake gen --map --scen --agents K --out F`` in process: exit 0 and F holds instances that read back
    certified (``eval --instances`` reads them), or exit 2, one error line, and no F."""
    from curriculum.cli import main
    from simulator.generator import read_jsonl_digest

    with tempfile.TemporaryDirectory() as folder:
        map_path, scen_path = _write_case(folder, case)
        out = Path(folder) / "out.jsonl"
        capsys.readouterr()
        with bounded(SOLVING):
            code = main(["gen", "--map", str(map_path), "--scen", str(scen_path), "--agents", str(case.agents),
                         "--out", str(out)])
        printed = capsys.readouterr()
        event(f"gen --map --scen: exit {code}")
        assert code in (0, 2), code
        if code == 2:
            lines = printed.err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("mapf-lake: error: ") and lines[0].isprintable(), lines
            assert not out.exists()
            return
        with bounded(SOLVING):
            items, _ = read_jsonl_digest(out, certify=True)
        assert items and f"imported {len(items)} of" in printed.out
        for item in items:
            _check_instance_cells(item.instance)
            _check_certified(item)


@pytest.mark.parametrize("reader", ["map height", "scenario start_x", "map text agent"])
def test_movingai__thousands_of_leading_zeros_are_read_or_refused_in_one_line(reader):
    from simulator.movingai import parse_map, parse_scen
    from simulator.text import parse_instance

    padded = "0" * 5000 + "1"
    call = {"map height": lambda: parse_map(f"type octile\nheight {padded}\nwidth 1\nmap\n.\n", "m.map"),
            "scenario start_x": lambda: parse_scen(f"version 1\n0\tm.map\t2\t2\t{padded}\t0\t1\t1\t1\n", "m.scen"),
            "map text agent": lambda: parse_instance(f"A{padded} . G1\n")}[reader]
    try:
        call()
    except ConfigError as error:
        _refused(error)


# --- instance records: eval --instances, play --load, read_jsonl ---------------------------------------------------
_POOL_RECORDS: list[dict] = []


def _pool() -> list[dict]:
    """Records of generated instances (3x3 and 4x4, 2 and 3 agents, some that need a wait), made once."""
    if not _POOL_RECORDS:
        from simulator.config import StageConfig
        from simulator.generator import generate

        spec = {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5}
        config = StageConfig.from_dict({"agents": [2, 3], "samples": 8, "seed": 11, "sizes": {3: spec, 4: spec}})
        _POOL_RECORDS.extend(item.to_dict() for item in generate(config).instances)
    return _POOL_RECORDS


RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e309", "-1e309", "1E400", "9" * 5000, "-" + "9" * 5000, "-0", "4.0",
              "1e2", "0.5", "true", "null", '"4"', "[]", "{}", "[[0]]"]


def _json_values(keys: st.SearchStrategy[str]) -> st.SearchStrategy:
    """Any JSON value (and NaN, infinities), mappings keyed by ``keys``, biased toward the values a typed reader
    mistakes for its own."""
    return st.recursive(
        st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True, allow_infinity=True)
        | st.sampled_from([4.7, 1.0, -1, 0, 10**30, 2**63, 2**31, "4", "false", "true", "", "x", "0"])
        | st.text(max_size=6),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=3), max_leaves=12)


json_values = _json_values(st.text(max_size=4))
# Keys of any characters for the engineer states: their errors print a key escaped (line breaks, U+202E), see
# test_engineer_state__a_key_with_a_line_break_is_named_in_one_line below.
printable_keys = st.text(st.characters(categories=["L", "N", "P", "S", "Cc", "Zl", "Cf"]) | st.just(" "), max_size=4)
RECORD_DAMAGE = ["label", "plan", "board", "points", "extra_key", "replace", "raw", "drop_key",
                 "duplicate_key"]  # this order:
# the kinds that change a value where the record has it come before those that may change the record's shape
LABELS = ["optimal_makespan", "optimal_sum_of_costs", "sum_of_distances", "size", "needs_wait"]


def _damage_record(draw, record: dict, kind: str, raw: list[str]) -> str:
    """Damage ``record`` in place by ``kind``; returns a prefix to write before the record's text (a duplicate
    key), or "". A value that only ``raw`` tokens can write is put in as a marker string replaced when written."""
    if kind in ("replace", "raw"):
        parent, key = None, None
        target = record
        while isinstance(target, (dict, list)) and target and (parent is None or draw(st.booleans())):
            key = draw(st.sampled_from(sorted(target))) if isinstance(target, dict) else \
                draw(st.integers(0, len(target) - 1))
            parent, target = target, target[key]
        if parent is not None:
            if kind == "raw":
                raw.append(draw(st.sampled_from(RAW_TOKENS)))
                parent[key] = f"@@raw{len(raw) - 1}@@"
            else:
                parent[key] = draw(json_values)
    elif kind == "label":
        name = draw(st.sampled_from(LABELS))
        record[name] = (not record[name]) if name == "needs_wait" else record[name] + draw(st.sampled_from([-1, 1]))
    elif kind == "plan" and record["plan"]:
        plan = record["plan"]
        k = draw(st.integers(0, len(plan) - 1))
        how = draw(st.sampled_from(["drop_move", "add_move", "set_move", "swap_agents", "drop_agent", "empty"]))
        if how == "drop_move" and plan[k]:
            plan[k].pop(draw(st.integers(0, len(plan[k]) - 1)))
        elif how == "add_move":
            plan[k].insert(draw(st.integers(0, len(plan[k]))), draw(st.integers(0, C.N_ACTIONS - 1)))
        elif how == "set_move" and plan[k]:
            plan[k][draw(st.integers(0, len(plan[k]) - 1))] = draw(st.integers(0, C.N_ACTIONS - 1))
        elif how == "swap_agents":
            j = draw(st.integers(0, len(plan) - 1))
            plan[k], plan[j] = plan[j], plan[k]
        elif how == "drop_agent":
            del plan[k]
        elif how == "empty":
            plan[:] = [[] for _ in plan]
    elif kind == "board":
        row = draw(st.integers(0, len(record["grid"]) - 1))
        col = draw(st.integers(0, len(record["grid"][row]) - 1))
        record["grid"][row][col] = C.ICE if record["grid"][row][col] == C.HOLE else C.HOLE
    elif kind == "points":
        name = draw(st.sampled_from(["starts", "goals"]))
        k = draw(st.integers(0, len(record[name]) - 1))
        if draw(st.booleans()):
            j = draw(st.integers(0, len(record[name]) - 1))
            record[name][k], record[name][j] = record[name][j], record[name][k]
        else:
            side = record["size"]
            record[name][k] = [draw(st.integers(-1, side)), draw(st.integers(-1, side))]
    elif kind == "extra_key":  # a key the format does not have: ignored (see
        # test_instance_files__a_line_separator_inside_a_record_reads_alike_in_play_and_eval)
        record[draw(st.sampled_from(["note", "x", "", "plan "]))] = draw(json_values)
    elif kind == "drop_key":
        del record[draw(st.sampled_from(sorted(record)))]
    else:
        return f'"{draw(st.sampled_from(sorted(record) or ["size"]))}":1,'
    return ""


def _record_text(record: dict, raw: list[str], prefix: str = "") -> str:
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    for index, token in enumerate(raw):
        text = text.replace(f'"@@raw{index}@@"', token)
    return "{" + prefix + text[1:] if prefix and text.startswith("{") else text


@dataclass
class InstanceFile:
    """A JSON-lines instance file and what is known of it."""

    data: bytes
    lines: list[str | None]  # each line's record as written, None for a blank line
    damaged_lines: set[int]  # 1-based numbers of the lines whose record was damaged
    bytes_damaged: bool

    def records(self) -> list[str]:
        return [line for line in self.lines if line is not None]

    @property
    def intact(self) -> bool:
        return not self.damaged_lines and not self.bytes_damaged


@st.composite
def instance_files(draw) -> InstanceFile:
    """1-4 generated records (repeats allowed), some damaged at the JSON level; blank lines, CRLF and a
    byte-order mark (all read alike); then, sometimes, bytes flipped, inserted or cut."""
    pool = _pool()
    records = [copy.deepcopy(pool[i]) for i in draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=4))]
    texts, damaged = [], set()
    for index, record in enumerate(records):
        raw: list[str] = []
        prefix = ""
        kinds = draw(st.lists(st.sampled_from(RECORD_DAMAGE), max_size=2)) if draw(st.booleans()) else []
        for kind in sorted(kinds, key=RECORD_DAMAGE.index):
            prefix = _damage_record(draw, record, kind, raw) or prefix
            damaged.add(index)
        if draw(st.integers(0, 9)) == 0:  # seed and index are the record's own: any in range is fine
            record["seed"] = draw(st.integers(0, 2**63 - 1))
        texts.append(_record_text(record, raw, prefix))
    lines: list[str | None] = []
    numbers = {}
    for index, text in enumerate(texts):
        if draw(st.integers(0, 5)) == 0:
            lines.append(None)
        lines.append(text)
        numbers[index] = len(lines)
    end = draw(st.sampled_from(["\n", "\r\n"]))
    data = ("".join((line or "") + end for line in lines)).encode()
    if draw(st.integers(0, 5)) == 0:  # a byte-order mark, before a blank first line too
        data = b"\xef\xbb\xbf" + data
    bytes_damaged = False
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 3)) == 0 else 0):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["flip", "insert", "cut"]))
        if how == "flip":
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
        elif how == "insert":
            data = data[:at] + draw(st.sampled_from([b"\x00", b"\xff", b"\n", b"\r", b"{", b"]", b" ", b"\x0c",
                                                     b"\xef\xbb\xbf", b"\xc2\xa0"])) + data[at:]
        else:
            data = data[:at]
        bytes_damaged = True
    return InstanceFile(data, lines, {numbers[index] for index in damaged}, bytes_damaged)


def _check_line_named(error: ConfigError, file: InstanceFile, path: Path) -> None:
    """With only records damaged (no bytes), a refusal names the line of a damaged record."""
    if not file.bytes_damaged:
        assert any(str(error).startswith(f"{path} line {number}") for number in file.damaged_lines), str(error)[:300]


@settings(READERS, max_examples=150)
@given(file=instance_files(), episode=st.integers(-1, 4))
def test_fuzz_readers__instance_files_load_certified_or_raise_one_config_error_naming_the_line(file, episode):
    """``eval --instances`` (``instances_set``, which certifies every record), ``play --load`` (``load_instance``,
    which certifies the record it shows) and ``read_jsonl`` (typed, not certified): a refusal is one line naming the
    file (and the damaged line, when only records were damaged); what loads is every record, and each label is the
    solver's. A file whose records are intact always loads, as written."""
    from policy.evaluation import instances_set
    from render.game import load_instance
    from simulator.generator import read_jsonl
    from simulator.solver import solve

    records = file.records()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mine.jsonl"
        path.write_bytes(file.data)
        with bounded(SOLVING):
            try:
                evaluation = instances_set(path)
            except ConfigError as error:
                _refused(error, str(path), "--instances")
                _check_line_named(error, file, path)
                evaluation = None
        event(f"instances_set: {'refused' if evaluation is None else 'certified'} ("
              f"{'intact' if file.intact else 'damaged'})")
        if evaluation is not None:
            items = [item for cell in evaluation.cells for item in cell.load()]
            assert len(items) == sum(cell.count for cell in evaluation.cells)
            for cell in evaluation.cells:
                assert all((item.instance.n_agents, item.size) == (cell.agents, cell.size) for item in cell.load())
            if not file.bytes_damaged:
                assert len(items) == len(records)
            for item in items:
                _check_instance_cells(item.instance)
                _check_certified(item)
        if file.intact:
            assert evaluation is not None
        if evaluation is not None and not file.bytes_damaged:  # read as written: no value taken for another
            keys = ("size", "index", "seed", "grid", "starts", "goals", "optimal_makespan", "optimal_sum_of_costs",
                    "sum_of_distances", "needs_wait", "plan")
            written = sorted(json.dumps({key: json.loads(text)[key] for key in keys}, sort_keys=True)
                             for text in records)
            assert sorted(json.dumps(item.to_dict(), sort_keys=True) for item in items) == written

        with bounded():
            try:
                typed = read_jsonl(path)
            except ConfigError as error:
                _refused(error, str(path))
                typed = None
        if evaluation is not None:  # what certifies reads
            assert typed is not None and len(typed) == len(items)
        for item in typed or []:
            _check_instance_cells(item.instance)
            assert 0 <= item.optimal_makespan <= C.MAX_PLAN_LENGTH and isinstance(item.needs_wait, bool)

        with bounded(SOLVING):
            try:
                instance, labels = load_instance(path, episode)
            except ConfigError as error:
                _refused(error, str(path), "--episode", "--load")
                instance = labels = None
        event(f"load_instance: {'refused' if instance is None else 'labelled' if labels is not None else 'unlabelled'}")
        numbers = [number for number, line in enumerate(file.lines, start=1) if line is not None]
        chosen = numbers[episode] if 0 <= episode < len(numbers) else None
        if chosen is not None and (evaluation is not None or not file.bytes_damaged and chosen
                                                       not in file.damaged_lines):
            # a record eval --instances takes, or an intact one: play --load takes it too
            assert instance is not None and labels is not None, "a record eval --instances takes was refused"
            if not file.bytes_damaged:
                record = json.loads(records[episode])
                assert instance.to_dict() == {key: record[key] for key in ("grid", "starts", "goals")}
                assert labels.optimal_makespan == record["optimal_makespan"]
        if instance is not None:
            _check_instance_cells(instance)
            if labels is not None:
                solution = solve(instance)
                assert (labels.optimal_makespan, labels.optimal_sum_of_costs) == (solution.makespan,
                                                                                  solution.sum_of_costs)


def test_instance_files__a_byte_order_mark_before_a_blank_first_line_is_dropped_as_everywhere(tmp_path):
    from policy.evaluation import instances_set
    from render.game import load_instance

    path = tmp_path / "mine.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n" + json.dumps(_pool()[0]).encode() + b"\n")
    assert load_instance(path, 0)[1] is not None
    assert sum(cell.count for cell in instances_set(path).cells) == 1


def test_instance_files__a_list_in_place_of_an_action_code_is_refused(tmp_path):
    from policy.evaluation import instances_set
    from simulator.generator import label_instance
    from simulator.types import Instance

    record = label_instance(Instance(grid=[[0, 0, 0]], starts=[[0, 0], [0, 1]], goals=[[0, 0], [0, 2]]))[0].to_dict()
    assert record["plan"] == [[], [C.RIGHT]]  # agent 0 starts on its goal
    record["plan"] = [[[]], [C.RIGHT]]
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(ConfigError, match="plan"):
        instances_set(path)


@pytest.mark.parametrize("where", ["a CR between tokens", "U+2028 in a string"])
def test_instance_files__a_line_separator_inside_a_record_reads_alike_in_play_and_eval(tmp_path, where):
    from policy.evaluation import instances_set
    from render.game import load_instance

    path = tmp_path / "mine.jsonl"
    text = json.dumps(_pool()[0]).replace(", ", ",\r", 1) if where.startswith("a CR") else \
        json.dumps({**_pool()[0], "note": "a\u2028b"}, ensure_ascii=False)
    path.write_bytes(text.encode() + b"\n")
    assert sum(cell.count for cell in instances_set(path).cells) == 1
    assert load_instance(path, 0)[1] is not None


# --- engineer states ---------------------------------------------------------------------------------------------
@dataclass
class EngineerCase:
    """An engineer that keeps state between stages, set up as the tests of test_engineer_engineers.py set it up."""

    name: str
    options: dict
    config: object  # StageConfig
    make_context: object  # () -> EngineerContext
    state: dict  # what the engineer wrote in its decision record
    material: object = None  # () -> StageMaterial, for an engineer that reads the instances


_ENGINEER_CASES: dict[str, EngineerCase] = {}


def _engineer_cases() -> dict[str, EngineerCase]:
    """Each stateful engineer run once on a small context: its state is the document to damage."""
    if _ENGINEER_CASES:
        return _ENGINEER_CASES
    from engineer import make_engineer
    from engineer.material import StageMaterial
    from simulator.config import StageConfig
    from tests.engineer.test_engineer_engineers import (CONFIG, _bank, _length_context, _one_size, _rounds_context,
                                               _signal_context, _wait_context)

    one = _one_size(4)
    bank = tuple(_bank(samples=8))
    two_sizes = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {
        side: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.0} for side in (3, 4)}})
    cells = {3: {m: (1.0, 10) for m in range(1, 6)}, 4: {1: (1.0, 10), **{m: (0.5, 10) for m in range(2, 8)}}}
    cases = [
        EngineerCase("gap", {"hole_step": 0.1}, CONFIG, lambda: _wait_context(
            {3: (0.3, 0.5, 30), 4: (0.0, 0.6, 30), 5: (0.0, 0.0, 30), 6: (0.0, 0.4, 9)}, rounds=[{3: 0.5, 4: 0.2}]),
            {}),
        EngineerCase("bandit", {}, CONFIG, lambda: _signal_context({3: (8, 0.2), 4: (8, 0.9), 5: (8, 0.5)}), {}),
        EngineerCase("progress", {}, CONFIG, lambda: _rounds_context(
            [{3: 0.8, 4: 0.4, 5: 0.1, 6: 0.3}, {3: 0.8, 4: 0.5, 5: 0.4, 6: 0.2}]), {}),
        EngineerCase("target", {}, one, lambda: _length_context(one, {4: {m: (0.5, 10) for m in range(1, 7)}},
                                                                signal={4: 1.0}), {}),
        EngineerCase("replay", {"share": 0.2, "buffer_size": 30}, two_sizes,
                     lambda: _length_context(two_sizes, cells, rates={3: 1.0, 4: 0.5}), {},
                     lambda: StageMaterial(stage=2, bank=bank)),
    ]
    for case in cases:
        engineer = make_engineer(case.name, **case.options)
        if case.material is not None:
            engineer.load_material(StageMaterial(stage=1, bank=bank))
        first = engineer.propose(case.make_context(), case.config, seed=1)
        if case.name == "gap":  # a second stage: the lesson in place
            first = engineer.propose(case.make_context(), first.config, seed=2)
        case.state = json.loads(json.dumps(first.to_dict()["details"]["state"]))
        assert any(case.state.values()), (case.name, case.state)
        _ENGINEER_CASES[case.name] = case
    return _ENGINEER_CASES


STATE_KEYS = ["x", "", "0", "2", "3", "4", "04", "4.0", " 4", "+4", "-4", "300", "٤", "9" * 50, "lesson",
              "start", "values", "counts", "rates", "targets", "buffer", "instance", "seen", "valid", "samples"]


@st.composite
def damaged_states(draw, state: dict) -> dict:
    """``state`` with 1-3 values replaced by random JSON values, keys renamed or dropped, anywhere in it."""
    document = copy.deepcopy(state)
    for _ in range(draw(st.integers(1, 3))):
        parent, key = None, None
        target = document
        while isinstance(target, (dict, list)) and target and (parent is None or draw(st.integers(0, 2)) > 0):
            key = draw(st.sampled_from(sorted(target))) if isinstance(target, dict) else \
                draw(st.integers(0, len(target) - 1))
            parent, target = target, target[key]
        if parent is None:
            document = draw(_json_values(printable_keys))
            continue
        how = draw(st.sampled_from(["value", "value", "rename", "drop"]))
        if how == "value":
            parent[key] = draw(_json_values(printable_keys) | st.sampled_from([float("nan"), float("inf"), -0.5, 1.5, 10**40, True])
                               | st.just(target).map(lambda old: -old if isinstance(old, (int, float)) else old))
        elif isinstance(parent, dict) and how == "rename":
            parent[draw(st.sampled_from(STATE_KEYS))] = parent.pop(key)
        elif isinstance(parent, dict):
            del parent[key]
        else:
            del parent[key]
    return document


@settings(READERS, max_examples=40)
@pytest.mark.parametrize("name", ["gap", "bandit", "progress", "target", "replay"])
@given(data=st.data())
def test_fuzz_readers__damaged_engineer_states_are_refused_in_one_line_or_resume_and_propose(name, data):
    """A decision record's ``details.state``, damaged: ``load_state`` refuses it in one line naming
    ``NAME state...``, or takes it; a taken state round-trips through ``state()`` as JSON and the engineer then
    proposes a valid config (a ConfigError from ``propose`` is one line too)."""
    from engineer import make_engineer
    from simulator.config import StageConfig

    case = _engineer_cases()[name]
    document = data.draw(damaged_states(case.state))
    engineer = make_engineer(name, **case.options)
    with bounded(SOLVING):
        try:
            engineer.load_state(document)
        except ConfigError as error:
            _refused(error, f"{name} state")
            event("state refused")
            return
    event("state taken")
    state = engineer.state()
    again = make_engineer(name, **case.options)
    again.load_state(json.loads(json.dumps(state, allow_nan=False)))
    assert again.state() == state
    if case.material is not None:
        engineer.load_material(case.material())
    with bounded(SOLVING):
        try:
            decision = engineer.propose(case.make_context(), case.config, seed=3)
        except ConfigError as error:
            _refused(error)
            event("propose refused")
            return
    event("propose decided" + (" a new config" if decision.config != case.config else ""))
    assert StageConfig.from_dict(decision.config.to_dict()) == decision.config
    json.dumps(decision.to_dict(), allow_nan=False)
    for item in decision.instances:
        _check_certified(item)


@pytest.mark.parametrize("name, document", [("gap", {"start": {"4\nWARNING: forged": {}}}),
                                            ("bandit", {"values": {"x\nWARNING: forged": 1}}),
                                            ("target", {"targets": {"4\u202e": 2.0}})])
def test_engineer_state__a_key_with_a_line_break_is_named_in_one_line(name, document):
    from engineer import make_engineer

    with pytest.raises(ConfigError) as error:
        make_engineer(name).load_state(document)
    _refused(error.value, f"{name} state")


@pytest.mark.parametrize("name", ["bandit", "progress"])
def test_engineer_state__an_integer_too_large_for_a_float_is_refused(name):
    from engineer import make_engineer

    with pytest.raises(ConfigError) as error:
        make_engineer(name).load_state(json.loads('{"values": {"3": 1' + "0" * 400 + "}}"))
    _refused(error.value, f"{name} state")


def test_fuzz_readers__a_state_the_engineer_wrote_resumes_as_written():
    """The undamaged documents the fuzz starts from are taken whole (else every damaged one would be refused for
    nothing)."""
    from engineer import make_engineer

    for name, case in _engineer_cases().items():
        engineer = make_engineer(name, **case.options)
        engineer.load_state(copy.deepcopy(case.state))
        assert json.loads(json.dumps(engineer.state())) == case.state, name


# --- instances a decision hands the next stage ---------------------------------------------------------------------
@READERS
@given(data=st.data())
def test_fuzz_readers__handed_instances_are_certified_or_refused_naming_the_entry(data):
    """A decision record's ``instances`` (``EngineerDecision.from_dict``, as ``read_decision`` reads it, then
    ``certify_handed`` before a stage trains on them), some entries damaged: a refusal is one line naming
    ``decision.json.instances[i]`` or ``decision.json: instances[i]`` for a damaged ``i``; what is taken is every
    entry, certified."""
    from curriculum.loop.sets import certify_handed
    from engineer.decision import EngineerDecision, make_decision
    from simulator.config import StageConfig
    from simulator.generator import LabelledInstance

    pool = _pool()
    spec = {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5}
    config = StageConfig.from_dict({"agents": [2, 3], "samples": 8, "seed": 11, "sizes": {3: spec, 4: spec}})
    chosen = data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=4))
    handed = [LabelledInstance.from_dict(pool[i]) for i in chosen]
    document = json.loads(json.dumps(make_decision("replay", config, config, "replay", instances=handed).to_dict()))
    damaged = set()
    for index in data.draw(st.lists(st.integers(0, len(chosen) - 1), max_size=2, unique=True)):
        raw: list[str] = []
        kinds = data.draw(st.lists(st.sampled_from(RECORD_DAMAGE), min_size=1, max_size=2))
        for kind in sorted(kinds, key=RECORD_DAMAGE.index):
            _damage_record(data.draw, document["instances"][index], kind, raw)
        if raw:  # the tokens only a file holds: the record reads as its JSON decoder gives them
            text = _record_text(document["instances"][index], raw)
            try:
                document["instances"][index] = json.loads(text)
            except (ValueError, RecursionError):
                document["instances"][index] = text
        damaged.add(index)
    where = "stage-02/decision.json"
    with bounded(SOLVING):
        try:
            items = EngineerDecision.from_dict(document, where).instances
            certify_handed(items, [config], where)
        except ConfigError as error:
            _refused(error, f"{where}.instances[", f"{where}: instances[")
            named = int(re.match(r"[^\[]*\[(\d+)\]", str(error)).group(1))
            assert named in damaged, (named, damaged, str(error)[:300])
            event("handed: refused")
            return
    event(f"handed: certified ({'damaged' if damaged else 'intact'})")
    assert len(items) == len(chosen)
    for index, item in enumerate(items):
        _check_instance_cells(item.instance)
        _check_certified(item)
        if index not in damaged:
            assert item.to_dict() == pool[chosen[index]]
        entry = document["instances"][index]  # read as written: no value taken for another
        assert item.to_dict() == {key: entry[key] for key in item.to_dict()}
