"""POGEMA ``GridConfig`` documents in and out: a board with the agents' starts and targets, without importing
pogema (https://github.com/AIRI-Institute/pogema, ``pogema/grid_config.py``).

Document (a mapping, or the same as JSON or YAML)::

    map: |            # one string, rows separated by newlines; or a list of row strings;
      ..#.            # or a list of rows of 0 (free) and 1 (obstacle), POGEMA's parsed form
      ....
      #...
    agents_xy: [[0, 0], [2, 3]]     # one [row, col] per agent: POGEMA's "xy" is (row, col), row 0 on top
    targets_xy: [[2, 1], [0, 3]]    # agent k's target, [row, col]
    num_agents: 2                   # optional; when given, the number of agents_xy

Tiles: ``.`` free is ice, ``#`` obstacle is a hole (an agent that steps on it falls in; in POGEMA it is blocked).
In a map string, blank lines before the first row and after the last are dropped and each row is stripped of
surrounding blanks (YAML block strings and indented Python strings carry them); rows must then be of one length.

POGEMA's other ``GridConfig`` fields set up its episodes, not the board, the starts or the targets; they are
accepted and not used: ``IGNORED_KEYS``. Any other key is refused (``possible_agents_xy`` and
``possible_targets_xy`` among them: they describe a distribution of starts, not one instance).

Export (:func:`to_grid_config`): ``map`` as one string (the form POGEMA parses itself), ``agents_xy``,
``targets_xy`` and ``num_agents``. Errors are :class:`ConfigError` naming the document, the field and what is
allowed; file reads are bounded (``MAX_GRID_CONFIG_BYTES``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from simulator import constants as C
from simulator.documents import is_python_int
from simulator.errors import ConfigError
from simulator.files import MAX_CONFIG_BYTES, load_json, read_text_bounded
from simulator.text import counted
from simulator.types import Instance

FREE, OBSTACLE = ".", "#"
TILE_CODES = {FREE: C.ICE, OBSTACLE: C.HOLE}
EXPORT_TILES = {C.ICE: FREE, C.HOLE: OBSTACLE}
REQUIRED_KEYS = ("map", "agents_xy", "targets_xy")
IGNORED_KEYS = ("num_agents", "seed", "size", "density", "obs_radius", "max_episode_steps", "collision_system",
                "on_target", "integration", "observation_type", "persistent", "auto_reset", "map_name")
MAX_GRID_CONFIG_BYTES = MAX_CONFIG_BYTES


def _rows(value: Any, where: str) -> list[list[int]]:
    """The map as rows of tile codes."""
    if isinstance(value, str):
        lines = value.split("\n")
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        value = [line.strip() for line in lines]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{where}.map", value, "a string of rows of '.' (free) and '#' (obstacle), or a "
                          "non-empty list of such row strings or of rows of 0 (free) and 1 (obstacle)")
    if len(value) > C.MAX_SIDE:
        raise ConfigError(f"{where}.map", f"{len(value)} rows", f"at most {C.MAX_SIDE} rows")
    rows: list[list[int]] = []
    for r, row in enumerate(value):
        if isinstance(row, str):
            tiles = []
            for c, tile in enumerate(row):
                if tile not in TILE_CODES:
                    raise ConfigError(f"{where}.map row {r} column {c}", tile, "'.' (free) or '#' (obstacle)")
                tiles.append(TILE_CODES[tile])
        elif isinstance(row, (list, tuple)):
            bad = [tile for tile in row if not is_python_int(tile) or tile not in (0, 1)]
            if bad:
                raise ConfigError(f"{where}.map row {r}", bad[0], "0 (free) or 1 (obstacle)")
            tiles = [C.HOLE if tile == 1 else C.ICE for tile in row]
        else:
            raise ConfigError(f"{where}.map row {r}", row, "a string of '.' and '#', or a list of 0 and 1")
        if not 1 <= len(tiles) <= C.MAX_SIDE:
            raise ConfigError(f"{where}.map row {r}", f"{len(tiles)} tiles", f"1..{C.MAX_SIDE} tiles")
        if rows and len(tiles) != len(rows[0]):
            raise ConfigError(f"{where}.map row {r}", f"{len(tiles)} tiles", f"{len(rows[0])} tiles like row 0")
        rows.append(tiles)
    return rows


def _points(value: Any, name: str, where: str, rows: list[list[int]]) -> list[tuple[int, int]]:
    height, width = len(rows), len(rows[0])
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= C.MAX_AGENTS:
        raise ConfigError(f"{where}.{name}", value, f"a list of 1..{C.MAX_AGENTS} [row, col] pairs")
    points: list[tuple[int, int]] = []
    for k, point in enumerate(value):
        field_name = f"{where}.{name}[{k}]"
        if (not isinstance(point, (list, tuple)) or len(point) != 2
                or any(not is_python_int(v) for v in point)):
            raise ConfigError(field_name, point, "[row, col]: two integers")
        row, col = point
        if not (0 <= row < height and 0 <= col < width):
            raise ConfigError(field_name, list(point), f"0 <= row < {height} and 0 <= col < {width}")
        if rows[row][col] != C.ICE:
            raise ConfigError(field_name, list(point), "a free cell ('.'), not an obstacle")
        if (row, col) in points:
            raise ConfigError(field_name, list(point), f"a cell no other agent has in {name} ({name}"
                              f"[{points.index((row, col))}] has it)")
        points.append((row, col))
    return points


def from_grid_config(data: Any, source: str = "grid config") -> Instance:
    """The instance a ``GridConfig`` document describes (see the module docstring)."""
    if not isinstance(data, Mapping):
        raise ConfigError(source, type(data).__name__, "a mapping with map, agents_xy and targets_xy")
    for key in data:
        if key not in REQUIRED_KEYS and key not in IGNORED_KEYS:
            raise ConfigError(f"{source}.{key}", data[key], f"a GridConfig key this importer knows: "
                              f"{', '.join(REQUIRED_KEYS)}, or one of the episode settings it ignores "
                              f"({', '.join(IGNORED_KEYS)})")
    for key in REQUIRED_KEYS:
        if data.get(key) is None:
            raise ConfigError(f"{source}.{key}", None, "present: an instance needs the map, agents_xy and "
                              "targets_xy")
    rows = _rows(data["map"], source)
    starts = _points(data["agents_xy"], "agents_xy", source, rows)
    goals = _points(data["targets_xy"], "targets_xy", source, rows)
    if len(goals) != len(starts):
        raise ConfigError(f"{source}.targets_xy", f"{len(goals)} targets", f"one per agent ({counted(len(starts), 'agent')})")
    count = data.get("num_agents")
    if count is not None and (isinstance(count, bool) or count != len(starts)):
        raise ConfigError(f"{source}.num_agents", count, f"the number of agents_xy ({len(starts)}), or absent")
    return Instance(grid=rows, starts=starts, goals=goals)


def to_grid_config(instance: Instance) -> dict[str, Any]:
    """The ``GridConfig`` document of an instance: ``map`` as one string, ``agents_xy``, ``targets_xy``,
    ``num_agents``."""
    if not isinstance(instance, Instance):
        raise ConfigError("instance", type(instance).__name__, "a simulator.types.Instance")
    rows = ["".join(EXPORT_TILES[int(tile)] for tile in row) for row in instance.grid]
    return {"map": "\n".join(rows), "agents_xy": instance.starts.tolist(), "targets_xy": instance.goals.tolist(),
            "num_agents": instance.n_agents}


def _format(path: Path) -> str:
    from simulator.config import format_for_path

    return format_for_path(path, "a grid config file ending in .json, .yaml or .yml")


def read_grid_config(path: str | os.PathLike[str]) -> Instance:
    """The instance of a ``GridConfig`` file: JSON for ``.json``, YAML for ``.yaml``/``.yml``."""
    from simulator.config import load_yaml

    path = Path(path)
    format = _format(path)
    text = read_text_bounded(path, MAX_GRID_CONFIG_BYTES, "a POGEMA grid config file")
    if format == "json":
        return from_grid_config(load_json(text, str(path), "a POGEMA grid config", object_only=True), str(path))
    try:
        data = load_yaml(text)
    except (yaml.YAMLError, ValueError, RecursionError) as error:
        reason = " ".join(str(error).replace('"<unicode string>"', str(path)).split())
        raise ConfigError(str(path), text[:40], f"valid {format.upper()}", reason) from None
    return from_grid_config(data, str(path))


def grid_config_text(instance: Instance, format: str = "json") -> str:
    """The document of :func:`to_grid_config` as JSON (indented) or YAML (the map as a block string)."""
    document = to_grid_config(instance)
    if format == "json":
        return json.dumps(document, indent=2) + "\n"
    if format != "yaml":
        raise ConfigError("format", format, "'json' or 'yaml'")
    rows = document["map"].split("\n")
    flow = {key: value for key, value in document.items() if key != "map"}
    return "map: |\n" + "".join(f"  {row}\n" for row in rows) + yaml.safe_dump(flow, default_flow_style=None,
                                                                               sort_keys=False)


def write_grid_config(instance: Instance, path: str | os.PathLike[str]) -> None:
    """Write the instance's ``GridConfig`` document to ``path`` (format from the suffix), atomically."""
    from simulator.atomic import atomic_write

    atomic_write(path, grid_config_text(instance, _format(Path(path))))
