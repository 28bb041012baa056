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

import numpy as np

from simulator import constants as C
from simulator.types import Instance


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


def parse_instance(text: str) -> Instance:
    """Read back the text of :func:`render_instance` (whitespace-separated tokens, one map row per line).

    Tokens: ``.`` ice, ``H`` hole, ``A<k>`` agent k's start, ``G<k>`` agent k's goal. An agent without a ``G``
    token starts on its goal. Raises :class:`ConfigError` naming the line and token at fault.
    """
    from simulator.errors import ConfigError

    if not isinstance(text, str):
        raise ConfigError("instance text", type(text).__name__, "a str of map rows")
    rows = [line.split() for line in text.strip("\n").splitlines() if line.strip()]
    if not rows:
        raise ConfigError("instance text", text[:40], "at least one row of tokens")
    width = len(rows[0])
    starts: dict[int, tuple[int, int]] = {}
    goals: dict[int, tuple[int, int]] = {}
    grid = []
    for r, row in enumerate(rows):
        if len(row) != width:
            raise ConfigError(f"instance text line {r + 1}", " ".join(row), f"{width} tokens like the first row")
        tiles = []
        for c, token in enumerate(row):
            tiles.append(C.HOLE if token == C.SYMBOL_HOLE else C.ICE)
            if token in (C.SYMBOL_ICE, C.SYMBOL_HOLE):
                continue
            kind, number = token[:1], token[1:]
            # ASCII digits only: "²".isdigit() is true, but int("²") fails
            if kind not in (C.SYMBOL_AGENT, C.SYMBOL_GOAL) or not (number.isascii() and number.isdigit()):
                raise ConfigError(
                    f"instance text line {r + 1} token {c + 1}", token,
                    f"'{C.SYMBOL_ICE}', '{C.SYMBOL_HOLE}', '{C.SYMBOL_AGENT}<k>' or '{C.SYMBOL_GOAL}<k>'",
                )
            table = starts if kind == C.SYMBOL_AGENT else goals
            if int(number) in table:
                raise ConfigError(f"instance text line {r + 1} token {c + 1}", token, "each label once")
            table[int(number)] = (r, c)
        grid.append(tiles)
    n_agents = len(starts)
    if sorted(starts) != list(range(n_agents)):
        raise ConfigError("instance text agents", sorted(starts), f"agents numbered 0..{n_agents - 1}")
    extra = sorted(set(goals) - set(starts))
    if extra:
        raise ConfigError("instance text goals", f"G{extra[0]}", "a goal only for an agent on the map")
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
