"""Instances and states as text: grid rows of fixed-width cell tokens, agents and goals labelled by index.

Symbols come from ``simulator.constants`` only. Example (2 agents, 4x4)::

    A0 .  H  .
    .  .  .  G1
    .  H  .  .
    G0 .  .  A1

``A<k>`` agent k, ``G<k>`` agent k's goal (hidden while an agent stands on it), ``X<k>`` agent k fallen into a
hole, ``!<k>`` agent k marked (where a failure happened), ``.`` ice, ``H`` hole. Row 0 is the top row; "up" decreases the row.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from simulator import constants as C
from simulator.files import bounded_int
from simulator.types import Instance


def counted(count: int, noun: str) -> str:
    """``count`` with ``noun`` in the number it takes: ``1 step``, ``0 steps``, ``3 steps`` (nouns that add -s)."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _is_number(value: object) -> TypeGuard[numbers.Real]:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)  # numpy's scalars too


def percent(share: object, digits: int = 1, missing: str = "n/a") -> str:
    """A share (0..1) as a person reads it: ``percent(0.7416666666666667)`` is ``74.2%``; ``missing`` when ``share``
    is not a number (``None``: not measured)."""
    return f"{100 * float(share):.{digits}f}%" if _is_number(share) else missing


def figure(value: object, digits: int = 2, missing: str = "n/a") -> str:
    """A number as a person reads it, to ``digits`` decimals: ``figure(0.123456)`` is ``0.12``; ``missing`` when
    ``value`` is not a number."""
    return f"{float(value):.{digits}f}" if _is_number(value) else missing


def printable(text: object) -> str:
    """``text`` with every control or other non-printable character written as an escape (``\\n``, ``\\x1b``): a
    string read from a file (a manifest's version) can then never start a line of its own or move the cursor
    when printed."""
    shown = str(text)
    if shown.isprintable():
        return shown
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in shown)


def _grid_tokens(instance: Instance) -> list[list[str]]:
    tokens = [[C.TILE_SYMBOLS[int(tile)] for tile in row] for row in instance.grid]
    for k, (r, c) in enumerate(instance.goals):
        tokens[r][c] = f"{C.SYMBOL_GOAL}{k}"
    return tokens


def _join(tokens: list[list[str]]) -> str:
    width = max(len(token) for row in tokens for token in row)
    return "\n".join(" ".join(token.ljust(width) for token in row).rstrip() for row in tokens)


def render_state(
    instance: Instance, pos: np.ndarray, status: np.ndarray | None = None, marked: tuple[int, ...] = ()
) -> str:
    """The map with agents at ``pos`` ``(K, 2)``; fallen agents (``status == FALLEN``) drawn as ``X<k>``.

    Agents in ``marked`` (e.g. the two agents of a conflict) are drawn as ``!<k>``: a cell two of them share
    shows the lowest index.
    """
    tokens = _grid_tokens(instance)
    for k in sorted(range(instance.n_agents), key=lambda k: (k in marked, -k)):
        r, c = int(pos[k][0]), int(pos[k][1])
        fallen = status is not None and int(status[k]) == C.FALLEN
        symbol = C.SYMBOL_MARKED if k in marked else (C.SYMBOL_FALLEN if fallen else C.SYMBOL_AGENT)
        tokens[r][c] = f"{symbol}{k}"
    return _join(tokens)


def render_instance(instance: Instance) -> str:
    """The map with every agent on its start and every goal marked."""
    return render_state(instance, instance.starts)


def legend() -> str:
    return (
        f"{C.SYMBOL_ICE} ice, {C.SYMBOL_HOLE} hole, {C.SYMBOL_AGENT}k agent k, {C.SYMBOL_GOAL}k goal of agent k, "
        f"{C.SYMBOL_FALLEN}k agent k fallen in a hole; row 0 is the top"
    )


def describe_agents(instance: Instance) -> str:
    """One line per agent: ``agent 0: start (0,0) -> goal (3,0)``."""
    return "\n".join(
        f"agent {k}: start ({s[0]},{s[1]}) -> goal ({g[0]},{g[1]})"
        for k, (s, g) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist()))
    )


PLAN_HEADING = "optimal plan:"
_PLAN_LINE = re.compile(r"agent \d+:( .*)?")  # format_plan's lines, after PLAN_HEADING
_AGENT_LINE = re.compile(r"agent (\d+): start \((\d+),(\d+)\) -> goal \((\d+),(\d+)\)")  # describe_agents
_AGENT_FIELDS = ("an agent number", "a start row", "a start column", "a goal row", "a goal column")
_AGENT_HIGHS = (C.MAX_AGENTS - 1,) + (C.MAX_SIDE - 1,) * 4
_REPORT_LINE = re.compile(r"size \d+: \d+ instances?\b.*|checksum [0-9a-f]+\b.*")  # gen's closing report (1 instance)


@dataclass
class _MapBlock:
    """One instance's lines: map rows, then optionally one ``describe_agents`` line per agent."""

    rows: list[tuple[int, list[str]]] = field(default_factory=list)  # (line number, tokens)
    # agent k -> (line number, start, goal)
    agents: dict[int, tuple[int, tuple[int, int], tuple[int, int]]] = field(default_factory=dict)


def parse_instances(text: str) -> list[Instance]:
    """Every instance in map text, as ``mapf-lake gen`` prints it or as :func:`render_instance` writes it.

    Read: map rows of whitespace-separated tokens (``.`` ice, ``H`` hole, ``A<k>`` agent k's start, ``G<k>``
    agent k's goal), then optionally one :func:`describe_agents` line per agent (``agent 0: start (1,2) -> goal
    (1,0)``), which gives the goals the map hides (a goal under another agent's start); without them an agent
    with no ``G`` token starts on its goal. Skipped: blank lines, ``#`` comment lines (gen's header line before
    each instance, which also ends the map above it), an ``optimal plan:`` line and the ``agent k: ...`` lines
    under it, and gen's closing report (``size N: M instances, ...``, ``checksum ...``). Raises
    :class:`ConfigError` naming the line (counted in ``text``) and token at fault.
    """
    from simulator.errors import ConfigError

    if not isinstance(text, str):
        raise ConfigError("instance text", type(text).__name__, "a str of map rows")
    blocks: list[_MapBlock] = []
    block = _MapBlock()
    in_plan = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if in_plan and _PLAN_LINE.fullmatch(stripped):
            continue
        in_plan = stripped == PLAN_HEADING
        if stripped.startswith("#") or in_plan or _REPORT_LINE.fullmatch(stripped):
            if block.rows:
                blocks.append(block)
                block = _MapBlock()
            continue
        agent = _AGENT_LINE.fullmatch(stripped)
        if agent:
            # digits counted before converting (thousands of them would raise ValueError)
            k, *cells = (bounded_int(value, f"instance text line {number}", name, 0, high)
                         for value, name, high in zip(agent.groups(), _AGENT_FIELDS, _AGENT_HIGHS))
            if not block.rows or k in block.agents:
                raise ConfigError(f"instance text line {number}", stripped,
                                  "one 'agent k: start (r,c) -> goal (r,c)' line per agent, after its map's rows")
            block.agents[k] = (number, (cells[0], cells[1]), (cells[2], cells[3]))
            continue
        if block.agents:
            raise ConfigError(f"instance text line {number}", stripped,
                              "map rows before the agent lines (a '#' line starts the next map)")
        block.rows.append((number, stripped.split()))
    if block.rows:
        blocks.append(block)
    if not blocks:
        raise ConfigError("instance text", text[:40], "at least one row of tokens (map text as gen prints it)")
    return [_instance_from_block(block) for block in blocks]


def parse_instance(text: str) -> Instance:
    """The one instance in map text (see :func:`parse_instances`): the text of :func:`render_instance` (and
    :func:`describe_agents`), or what ``mapf-lake gen --n 1`` prints. Raises :class:`ConfigError` naming the line
    and token at fault, or the number of instances when there is more than one.
    """
    from simulator.errors import ConfigError

    instances = parse_instances(text)
    if len(instances) != 1:
        raise ConfigError("instance text", f"{len(instances)} instances", "one instance (gen --n 1 prints one)")
    return instances[0]


def _instance_from_block(block: _MapBlock) -> Instance:
    from simulator.errors import ConfigError

    rows = block.rows
    width = len(rows[0][1])
    starts: dict[int, tuple[int, int]] = {}
    goals: dict[int, tuple[int, int]] = {}
    grid = []
    for r, (number, row) in enumerate(rows):
        if len(row) != width:
            raise ConfigError(f"instance text line {number}", " ".join(row), f"{width} tokens like the first row")
        tiles = []
        for c, token in enumerate(row):
            tiles.append(C.HOLE if token == C.SYMBOL_HOLE else C.ICE)
            if token in (C.SYMBOL_ICE, C.SYMBOL_HOLE):
                continue
            kind, label = token[:1], token[1:]
            # ASCII digits only: "²".isdigit() is true, but int("²") fails
            if kind not in (C.SYMBOL_AGENT, C.SYMBOL_GOAL) or not (label.isascii() and label.isdigit()):
                raise ConfigError(
                    f"instance text line {number} token {c + 1}", token,
                    f"'{C.SYMBOL_ICE}', '{C.SYMBOL_HOLE}', '{C.SYMBOL_AGENT}<k>' or '{C.SYMBOL_GOAL}<k>'",
                )
            table = starts if kind == C.SYMBOL_AGENT else goals
            k = bounded_int(label, f"instance text line {number} token {c + 1}", "an agent number", 0,
                            C.MAX_AGENTS - 1)  # digits counted before converting: no ValueError
            if k in table:
                raise ConfigError(f"instance text line {number} token {c + 1}", token, "each label once")
            table[k] = (r, c)
        grid.append(tiles)
    n_agents = len(starts)
    if sorted(starts) != list(range(n_agents)):
        raise ConfigError("instance text agents", sorted(starts), f"agents numbered 0..{n_agents - 1}")
    extra = sorted(set(goals) - set(starts))
    if extra:
        raise ConfigError("instance text goals", f"G{extra[0]}", "a goal only for an agent on the map")
    for k, (number, start, goal) in sorted(block.agents.items()):
        line = f"agent {k}: start ({start[0]},{start[1]}) -> goal ({goal[0]},{goal[1]})"
        if k not in starts or start != starts[k]:
            where = f"A{k} at ({starts[k][0]},{starts[k][1]})" if k in starts else f"no A{k} on the map"
            raise ConfigError(f"instance text line {number}", line, f"the start the map shows ({where})")
        if k in goals and goal != goals[k]:
            raise ConfigError(f"instance text line {number}", line,
                              f"the goal the map shows (G{k} at ({goals[k][0]},{goals[k][1]}))")
        goals[k] = goal
    if block.agents and sorted(block.agents) != list(range(n_agents)):
        missing = min(set(range(n_agents)) - set(block.agents))
        raise ConfigError("instance text agent lines", sorted(block.agents),
                          f"a line for every agent on the map, or none (agent {missing} has none)")
    return Instance(
        grid=grid,
        starts=[starts[k] for k in range(n_agents)],
        goals=[goals.get(k, starts[k]) for k in range(n_agents)],
    )


def format_plan(sequences: list[list[int]]) -> str:
    """One line per agent: ``agent 0: R R D``; an empty sequence prints as ``(stays)``."""
    return "\n".join(
        f"agent {k}: " + (" ".join(C.ACTION_LETTERS[a] for a in seq) if seq else "(stays)")
        for k, seq in enumerate(sequences)
    )
