"""Tile, action, status, event and failure codes: the one place that defines them.

Every other module (kernels, reference rules, text rendering, prompts, replays, viewers) imports these names;
nobody writes a bare ``3`` for "left".
"""

from __future__ import annotations

import numpy as np

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

# --- per-agent event flags of one step (bit set) ---------------------------------------------------------
EV_ILLEGAL = 1  # tried to move off the grid; stays where it was
EV_HOLE = 2  # moved into a hole
EV_VERTEX = 4  # ends the step in the same cell as another agent
EV_EDGE = 8  # swapped cells with another agent
EV_GOAL = 16  # arrived on its goal this step
EV_SLIP = 32  # slipped sideways (slippery ice only)
EV_FAILURE_MASK = EV_ILLEGAL | EV_HOLE | EV_VERTEX | EV_EDGE
EVENT_NAMES = {
    EV_ILLEGAL: "illegal_move",
    EV_HOLE: "hole",
    EV_VERTEX: "vertex_conflict",
    EV_EDGE: "edge_conflict",
    EV_GOAL: "goal",
    EV_SLIP: "slip",
}

# --- failure categories of a judged plan (metric names used everywhere) ----------------------------------
# Within one step, when several failures happen at once, the category reported is the first in this order
# (illegal move, hole, vertex, edge), and the agent reported is the lowest index carrying it.
NO_FAILURE = 0
PARSE_ERROR = 1
ILLEGAL_MOVE = 2
FELL_IN_HOLE = 3
VERTEX_CONFLICT = 4
EDGE_CONFLICT = 5
GOAL_NOT_REACHED = 6
FAILURE_NAMES = (
    "none",
    "parse_error",
    "illegal_move",
    "hole",
    "vertex_conflict",
    "edge_conflict",
    "goal_not_reached",
)
# Event flag -> failure category, in reporting priority order.
FAILURE_PRIORITY = ((EV_ILLEGAL, ILLEGAL_MOVE), (EV_HOLE, FELL_IN_HOLE), (EV_VERTEX, VERTEX_CONFLICT), (EV_EDGE, EDGE_CONFLICT))

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
