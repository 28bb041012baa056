"""MovingAI ``.map`` and ``.scen`` files: users' own maps and scenarios in, our instances out.

The formats are the MovingAI benchmark formats (https://movingai.com/benchmarks/formats.html), used by the MAPF
benchmark (https://movingai.com/benchmarks/mapf.html).

Map file (``.map``)::

    type octile
    height 4
    width 5
    map
    ..@..
    .TT..
    .....
    @@...

Header lines ``type octile``, ``height H`` and ``width W`` (each once, height and width in either order, both
1..``MAX_SIDE``), then the line ``map``, then exactly ``H`` rows of exactly ``W`` tiles; blank lines may follow.
Row 0 is the top row, as in our grids. Tiles and what they become here:

====  ====================================  ==========
tile  MovingAI meaning                      here
====  ====================================  ==========
``.`` passable terrain                      ice
``G`` passable terrain                      ice
``S`` swamp (passable from regular terrain) ice
``@`` out of bounds                         hole
``O`` out of bounds                         hole
``T`` trees (unpassable)                    hole
``W`` water (not passable from terrain)     hole
====  ====================================  ==========

Every impassable tile is a FrozenLake hole: an agent that steps on it falls in (in MovingAI it is blocked instead;
both kinds of plan avoid it). Water is a hole because no move from ice may enter it.

Scenario file (``.scen``): the line ``version 1`` (or ``version 1.0``), then one line per problem with 9 fields,
tab-separated (or, when a line has no tab, whitespace-separated)::

    bucket  map_file  width  height  start_x  start_y  goal_x  goal_y  optimal_length

``x`` is the column and ``y`` the row, (0, 0) the top-left corner. ``width`` and ``height`` must be the map's own
(MovingAI allows scaling a map to them; we refuse a mismatch). ``map_file`` is not opened: the map comes from the
caller. ``optimal_length`` is read (a finite number >= 0) and not trusted: MovingAI's is an octile length with
diagonal moves; ours are 4-connected, and the solver labels every instance anew.

Import (:func:`import_movingai`): an instance per ``K`` consecutive scenario lines (line ``i`` of a group is
agent ``i``), ``K`` = ``agents`` (default 2), as in the MAPF benchmark where the first ``K`` lines of a scenario
are a ``K``-agent problem; here the lines after them give the next instance. Each is certified and labelled by
the solver like the generator's instances (``simulator.generator.label_instance``); a group is skipped, and
counted in the :class:`ImportReport`, when two of its agents share a start or a goal, a start or goal lies on an
impassable tile, the solver proves it unsolvable, or the solver's node budget runs out. Lines left over after the
last whole group are counted too. The instance's ``index`` is its group number (0 for lines 1..K after the
version line), its ``seed`` 0, its ``size`` the longer side of the map.

Export (:func:`export_movingai`): a ``.map`` per distinct board (holes written as ``@``) and, per board and agent
count, a ``.scen`` with one line per agent, the instances in order (so importing it with that agent count gives
them back); ``bucket`` is the instance's number within the file and ``optimal_length`` the agent's shortest
distance on the bare map.

Malformed files raise :class:`ConfigError` naming the file, the line and what is allowed. Reads are bounded
(``MAX_MAP_BYTES``, ``MAX_SCEN_BYTES``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from simulator import constants as C
from simulator.documents import is_integer, is_python_int
from simulator.errors import ConfigError
from simulator.files import MAX_MAP_BYTES, MAX_SCEN_BYTES, bounded_int, read_text_bounded
from simulator.generator import DEFAULT_SOLVER_NODES, LabelledInstance, bare_distances, label_instance
from simulator.types import Instance

PASSABLE_TILES = ".GS"
IMPASSABLE_TILES = "@OTW"
TILE_CODES = {**{tile: C.ICE for tile in PASSABLE_TILES}, **{tile: C.HOLE for tile in IMPASSABLE_TILES}}
EXPORT_TILES = {C.ICE: ".", C.HOLE: "@"}
SCEN_VERSIONS = ("1", "1.0")
_ALLOWED_TILES = f"one of {' '.join(PASSABLE_TILES)} (passable: ice) or {' '.join(IMPASSABLE_TILES)} (impassable: hole)"


@dataclass(frozen=True)
class ScenarioLine:
    """One problem of a ``.scen`` file, coordinates turned to ours.

    Fields:
        line: its 1-based line number in the file.
        bucket: the file's bucket number.
        map_file: the map named by the line (not opened).
        width, height: the map size the line was made for.
        start, goal: ``(row, col)`` = ``(y, x)`` of the file.
        optimal_length: the file's optimal length (octile, not used).
    """

    line: int
    bucket: int
    map_file: str
    width: int
    height: int
    start: tuple[int, int]
    goal: tuple[int, int]
    optimal_length: float


@dataclass
class ImportReport:
    """What an import achieved.

    Fields:
        source: the scenario file.
        agents: agents per instance (scenario lines per group).
        scenario_lines: problem lines in the file.
        groups: whole groups looked at.
        imported: instances certified and labelled.
        skipped_shared: groups whose agents share a start or a goal.
        skipped_on_hole: groups with a start or goal on an impassable tile.
        skipped_unsolvable: groups the solver proved unsolvable.
        skipped_solver_limit: groups over the solver's node budget.
        leftover_lines: lines after the last whole group (fewer than ``agents``).
        skipped: ``(group, first line, reason)`` of every skipped group.
    """

    source: str
    agents: int
    scenario_lines: int = 0
    groups: int = 0
    imported: int = 0
    skipped_shared: int = 0
    skipped_on_hole: int = 0
    skipped_unsolvable: int = 0
    skipped_solver_limit: int = 0
    leftover_lines: int = 0
    skipped: list[tuple[int, int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "skipped"} | {
            "skipped": [list(entry) for entry in self.skipped]}

    def render(self) -> str:
        """One line: imported, then each reason for skipping with its count."""
        parts = [f"{self.skipped_shared} sharing a start or goal", f"{self.skipped_on_hole} on an impassable tile",
                 f"{self.skipped_unsolvable} unsolvable", f"{self.skipped_solver_limit} over the solver budget"]
        text = (f"{self.source}: imported {self.imported} of {self.groups} instances ({self.agents} agents = "
                f"{self.agents} scenario lines each); skipped " + ", ".join(parts))
        if self.leftover_lines:
            text += f"; {self.leftover_lines} line(s) after the last whole group left over"
        return text


@dataclass
class MovingAIImport:
    """The certified instances of a map and scenario, and the report."""

    grid: np.ndarray  # (H, W) int8
    items: list[LabelledInstance]
    report: ImportReport


# --------------------------------------------------------------------------------------------------- reading
def _lines(text: str) -> list[str]:
    # split on "\n" only (str.splitlines also splits on form feeds and such, which would shift line numbers); the
    # newline that ends the last line starts no line of its own
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _side(tokens: list[str], where: str, name: str) -> int:
    if len(tokens) != 2 or not (tokens[1].isascii() and tokens[1].isdigit()):
        raise ConfigError(where, " ".join(tokens), f"'{name} N' with N an integer 1..{C.MAX_SIDE}")
    value = bounded_int(tokens[1], where, f"a {name} of 1..{C.MAX_SIDE}")  # digits counted first: no ValueError
    if not 1 <= value <= C.MAX_SIDE:
        raise ConfigError(where, value, f"a {name} of 1..{C.MAX_SIDE} (the largest map side the simulator accepts)")
    return value


def parse_map(text: str, source: str = "<map>") -> np.ndarray:
    """The ``(H, W) int8`` grid of a ``.map`` text (see the module docstring); ``source`` names it in errors."""
    if not isinstance(text, str):
        raise ConfigError(source, type(text).__name__, "the text of a MovingAI .map file")
    lines = _lines(text)
    header: dict[str, int | str] = {}
    number = 0
    while True:
        if number == len(lines):
            missing = [name for name in ("type", "height", "width") if name not in header] + ["map"]
            raise ConfigError(f"{source} line {number}", "end of file",
                              f"a header of 'type octile', 'height H', 'width W', then 'map' (missing: "
                              f"{', '.join(missing)})")
        line = lines[number]
        number += 1
        where = f"{source} line {number}"
        tokens = line.split()
        if not tokens:
            continue
        key = tokens[0].lower()
        if key == "map" and len(tokens) == 1:
            missing = [name for name in ("type", "height", "width") if name not in header]
            if missing:
                raise ConfigError(where, line, f"'map' after the header lines 'type octile', 'height H' and "
                                  f"'width W' (missing: {', '.join(missing)})")
            break
        if key in header:
            raise ConfigError(where, line, f"each header line once ('{key}' was given before)")
        if key == "type":
            if len(tokens) != 2 or tokens[1] != "octile":
                raise ConfigError(where, line, "'type octile' (the one map type of the format)")
            header["type"] = "octile"
        elif key in ("height", "width"):
            header[key] = _side(tokens, where, key)
        else:
            raise ConfigError(where, line, "a header line: 'type octile', 'height H', 'width W' or 'map'")
    height, width = int(header["height"]), int(header["width"])
    grid = np.empty((height, width), np.int8)
    for row in range(height):
        where = f"{source} line {number + 1}"
        if number == len(lines):
            raise ConfigError(where, "end of file", f"{height} map rows (height {height}); the file has {row}")
        line = lines[number]
        number += 1
        if len(line) != width:
            raise ConfigError(where, line, f"a row of exactly {width} tiles (width {width}), {_ALLOWED_TILES}",
                              f"map row {row} has {len(line)}")
        for col, tile in enumerate(line):
            code = TILE_CODES.get(tile)
            if code is None:
                raise ConfigError(f"{where} column {col + 1}", tile, _ALLOWED_TILES)
            grid[row, col] = code
    for rest in range(number, len(lines)):
        if lines[rest].strip():
            raise ConfigError(f"{source} line {rest + 1}", lines[rest],
                              f"nothing after the {height} map rows (height {height}) but blank lines")
    return grid


def _integer(text: str, where: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(where, text, f"{name}: an integer >= 0")
    return bounded_int(text, where, f"{name}: an integer", 0)


def parse_scen(text: str, source: str = "<scen>") -> list[ScenarioLine]:
    """The problem lines of a ``.scen`` text (see the module docstring); ``source`` names it in errors."""
    if not isinstance(text, str):
        raise ConfigError(source, type(text).__name__, "the text of a MovingAI .scen file")
    lines = _lines(text)
    out: list[ScenarioLine] = []
    version_seen = False
    for number, line in enumerate(lines, start=1):
        where = f"{source} line {number}"
        stripped = line.strip()
        if not stripped:
            continue
        if not version_seen:
            tokens = stripped.split()
            if len(tokens) != 2 or tokens[0] != "version" or tokens[1] not in SCEN_VERSIONS:
                raise ConfigError(where, stripped, "'version 1' or 'version 1.0' as the first line")
            version_seen = True
            continue
        fields = [part.strip() for part in stripped.split("\t")] if "\t" in stripped else stripped.split()
        if len(fields) != 9:
            raise ConfigError(where, stripped, "9 tab-separated fields: bucket map_file width height start_x "
                              "start_y goal_x goal_y optimal_length", f"found {len(fields)}")
        bucket = _integer(fields[0], where, "bucket")
        width = _integer(fields[2], where, "width")
        height = _integer(fields[3], where, "height")
        names = ("start_x", "start_y", "goal_x", "goal_y")
        start_x, start_y, goal_x, goal_y = (_integer(value, where, name) for value, name in zip(fields[4:8], names))
        try:
            optimal_length = float(fields[8])
        except ValueError:
            optimal_length = math.nan
        if not (math.isfinite(optimal_length) and optimal_length >= 0):
            raise ConfigError(where, fields[8], "optimal_length: a finite number >= 0")
        out.append(ScenarioLine(number, bucket, fields[1], width, height, (start_y, start_x), (goal_y, goal_x),
                                optimal_length))
    if not version_seen:
        raise ConfigError(source, "empty", "a MovingAI .scen file: 'version 1' then one line per problem")
    return out


def read_map(path: str | os.PathLike[str]) -> np.ndarray:
    """The grid of a ``.map`` file (at most ``MAX_MAP_BYTES``)."""
    return parse_map(read_text_bounded(path, MAX_MAP_BYTES, "a MovingAI .map file"), os.fspath(path))


def read_scen(path: str | os.PathLike[str]) -> list[ScenarioLine]:
    """The problem lines of a ``.scen`` file (at most ``MAX_SCEN_BYTES``)."""
    return parse_scen(read_text_bounded(path, MAX_SCEN_BYTES, "a MovingAI .scen file"), os.fspath(path))


# ---------------------------------------------------------------------------------------------- to instances
def _check_agents(agents: object) -> int:
    if not is_integer(agents) or not 1 <= agents <= C.MAX_AGENTS:
        raise ConfigError("agents", agents, f"an integer 1..{C.MAX_AGENTS}: scenario lines per instance")
    return int(agents)


def _check_lines_fit(grid: np.ndarray, scenarios: Sequence[ScenarioLine], source: str) -> None:
    height, width = grid.shape
    for entry in scenarios:
        where = f"{source} line {entry.line}"
        if (entry.width, entry.height) != (width, height):
            raise ConfigError(where, f"width {entry.width} height {entry.height}",
                              f"the map's own size, width {width} height {height} (maps are not scaled)")
        for name, (row, col) in (("start", entry.start), ("goal", entry.goal)):
            if not (0 <= col < width and 0 <= row < height):
                raise ConfigError(where, f"{name}_x {col} {name}_y {row}",
                                  f"0 <= {name}_x < {width} and 0 <= {name}_y < {height}")


def instances_from_scenarios(
    grid: np.ndarray,
    scenarios: Sequence[ScenarioLine],
    agents: int = 2,
    *,
    source: str = "<scen>",
    first_group: int = 0,
    max_groups: int | None = None,
    solver_nodes: int = DEFAULT_SOLVER_NODES,
    progress: Callable[[int], None] | None = None,
) -> MovingAIImport:
    """Certified, labelled instances from scenario lines on ``grid`` (see the module docstring).

    Args:
        grid: ``(H, W) int8`` the map, as :func:`parse_map` gives it.
        scenarios: the scenario's lines, in file order; every one is checked against the map (size and
            coordinates) before any group is solved.
        agents: scenario lines per instance, 1..``MAX_AGENTS``.
        source: the scenario file, for errors and the report.
        first_group, max_groups: look at groups ``first_group ..`` only, at most ``max_groups`` of them (one
            instance of a long scenario without solving the others).
        solver_nodes: the solver's node budget per instance.
        progress: called with the number of groups looked at so far.
    """
    agents = _check_agents(agents)
    grid = np.array(grid, np.int8)  # a copy: the instances share it read-only, the caller keeps its own
    if grid.ndim != 2 or not np.isin(grid, (C.ICE, C.HOLE)).all():
        raise ConfigError("grid", grid.shape, f"an (H, W) grid of {C.ICE} (ice) and {C.HOLE} (hole), as parse_map "
                          "gives it")
    _check_lines_fit(grid, scenarios, source)
    total = len(scenarios) // agents
    if not is_python_int(first_group) or first_group < 0:
        raise ConfigError("first_group", first_group, "an integer >= 0")
    stop = total if max_groups is None else min(total, first_group + max_groups)
    report = ImportReport(source, agents, scenario_lines=len(scenarios), leftover_lines=len(scenarios) % agents)
    items: list[LabelledInstance] = []
    for group in range(first_group, stop):
        lines = scenarios[group * agents:(group + 1) * agents]
        report.groups += 1
        reason, kind = _group_problem(grid, lines)
        if reason is None:
            instance = Instance(grid=grid, starts=[entry.start for entry in lines],
                                goals=[entry.goal for entry in lines])
            labelled, status, why = label_instance(instance, seed=0, index=group, solver_nodes=solver_nodes)
            if labelled is not None:
                items.append(labelled)
                report.imported += 1
            else:
                kind = "skipped_unsolvable" if status == "unsolvable" else "skipped_solver_limit"
                reason = f"{status}: {why}"
        if reason is not None:
            setattr(report, kind, getattr(report, kind) + 1)
            report.skipped.append((group, lines[0].line, reason))
        if progress is not None:
            progress(report.groups)
    return MovingAIImport(grid, items, report)


def _group_problem(grid: np.ndarray, lines: Sequence[ScenarioLine]) -> tuple[str | None, str]:
    """Why a group of lines is no instance (and its report counter), or ``(None, "")``."""
    for k, entry in enumerate(lines):
        for name, (row, col) in (("start", entry.start), ("goal", entry.goal)):
            if grid[row, col] != C.ICE:
                return (f"agent {k}'s {name} (x {col}, y {row}, line {entry.line}) is on an impassable tile",
                        "skipped_on_hole")
    for name in ("start", "goal"):
        seen: dict[tuple[int, int], int] = {}
        for k, entry in enumerate(lines):
            cell = getattr(entry, name)
            if cell in seen:
                return (f"agents {seen[cell]} and {k} share the {name} x {cell[1]}, y {cell[0]} (lines "
                        f"{lines[seen[cell]].line} and {entry.line})", "skipped_shared")
            seen[cell] = k
    return None, ""


def import_movingai(
    map_path: str | os.PathLike[str],
    scen_path: str | os.PathLike[str],
    agents: int = 2,
    *,
    first_group: int = 0,
    max_groups: int | None = None,
    solver_nodes: int = DEFAULT_SOLVER_NODES,
    progress: Callable[[int], None] | None = None,
) -> MovingAIImport:
    """Read a ``.map`` and a ``.scen`` file and certify an instance per ``agents`` scenario lines (see
    :func:`instances_from_scenarios` for the arguments)."""
    agents = _check_agents(agents)
    grid = read_map(map_path)
    scenarios = read_scen(scen_path)
    return instances_from_scenarios(grid, scenarios, agents, source=os.fspath(scen_path), first_group=first_group,
                                    max_groups=max_groups, solver_nodes=solver_nodes, progress=progress)


def import_one(
    map_path: str | os.PathLike[str],
    scen_path: str | os.PathLike[str],
    agents: int = 2,
    group: int = 0,
    *,
    solver_nodes: int = DEFAULT_SOLVER_NODES,
    field_name: str = "group",
) -> LabelledInstance:
    """The instance of group ``group`` (the scenario's lines ``group * agents`` .. ``group * agents + agents - 1``,
    counted from 0), solving no other group; a group out of range, or one that is skipped, raises
    :class:`ConfigError` saying why, with ``field_name`` as its field (a command line names its flag)."""
    agents = _check_agents(agents)
    grid = read_map(map_path)
    scenarios = read_scen(scen_path)
    total = len(scenarios) // agents
    if not is_python_int(group) or not 0 <= group < total:
        raise ConfigError(field_name, group, f"0..{total - 1}: {os.fspath(scen_path)} has {len(scenarios)} scenario "
                          f"lines, {total} instances of {agents} agents")
    result = instances_from_scenarios(grid, scenarios, agents, source=os.fspath(scen_path), first_group=group,
                                      max_groups=1, solver_nodes=solver_nodes)
    if not result.items:
        _, line, reason = result.report.skipped[0]
        raise ConfigError(field_name, group, f"a group of {agents} scenario lines that is an instance",
                          f"the {agents} lines from line {line} of {os.fspath(scen_path)}: {reason}")
    return result.items[0]


# --------------------------------------------------------------------------------------------------- writing
def format_map(grid: np.ndarray) -> str:
    """The ``.map`` text of a grid: ice as ``.``, holes as ``@``."""
    grid = np.asarray(grid)
    height, width = grid.shape
    rows = ["".join(EXPORT_TILES[int(tile)] for tile in row) for row in grid]
    return f"type octile\nheight {height}\nwidth {width}\nmap\n" + "".join(row + "\n" for row in rows)


def format_scen(instances: Sequence[Instance], map_file: str) -> str:
    """The ``.scen`` text of instances on one board: one line per agent, instance after instance; ``bucket`` is
    the instance's number in the file, ``optimal_length`` the agent's shortest distance on the bare map."""
    lines = ["version 1"]
    if not instances:
        raise ConfigError("instances", [], "at least one instance")
    board = instances[0].grid
    for number, instance in enumerate(instances):
        if not np.array_equal(instance.grid, board):
            raise ConfigError(f"instances[{number}].grid", f"{instance.height}x{instance.width}",
                              "the board of instances[0]: a scenario file refers to one map")
        distances = bare_distances(instance)
        for k, ((row, col), (goal_row, goal_col)) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist())):
            if distances[k] < 0:
                raise ConfigError(f"instances[{number}].goals[{k}]", (goal_row, goal_col),
                                  "a goal the agent can reach on the bare map (the file records its distance)")
            lines.append(f"{number}\t{map_file}\t{instance.width}\t{instance.height}\t{col}\t{row}\t{goal_col}\t"
                         f"{goal_row}\t{int(distances[k])}")
    return "\n".join(lines) + "\n"


def check_movingai_target(out_dir: str | os.PathLike[str], stem: str, force: bool = False) -> list[Path]:
    """The files of an earlier export named ``STEM-*.map`` / ``STEM-*.scen`` in ``out_dir``; ConfigError when there
    are any and ``force`` is off (an export never leaves a mix of two exports), or when ``out_dir`` is a file."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError("--movingai", str(out), "a folder (a file is there)")
    if not out.is_dir():
        return []
    earlier = sorted(path for pattern in (f"{stem}-*.map", f"{stem}-*.scen") for path in out.glob(pattern))
    if earlier and not force:
        raise ConfigError("--movingai", str(out), f"a folder without an earlier export named {stem}-* (pick another "
                          "folder, or pass --force to replace it)", f"{len(earlier)} such files are there, e.g. "
                          f"{earlier[0].name}")
    return earlier


def export_movingai(items: Iterable[Instance | LabelledInstance], out_dir: str | os.PathLike[str],
                    stem: str = "instances", force: bool = False) -> list[Path]:
    """Write ``STEM-BBBB.map`` per distinct board (``BBBB`` numbers the boards in order of first appearance) and
    ``STEM-BBBB-aK.scen`` per board and agent count ``K`` into ``out_dir``; returns the paths written, maps first.
    Importing ``STEM-BBBB-aK.scen`` with ``agents=K`` gives back those instances in order.

    A new folder is built under a temporary name and renamed into place whole. An earlier export of the same
    ``stem`` in the folder is refused (:func:`check_movingai_target`) unless ``force``: then each file is replaced
    atomically and the earlier export's files this one does not write are removed, so the folder never holds a
    mix of two exports. Other files in the folder are left alone."""
    from simulator.atomic import atomic_folder, atomic_write

    if not stem or os.sep in stem or (os.altsep and os.altsep in stem):
        raise ConfigError("stem", stem, "a non-empty file name stem without path separators")
    boards: dict[bytes, list[Instance]] = {}
    for number, item in enumerate(items):
        instance = item.instance if isinstance(item, LabelledInstance) else item
        if not isinstance(instance, Instance):
            raise ConfigError(f"items[{number}]", type(item).__name__, "an Instance or a LabelledInstance")
        key = np.asarray(instance.grid.shape, np.int64).tobytes() + instance.grid.tobytes()
        boards.setdefault(key, []).append(instance)
    files: dict[str, str] = {}
    scen_names = []
    for number, instances in enumerate(boards.values()):
        map_name = f"{stem}-{number:04d}.map"
        files[map_name] = format_map(instances[0].grid)
        for count in sorted({instance.n_agents for instance in instances}):
            scen_name = f"{stem}-{number:04d}-a{count}.scen"
            files[scen_name] = format_scen([i for i in instances if i.n_agents == count], map_name)
            scen_names.append(scen_name)
    out = Path(out_dir)
    earlier = check_movingai_target(out, stem, force)
    if not out.exists():
        with atomic_folder(out) as building:
            for name, text in files.items():
                (building / name).write_text(text, encoding="utf-8")
    else:
        for name, text in files.items():
            atomic_write(out / name, text)
        for stale in earlier:
            if stale.name not in files:
                stale.unlink()
    names = [name for name in files if name.endswith(".map")] + scen_names
    return [out / name for name in names]
