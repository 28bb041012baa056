"""Typed, validated objects of the game: an instance, a joint plan, an env state.

All arrays are NumPy with fixed dtypes; shapes are written beside each field. Construction validates and raises
:class:`simulator.errors.ConfigError`; nothing is silently rewritten.
"""

from __future__ import annotations

import hashlib

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from simulator import constants as C
from simulator.documents import is_integer
from simulator.errors import ConfigError


def _exact_ints(value: Any, name: str) -> None:
    """Refuse, in an instance document's ``grid``, ``starts`` or ``goals`` (lists of lists), a cell that is not an
    integer: JSON's true/false and decimals (``1.0``) would pass the array check below as 1 (a type misread). Two
    levels are walked; deeper nesting, ragged rows and ranges are the array check's."""
    if not isinstance(value, list):
        return
    for i, row in enumerate(value):
        for j, item in (enumerate(row) if isinstance(row, list) else ((None, row),)):
            if isinstance(item, list):
                continue
            if not is_integer(item):
                where = f"instance.{name}[{i}]" + ("" if j is None else f"[{j}]")
                raise ConfigError(where, item, "an integer (not true, false or a decimal such as 1.0)")


def _as_int_array(value: Any, name: str, dtype: type[np.integer[Any]], ndim: int) -> npt.NDArray[Any]:
    try:
        array = np.asarray(value)
    except Exception as exc:  # ragged lists and such
        raise ConfigError(name, value, f"a {ndim}-d integer array", str(exc)) from None
    if array.ndim != ndim:
        raise ConfigError(name, value, f"a {ndim}-d integer array, got {array.ndim}-d")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if np.issubdtype(array.dtype, np.bool_):
            pass
        elif np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
            pass
        else:
            raise ConfigError(name, value, "integers only")
    if array.size and array.dtype != dtype and not np.issubdtype(array.dtype, np.bool_):
        # checked before the cast: numpy wraps out-of-range integers silently (4294967296 -> 0 as int32)
        info = np.iinfo(dtype)
        try:
            low, high = array.min(), array.max()
            out_of_range = low < info.min or high > info.max
        except (TypeError, OverflowError):  # Python ints too large for any numpy type (object arrays)
            out_of_range = True
        if out_of_range:
            at = next((i for i, v in np.ndenumerate(array) if not info.min <= v <= info.max), None)
            shown = array[at].item() if at is not None else value
            raise ConfigError(name + (str(list(at)) if at is not None else ""), shown,
                              f"an integer in [{info.min}, {info.max}]")
    return np.ascontiguousarray(array, dtype=dtype)


@dataclass(frozen=True, eq=False)
class Instance:
    """One MAPF-FrozenLake instance: a map, K starts and K goals.

    Fields:
        grid: ``(H, W) int8`` tile codes (``constants.ICE`` or ``constants.HOLE``).
        starts: ``(K, 2) int32`` (row, col) of each agent's start; distinct, on ice.
        goals: ``(K, 2) int32`` (row, col) of each agent's goal; distinct, on ice.

    An agent's start may equal its own goal (it is then on its goal from step 0). Arrays are read-only.
    """

    grid: npt.NDArray[np.int8]  # (H, W)
    starts: npt.NDArray[np.int32]  # (K, 2)
    goals: npt.NDArray[np.int32]  # (K, 2)

    if TYPE_CHECKING:  # what the generated __init__ takes: array-likes, which __post_init__ checks and converts
        def __init__(self, grid: npt.ArrayLike, starts: npt.ArrayLike, goals: npt.ArrayLike) -> None: ...

    def __post_init__(self) -> None:
        grid = _as_int_array(self.grid, "instance.grid", np.int8, 2)
        starts = _as_int_array(self.starts, "instance.starts", np.int32, 2)
        goals = _as_int_array(self.goals, "instance.goals", np.int32, 2)
        height, width = grid.shape
        for side_name, side in (("height", height), ("width", width)):
            if not 1 <= side <= C.MAX_SIDE:
                raise ConfigError(f"instance.grid {side_name}", side, f"1 <= {side_name} <= {C.MAX_SIDE}")
        bad_tiles = (grid != C.ICE) & (grid != C.HOLE)
        if bad_tiles.any():
            r, c = np.argwhere(bad_tiles)[0]
            raise ConfigError(f"instance.grid[{r}][{c}]", int(grid[r, c]), f"{C.ICE} (ice) or {C.HOLE} (hole)")
        for name, points in (("starts", starts), ("goals", goals)):
            if points.shape[1:] != (2,):
                raise ConfigError(f"instance.{name}", points.tolist(), "shape (K, 2): one (row, col) per agent")
        if starts.shape[0] != goals.shape[0]:
            raise ConfigError("instance.goals", goals.shape[0], f"one goal per agent ({starts.shape[0]} starts)")
        n_agents = starts.shape[0]
        if not 1 <= n_agents <= C.MAX_AGENTS:
            raise ConfigError("instance.starts", n_agents, f"1 <= number of agents <= {C.MAX_AGENTS}")
        free_cells = int((grid == C.ICE).sum())
        if n_agents > free_cells:
            raise ConfigError("instance.starts", n_agents, f"at most {free_cells} agents (the free cells of the map)")
        for name, points in (("starts", starts), ("goals", goals)):
            seen: set[tuple[int, int]] = set()
            for k, (r, c) in enumerate(points.tolist()):  # plain ints: K is small, numpy calls cost more here
                if not (0 <= r < height and 0 <= c < width):
                    raise ConfigError(f"instance.{name}[{k}]", (r, c), f"0 <= row < {height} and 0 <= col < {width}")
                if grid[r, c] != C.ICE:
                    raise ConfigError(f"instance.{name}[{k}]", (r, c), "a cell of ice, not a hole")
                if (r, c) in seen:
                    raise ConfigError(f"instance.{name}", (r, c), f"distinct {name}: one agent per cell")
                seen.add((r, c))
        for array in (grid, starts, goals):
            array.setflags(write=False)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "goals", goals)

    @property
    def height(self) -> int:
        return int(self.grid.shape[0])

    @property
    def width(self) -> int:
        return int(self.grid.shape[1])

    @property
    def n_agents(self) -> int:
        return int(self.starts.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Instance):
            return NotImplemented
        return (
            np.array_equal(self.grid, other.grid)
            and np.array_equal(self.starts, other.starts)
            and np.array_equal(self.goals, other.goals)
        )

    def __hash__(self) -> int:
        return hash((self.grid.tobytes(), self.grid.shape, self.starts.tobytes(), self.goals.tobytes()))

    def content_key(self) -> bytes:
        """16 bytes naming the instance by content (grid, starts and goals in agent order), equal exactly when
        the instances are equal (up to sha256 collisions): what keeps a protected set (a run's test or evidence
        instances) out of generated training data however it was seeded."""
        digest = hashlib.sha256()
        for array, dtype in ((self.grid, np.int8), (self.starts, np.int32), (self.goals, np.int32)):
            digest.update(np.asarray(array.shape, np.int64).tobytes())
            digest.update(np.ascontiguousarray(array, dtype).tobytes())
        return digest.digest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """Plain lists, for JSON/YAML."""
        return {"grid": self.grid.tolist(), "starts": self.starts.tolist(), "goals": self.goals.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Instance":
        if not isinstance(data, dict):
            raise ConfigError("instance", data, "a mapping with keys grid, starts, goals")
        missing = [key for key in ("grid", "starts", "goals") if key not in data]
        if missing:
            raise ConfigError(f"instance.{missing[0]}", None, "present (an instance has grid, starts and goals)")
        for name in ("grid", "starts", "goals"):
            _exact_ints(data[name], name)
        return cls(grid=data["grid"], starts=data["starts"], goals=data["goals"])


@dataclass(frozen=True, eq=False)
class JointPlan:
    """Every agent's whole action sequence.

    Fields:
        actions: ``(K, T) int8`` action codes; row k is agent k's sequence padded with ``WAIT`` after its length.
        lengths: ``(K,) int32`` how many actions agent k was given (``0 <= lengths[k] <= T``).

    Validation: codes in ``0..N_ACTIONS-1``, ``T <= MAX_PLAN_LENGTH``.
    """

    actions: npt.NDArray[np.int8]  # (K, T)
    lengths: npt.NDArray[np.int32]  # (K,)

    if TYPE_CHECKING:  # what the generated __init__ takes: array-likes, which __post_init__ checks and converts
        def __init__(self, actions: npt.ArrayLike, lengths: npt.ArrayLike) -> None: ...

    def __post_init__(self) -> None:
        actions = _as_int_array(self.actions, "plan.actions", np.int64, 2)
        lengths = _as_int_array(self.lengths, "plan.lengths", np.int64, 1)
        n_agents, horizon = actions.shape
        if horizon > C.MAX_PLAN_LENGTH:
            raise ConfigError("plan.actions", f"{horizon} steps", f"at most {C.MAX_PLAN_LENGTH} steps per agent")
        if lengths.shape[0] != n_agents:
            raise ConfigError("plan.lengths", lengths.tolist(), f"one length per agent ({n_agents} agents)")
        if actions.size:
            bad = (actions < 0) | (actions >= C.N_ACTIONS)
            if bad.any():
                k, t = np.argwhere(bad)[0]
                raise ConfigError(
                    f"plan.actions[{k}][{t}]", int(actions[k, t]), f"an action code 0..{C.N_ACTIONS - 1} {C.ACTION_NAMES}"
                )
        if ((lengths < 0) | (lengths > horizon)).any():
            k = int(np.argmax((lengths < 0) | (lengths > horizon)))
            raise ConfigError(f"plan.lengths[{k}]", int(lengths[k]), f"0 <= length <= {horizon}")
        actions = actions.astype(np.int8)
        # Actions past an agent's length are waits, whatever the caller put there.
        padding = np.arange(horizon)[None, :] >= lengths[:, None]
        if padding.any():
            actions[padding] = C.WAIT
        actions.setflags(write=False)
        lengths = lengths.astype(np.int32)
        lengths.setflags(write=False)
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "lengths", lengths)

    @property
    def n_agents(self) -> int:
        return int(self.actions.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[1])

    @classmethod
    def from_sequences(cls, sequences: Sequence[Sequence[int]]) -> "JointPlan":
        """Build from one list of action codes per agent (lists may differ in length)."""
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
            raise ConfigError("plan.sequences", sequences, "a list of action-code lists, one per agent")
        sequences = list(sequences)
        for k, seq in enumerate(sequences):
            if isinstance(seq, (str, bytes)) or not isinstance(seq, Iterable):
                raise ConfigError(f"plan.actions[{k}]", seq, f"a list of action codes 0..{C.N_ACTIONS - 1}")
            sequences[k] = list(seq)
        horizon = max((len(seq) for seq in sequences), default=0)
        actions = np.zeros((len(sequences), horizon), dtype=np.int64)
        for k, seq in enumerate(sequences):
            row = np.asarray(seq)
            if seq and (row.ndim != 1 or row.dtype.kind not in "iu"):  # bools, floats, strings, nesting ([[]] too)
                t = next((t for t, code in enumerate(seq) if not is_integer(code)), 0)
                raise ConfigError(f"plan.actions[{k}][{t}]", list(seq)[t] if len(seq) else seq, f"an action code 0..{C.N_ACTIONS - 1}")
            actions[k, : row.size] = row
        return cls(actions=actions, lengths=np.array([len(seq) for seq in sequences], dtype=np.int64))

    def sequences(self) -> list[list[int]]:
        return [self.actions[k, : self.lengths[k]].tolist() for k in range(self.n_agents)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JointPlan):
            return NotImplemented
        return self.sequences() == other.sequences()

    def __hash__(self) -> int:
        return hash(tuple(tuple(seq) for seq in self.sequences()))


@dataclass(frozen=True)
class Judgement:
    """The verdict on one joint plan (see ``simulator.judge``).

    Fields:
        valid: parsed, no failure, every agent ends on its goal.
        failure: failure category code (a row of the failure table, ``simulator.failures.FAILURES``);
            ``NO_FAILURE`` when valid.
        fail_step: 1-based step of the failure (for goal_not_reached: the plan's horizon); -1 when valid.
        fail_agent: agent index reported for the failure; -1 when valid.
        makespan: step at which the last agent arrived on its goal; -1 when not valid.
        sum_of_costs: sum over agents of their arrival steps; -1 when not valid.
        agents_on_goal: agents standing on their goal when judging stopped.
    """

    valid: bool
    failure: int
    fail_step: int
    fail_agent: int
    makespan: int
    sum_of_costs: int
    agents_on_goal: int

    @property
    def failure_name(self) -> str:
        return C.FAILURE_NAMES[self.failure]


@dataclass(frozen=True)
class InstanceLabels:
    """The generator's labels of an instance: what ``simulator.generator.LabelledInstance`` adds to the map (it is
    one, with the instance and its certificate plan), and what an episode record keeps of it
    (``replays.types.Episode.labels``).

    Fields:
        size: the map side it was generated for.
        seed: the seed of its slot's random stream.
        index: its slot within its size.
        optimal_makespan: the least makespan of any valid joint plan (certified by the solver).
        optimal_sum_of_costs: the least sum of costs of any valid joint plan.
        sum_of_distances: sum of each agent's shortest distance on the bare map (a lower bound of the above).
        needs_wait: no optimal plan exists without a wait.
    """

    size: int
    seed: int
    index: int
    optimal_makespan: int
    optimal_sum_of_costs: int
    sum_of_distances: int
    needs_wait: bool

    @classmethod
    def from_labelled(cls, labelled: Any) -> "InstanceLabels":
        """The labels alone (plain ints and a bool) of anything that carries them, e.g. a ``LabelledInstance``."""
        return cls(int(labelled.size), int(labelled.seed), int(labelled.index), int(labelled.optimal_makespan),
                   int(labelled.optimal_sum_of_costs), int(labelled.sum_of_distances), bool(labelled.needs_wait))


@dataclass
class EnvState:
    """The state of one running environment (step-by-step API).

    Fields:
        pos: ``(K, 2) int32`` current (row, col) of each agent.
        status: ``(K,) int8`` ``constants.MOVING / ON_GOAL / FALLEN``.
        arrival: ``(K,) int32`` step at which each agent arrived on its goal, -1 before.
        t: steps taken so far.
        events: ``(K,) int8`` event flags of the last step.
    """

    pos: np.ndarray  # (K, 2) int32
    status: np.ndarray  # (K,) int8
    arrival: np.ndarray  # (K,) int32
    t: int = 0
    events: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))  # (K,) int8

    def copy(self) -> "EnvState":
        return EnvState(self.pos.copy(), self.status.copy(), self.arrival.copy(), self.t, self.events.copy())
