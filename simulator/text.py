"""Instances and states as text: grid rows of fixed-width cell tokens, agents and goals labelled by index.

Symbols come from ``simulator.constants`` only. Example (2 agents, 4x4)::

    A0 .  H  .
    .  .  .  G1
    .  H  .  .
    G0 .  .  A1

``A<k>`` agent k, ``G<k>`` agent k's goal (hidden while an agent stands on it), ``X<k>`` agent k fallen into a
hole, ``.`` ice, ``H`` hole. Row 0 is the top row; "up" decreases the row.
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


def render_state(instance: Instance, pos: np.ndarray, status: np.ndarray | None = None) -> str:
    """The map with agents at ``pos`` ``(K, 2)``; fallen agents (``status == FALLEN``) drawn as ``X<k>``."""
    tokens = _grid_tokens(instance)
    for k in range(instance.n_agents):
        r, c = int(pos[k][0]), int(pos[k][1])
        fallen = status is not None and int(status[k]) == C.FALLEN
        tokens[r][c] = f"{C.SYMBOL_FALLEN if fallen else C.SYMBOL_AGENT}{k}"
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
