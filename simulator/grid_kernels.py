"""Grid kernels shared by the optimal MAPF solver and ``needs_wait``: the map as a move table, BFS distance
maps, a clock, array growth.

Free functions over plain arrays, ``@njit(cache=True)``, serial. They trust their inputs (the wrappers in
``simulator.solver`` and ``simulator.needs_wait`` validate through ``Instance``). The solver's kernels are split
by role: this module (maps), ``simulator.pair_tables`` (pairwise cost-to-go tables), ``simulator.astar_kernels``
(joint A* of one group), ``simulator.independence_kernels`` (independence detection and ``solve_kernel``) and
``simulator.needs_wait_kernels``. Their plain-Python twins are ``simulator.solver.brute_force_optimum`` and
``simulator.needs_wait.needs_wait_reference``; the tests hold them equal.

Array conventions (``H x W`` map, ``N = H * W`` cells, ``K`` agents, ``G`` agents of one group):
    cell index:  ``row * W + col``
    nbr:     (N, 5) int32   target cell of each action (``constants`` action order), -1 where the move leaves
                            the grid or enters a blocked cell; row ``c`` is all -1 when ``c`` itself is blocked
    dist:    (K, N) int32   single-agent distance to the agent's goal over free cells, ``INF`` if unreachable
    plan:    (K, L) int32   cell of each agent at each time; row k is valid up to ``arrival[k]``, after which
                            the agent stands on its goal (goals are absorbing)

The model of the rules (rules v1, see ``simulator.rules``) these kernels search in: a joint state is the tuple of
agent cells. An agent whose cell is its goal has arrived (it cannot have stood there earlier without arriving,
since arrival is absorbing), so it stays; every other agent waits or moves to a free 4-neighbour. A joint move
is legal when no two agents end in one cell (vertex conflict) and no two agents swap cells (edge conflict);
following and rotations of three or more agents are legal. An agent whose start is its goal never moves: its
cell is treated as blocked for everyone else (``blocked``), and it is left out of the search.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

import numpy as np
import numpy.typing as npt
from numba import objmode

from simulator import constants as C
from simulator.jit import BoolArray, Int8Array, Int32Array, Int64Array, njit

Scalar = TypeVar("Scalar", bound=np.generic)

_ICE = C.ICE
_N_ACTIONS = C.N_ACTIONS
# Row and column displacement per action code (``constants.ACTION_DELTAS``), as arrays numba freezes.
DROW = np.ascontiguousarray(C.ACTION_DELTAS[:, 0])  # (N_ACTIONS,) int32
DCOL = np.ascontiguousarray(C.ACTION_DELTAS[:, 1])  # (N_ACTIONS,) int32

INF = 1 << 28  # distance of an unreachable cell; far below int32 overflow when summed over 64 agents


NO_DEADLINE_S = 1e9  # "no time limit" as a deadline this far off: the kernels still read the clock, so Ctrl-C works


def deadline_of(time_limit: float | None) -> float:
    """The ``perf_counter`` value a kernel stops at. Without a limit the deadline is far off rather than "none":
    the kernels then read the clock (through :func:`now`) as they run, and that is when Python sees a Ctrl-C."""
    return time.perf_counter() + (NO_DEADLINE_S if time_limit is None else float(time_limit))


_Result = TypeVar("_Result")


def interruptible(kernel: Callable[..., _Result], *args: Any) -> _Result:
    """``kernel(*args)``, with a Ctrl-C during it raised as KeyboardInterrupt: one that arrives while :func:`now`
    runs Python comes out of the compiled code as a SystemError ("returned a result with an exception set")."""
    try:
        return kernel(*args)
    except SystemError as error:
        if isinstance(error.__cause__ or error.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise


@njit(cache=True)
def now() -> float:
    """``time.perf_counter()`` from inside nopython code (objmode keeps the function cacheable)."""
    with objmode(t="float64"):
        t = time.perf_counter()
    return t


@njit(cache=True)
def flat_instance(
    grid: Int8Array, starts_rc: Int32Array, goals_rc: Int32Array
) -> tuple[Int64Array, Int64Array, BoolArray]:
    """``(starts (K,) int64, goals (K,) int64, blocked (H*W,) bool)``: cells as ``row * width + col``."""
    height, width = grid.shape
    n_agents = starts_rc.shape[0]
    starts = np.empty(n_agents, np.int64)
    goals = np.empty(n_agents, np.int64)
    for k in range(n_agents):
        starts[k] = starts_rc[k, 0] * width + starts_rc[k, 1]
        goals[k] = goals_rc[k, 0] * width + goals_rc[k, 1]
    blocked = np.empty(height * width, np.bool_)
    for r in range(height):
        for c in range(width):
            blocked[r * width + c] = grid[r, c] != _ICE
    return starts, goals, blocked


@njit(cache=True)
def neighbor_table(blocked: BoolArray, height: int, width: int) -> Int32Array:
    """``(N, 5) int32`` move targets per action; -1 for off-grid or blocked targets (see module docstring).

    The one movement model of the searches (solver, ``needs_wait``, generator, greedy policy); the rules of a
    step (``simulator.rules``, ``simulator.kernels``) say what a move off the grid or into a hole does."""
    n_cells = height * width
    nbr = np.full((n_cells, _N_ACTIONS), -1, np.int32)
    for row in range(height):
        for col in range(width):
            cell = row * width + col
            if blocked[cell]:
                continue
            for action in range(_N_ACTIONS):
                r = row + DROW[action]
                c = col + DCOL[action]
                if 0 <= r < height and 0 <= c < width and not blocked[r * width + c]:
                    nbr[cell, action] = r * width + c
    return nbr


@njit(cache=True)
def bfs_distances(nbr: Int32Array, source: int, dist_out: Int32Array, queue: Int32Array) -> int:
    """Fill ``dist_out (N,)`` with BFS distances from ``source`` over ``nbr`` (moves are symmetric); returns how
    many cells it reached, which are ``queue[:count]`` in the order reached."""
    dist_out[:] = INF
    dist_out[source] = 0
    queue[0] = source
    head = 0
    tail = 1
    while head < tail:
        cell = queue[head]
        head += 1
        next_dist = dist_out[cell] + 1
        for action in range(1, _N_ACTIONS):
            target = nbr[cell, action]
            if target >= 0 and dist_out[target] == INF:
                dist_out[target] = next_dist
                queue[tail] = target
                tail += 1
    return tail


def bare_neighbor_table(grid: npt.NDArray[np.integer[Any]]) -> Int32Array:
    """``(H*W, 5) int32`` the neighbour table of the bare map: holes (and padding) blocked, no agents."""
    height, width = grid.shape
    return neighbor_table((np.asarray(grid) != _ICE).ravel(), height, width)


def distances_from(nbr: Int32Array, source: int) -> Int32Array:
    """``(N,) int32`` BFS distances from cell ``source`` over ``nbr`` (``INF`` where unreachable)."""
    n_cells = nbr.shape[0]
    dist = np.empty(n_cells, np.int32)
    bfs_distances(nbr, source, dist, np.empty(n_cells, np.int32))
    return dist


@njit(cache=True)
def grow1(array: npt.NDArray[Scalar], capacity: int) -> npt.NDArray[Scalar]:
    """A copy of the 1-D ``array`` with room for ``capacity`` entries."""
    grown = np.empty(capacity, array.dtype)
    grown[: array.shape[0]] = array
    return grown


@njit(cache=True)
def grow2(array: npt.NDArray[Scalar], capacity: int) -> npt.NDArray[Scalar]:
    """A copy of the 2-D ``array`` with room for ``capacity`` rows."""
    grown = np.empty((capacity, array.shape[1]), array.dtype)
    grown[: array.shape[0]] = array
    return grown
