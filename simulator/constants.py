"""Tile, action, status, event and failure codes: the one place that names them (events and failures come
from the failure table, ``simulator.failures``).

Every other module (kernels, reference rules, text rendering, prompts, replays, viewers) imports these names;
nobody writes a bare ``3`` for "left".
"""

from __future__ import annotations

import numpy as np

# The failure table and what is derived from it, re-exported (``name as name`` marks an explicit re-export, for
# mypy and ruff): ``C.KINDS``, ``C.EV_FAILURE_MASK``, ...
from simulator.failures import EV_ALL as EV_ALL
from simulator.failures import EV_FAILURE_MASK as EV_FAILURE_MASK
from simulator.failures import FAILURES as FAILURES
from simulator.failures import KIND_BY_NAME as KIND_BY_NAME
from simulator.failures import KINDS as KINDS
from simulator.failures import LEGEND as LEGEND
from simulator.failures import STEP_FAILURES as STEP_FAILURES

# --- tiles -----------------------------------------------------------------------------------------------
ICE = 0  # frozen ice: walkable
HOLE = 1  # an agent that steps here falls in and fails
OFF_GRID = 2  # padding outside a smaller map inside a batch: stepping here is an illegal move
TILE_NAMES = ("ice", "hole", "off_grid")

# --- actions ---------------------------------------------------------------------------------------------
WAIT = 0
UP = 1
DOWN = 2
LEFT = 3
RIGHT = 4
N_ACTIONS = 5
ACTION_NAMES = ("wait", "up", "down", "left", "right")
ACTION_LETTERS = ("W", "U", "D", "L", "R")
# (row, col) displacement of each action; row grows downwards, as in the rendered text.
ACTION_DELTAS = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int32)  # (N_ACTIONS, 2)
# Under slippery ice a move slips to one of its two perpendicular directions (FrozenLake's rule).
SLIP_SIDEWAYS = np.array(
    [[WAIT, WAIT], [LEFT, RIGHT], [RIGHT, LEFT], [DOWN, UP], [UP, DOWN]], dtype=np.int8
)  # (N_ACTIONS, 2)

# --- agent status ----------------------------------------------------------------------------------------
MOVING = 0  # still on its way
ON_GOAL = 1  # reached its goal; stays there and ignores further actions
FALLEN = 2  # fell into a hole; leaves the board
ABSENT = 3  # padding slot in a batch whose instances have fewer agents
STATUS_NAMES = ("moving", "on_goal", "fallen", "absent")

# --- per-agent event flags of one step (bit set) and failure categories of a judged plan ----------------
# Both come from the failure table (``simulator.failures.KINDS``): the names below are its rows' bits and codes.
# Within one step, when several failures happen at once, the category reported is the first in the table's
# priority order (illegal move, hole, vertex, edge), and the agent reported is the lowest index carrying it.
EV_ILLEGAL = KIND_BY_NAME["illegal_move"].event_bit  # tried to move off the grid; stays where it was
EV_HOLE = KIND_BY_NAME["hole"].event_bit  # moved into a hole
EV_VERTEX = KIND_BY_NAME["vertex_conflict"].event_bit  # ends the step in the same cell as another agent
EV_EDGE = KIND_BY_NAME["edge_conflict"].event_bit  # swapped cells with another agent
EV_GOAL = KIND_BY_NAME["goal"].event_bit  # arrived on its goal this step
EV_SLIP = KIND_BY_NAME["slip"].event_bit  # slipped sideways (slippery ice only)
EVENT_NAMES = {kind.event_bit: kind.name for kind in sorted(KINDS, key=lambda kind: kind.event_bit) if kind.event_bit}


def _failure_code(name: str) -> int:
    """The failure category code of the table's row ``name`` (a row that is no failure category has none)."""
    code = KIND_BY_NAME[name].code
    if code is None:
        raise AssertionError(f"{name!r} is no failure category of the failure table")
    return code


# Metric names used everywhere, indexed by code.
NO_FAILURE = _failure_code("none")
PARSE_ERROR = _failure_code("parse_error")
ILLEGAL_MOVE = _failure_code("illegal_move")
FELL_IN_HOLE = _failure_code("hole")
VERTEX_CONFLICT = _failure_code("vertex_conflict")
EDGE_CONFLICT = _failure_code("edge_conflict")
GOAL_NOT_REACHED = _failure_code("goal_not_reached")
FAILURE_NAMES = tuple(kind.name for kind in FAILURES)
# Event flag -> failure category, in reporting priority order.
FAILURE_PRIORITY = tuple((kind.event_bit, _failure_code(kind.name)) for kind in STEP_FAILURES)

# --- text symbols (instances and states as text: CLI, prompts, terminal) ---------------------------------
SYMBOL_ICE = "."
SYMBOL_HOLE = "H"
SYMBOL_OFF_GRID = " "
SYMBOL_AGENT = "A"  # followed by the agent index: A0, A1, ...
SYMBOL_GOAL = "G"  # followed by the goal's agent index: G0, G1, ...
SYMBOL_FALLEN = "X"  # an agent that fell into a hole: X0
SYMBOL_MARKED = "!"  # an agent where a failure happened (exemplars, viewers): !0
TILE_SYMBOLS = (SYMBOL_ICE, SYMBOL_HOLE, SYMBOL_OFF_GRID)

# --- limits ----------------------------------------------------------------------------------------------
MAX_SIDE = 256  # largest map side the simulator accepts
MAX_AGENTS = 64  # most agents in one instance
MAX_PLAN_LENGTH = 4096  # longest per-agent action sequence the judge accepts
