"""The v1 codec: how a header and an episode record are encoded in msgpack (spec: ``replays/FORMAT.md``).

Reading is split in two so that iterating a file stays fast: :meth:`CodecV1.decode_episode` checks the record's
*structure* (field count and types, declared sizes against the map, agent count and step count, limits) and
returns a :class:`~replays.types.LazyEpisode`; the arrays (instance, plan, positions, events) are decoded and their
*content* checked (tiles, cells on the map, distinct starts, action codes, event flags, row 0 = starts) on first
access, raising :class:`ReplayError` then. ``read_replay`` and ``ReplayReader(path, lazy=False)`` decode
everything. Never edit what a v1 record means: a new encoding is a new codec in ``replays.registry``.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Literal, overload

import numpy as np
import numpy.typing as npt

from replays.container import (
    MAX_BIN_BYTES,
    MAX_CONTAINER_LEN,
    MAX_NAME_BYTES,
    MAX_NESTING,
    MAX_STEPS,
    MAX_TEXT_BYTES,
    SPLITS,
)
from replays.errors import RecordError
from replays.types import Episode, InstanceLabels, LazyEpisode, Outcome, ReplayHeader
from simulator import constants as C
from simulator.documents import is_real
from simulator.errors import ConfigError
from simulator.jit import Int8Array, Int32Array, UInt8Array, njit
from simulator.types import Instance, JointPlan

_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what msgpack can hold

_KNOWN_EVENT_BITS = C.EV_ALL  # every bit of the failure table (simulator.failures)
# bytes.translate(None, table) deletes these; what is left of a flags/actions string is the bad codes.
_EVENT_FLAG_BYTES = bytes(code for code in range(1, 256) if code & ~_KNOWN_EVENT_BITS == 0)
_ACTION_BYTES = bytes(range(C.N_ACTIONS))


# --- checks shared by encoding and decoding -------------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return type(value) is int  # msgpack gives exactly int; bool is excluded on purpose


def _int(value: Any, name: str, low: int = _INT_MIN, high: int = _INT_MAX) -> int:
    """An integer in [low, high]; numpy integers are accepted, floats and bools refused (no silent rounding)."""
    if isinstance(value, (bool, np.bool_)):
        raise RecordError(f"{name} = {value!r}: an integer, not a bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise RecordError(f"{name} = {_short(value)}: an integer") from None
    if not low <= number <= high:
        raise RecordError(f"{name} = {number}: allowed {low}..{high}")
    return number


def _bool(value: Any, name: str) -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise RecordError(f"{name} = {_short(value)}: a bool")


def _float(value: Any, name: str) -> float:
    if type(value) is float:
        return value
    if not is_real(value):
        raise RecordError(f"{name} = {_short(value)}: a number")
    return float(value)


@overload
def _text(value: Any, name: str, limit: int = ..., *, optional: Literal[False]) -> str: ...


@overload
def _text(value: Any, name: str, limit: int = ..., optional: bool = ...) -> str | None: ...


def _text(value: Any, name: str, limit: int = MAX_TEXT_BYTES, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if type(value) is not str:
        raise RecordError(f"{name} = {_short(value)}: a string{' or None' if optional else ''}")
    # Length in characters bounds the UTF-8 length by 4x; only long strings pay for the exact count.
    if len(value) * 4 > limit and len(value.encode("utf-8", "surrogatepass")) > limit:
        raise RecordError(f"{name}: {len(value)} characters, more than {limit} UTF-8 bytes")
    return value


def _short_text(value: Any, name: str) -> str | None:
    """:func:`_text` with the common cases (None, a short str) decided without another call."""
    if value is None or (type(value) is str and len(value) * 4 <= MAX_TEXT_BYTES):
        return value
    return _text(value, name)


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _plain_fields(
    values: tuple[Any, ...], names: tuple[str, ...], kinds: tuple[type, ...], owner: str
) -> tuple[Any, ...]:
    """Int and bool fields ready for msgpack: as they are when they already have exactly the types in ``kinds``
    (the common case, one comparison), else each one checked and converted (numpy scalars) or refused."""
    if tuple(map(type, values)) == kinds:
        return values
    return tuple(
        _bool(value, f"{owner}.{name}") if kind is bool else _int(value, f"{owner}.{name}")
        for value, name, kind in zip(values, names, kinds)
    )


def _compact_float(value: float) -> float | int:
    """The value to pack for a float field: an int when it is integral (1 byte for 0.0 or 1.0 instead of 9).

    Readers turn it back into a float; -0.0 and values beyond 2**53 stay floats so nothing is lost."""
    if value.is_integer() and -_EXACT < value < _EXACT and (value or math.copysign(1.0, value) > 0):
        return int(value)
    return value


_EXACT = 2.0**53  # integers up to here are exact in a float64


def _name_key(key: Any, name: str) -> None:
    """A number map's key: a str of at most ``MAX_NAME_BYTES`` bytes (RecordError naming the map otherwise)."""
    if type(key) is not str:
        raise RecordError(f"{name}: key {_short(key)} is not a str")
    if len(key) * 4 > MAX_NAME_BYTES:
        _text(key, f"{name} key", MAX_NAME_BYTES, optional=False)


def _number_map_out(value: Any, name: str) -> dict[str, float | int]:
    if type(value) is not dict:
        raise RecordError(f"{name} = {_short(value)}: a dict of str -> float")
    if not value:
        return value
    if len(value) > MAX_CONTAINER_LEN:
        raise RecordError(f"{name}: {len(value)} entries, at most {MAX_CONTAINER_LEN}")
    out = {}
    for key, number in value.items():
        _name_key(key, name)
        out[key] = _compact_float(number if type(number) is float else _float(number, f"{name}[{key!r}]"))
    return out


def _number_map_in(value: Any, name: str) -> dict[str, float]:
    if type(value) is not dict:
        raise RecordError(f"{name} = {_short(value)}: a map of str -> number")
    if not value:
        return {}
    out = {}
    for key, number in value.items():
        _name_key(key, name)
        kind = type(number)
        if kind is float:
            out[key] = number
        elif kind is int:
            out[key] = float(number)
        else:
            raise RecordError(f"{name}[{key!r}] = {_short(number)}: a number")
    return out


def _check_plain(value: Any, name: str, depth: int = 0) -> None:
    """Writer-side check of free-form metadata: only values that come back equal from msgpack."""
    if depth > MAX_NESTING:
        raise RecordError(f"{name}: nested deeper than {MAX_NESTING}")
    kind = type(value)
    if value is None or kind is bool or kind is float or kind is bytes:
        if kind is bytes and len(value) > MAX_BIN_BYTES:
            raise RecordError(f"{name}: {len(value)} bytes, at most {MAX_BIN_BYTES}")
        return
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise RecordError(f"{name} = {value}: outside the msgpack integer range")
        return
    if kind is str:
        _text(value, name, optional=False)
        return
    if kind is list:
        if len(value) > MAX_CONTAINER_LEN:
            raise RecordError(f"{name}: {len(value)} items, at most {MAX_CONTAINER_LEN}")
        for i, item in enumerate(value):
            _check_plain(item, f"{name}[{i}]", depth + 1)
        return
    if kind is dict:
        if len(value) > MAX_CONTAINER_LEN:
            raise RecordError(f"{name}: {len(value)} entries, at most {MAX_CONTAINER_LEN}")
        for key, item in value.items():
            if type(key) is not str:
                raise RecordError(f"{name}: key {_short(key)} is not a str")
            _check_plain(item, f"{name}[{key!r}]", depth + 1)
        return
    hint = " (use a list)" if kind is tuple else ""
    raise RecordError(f"{name}: {kind.__name__} {_short(value)} is not a plain msgpack value{hint}")


def _plain_map_out(value: Any, name: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise RecordError(f"{name} = {_short(value)}: a dict")
    if value:
        _check_plain(value, name)
    return value


# The labels and outcome arrays of record v1 (FORMAT.md): their field orders are the format's, whatever the classes'.
_LABEL_FIELDS = ("size", "seed", "index", "optimal_makespan", "optimal_sum_of_costs", "sum_of_distances", "needs_wait")
_LABEL_KINDS = (int,) * 6 + (bool,)
_LABEL_GETTER = operator.attrgetter(*_LABEL_FIELDS)


def labels_problem(labels: Any, n_agents: int, trivial: bool) -> str | None:
    """What is wrong with the integer label fields (``size, seed, index, optimal_makespan,
    optimal_sum_of_costs, sum_of_distances, needs_wait``) of an instance of ``n_agents`` agents, ``trivial`` when
    every agent starts on its goal; None when they are in range. The ``gap`` engineer and the summary read these
    labels: an optimal makespan of 2**63-1, -1, or 0 for agents off their goals would fail it or narrow its band
    without a word. The ranges: size 1..MAX_SIDE; seed and index >= 0 (the seed fits 64 bits); optimal makespan
    0 exactly when the instance is trivial, else 1..MAX_PLAN_LENGTH; the optimal sum of costs from the optimal
    makespan to ``n_agents * MAX_PLAN_LENGTH``; the sum of shortest distances from 0 to the sum of costs (it is
    its lower bound)."""
    size, seed, index, makespan, sum_of_costs, distances = labels[:6]
    if not 1 <= size <= C.MAX_SIDE:
        return f"labels.size = {_short(size)}: a map side 1..{C.MAX_SIDE}"
    if not 0 <= seed < 2**64:
        return f"labels.seed = {_short(seed)}: an integer 0..2**64-1"
    if not 0 <= index < 2**63:
        return f"labels.index = {_short(index)}: an integer 0..2**63-1"
    low, high = (0, 0) if trivial else (1, C.MAX_PLAN_LENGTH)
    if not low <= makespan <= high:
        return (f"labels.optimal_makespan = {_short(makespan)}: " + (
            "0 (every agent starts on its goal)" if trivial else
            f"1..{C.MAX_PLAN_LENGTH} (an agent starts off its goal)"))
    if not makespan <= sum_of_costs <= n_agents * C.MAX_PLAN_LENGTH:
        return (f"labels.optimal_sum_of_costs = {_short(sum_of_costs)}: {makespan}..{n_agents * C.MAX_PLAN_LENGTH} "
                "(at least the optimal makespan)")
    if not 0 <= distances <= sum_of_costs:
        return (f"labels.sum_of_distances = {_short(distances)}: 0..{sum_of_costs} (a lower bound of the optimal "
                "sum of costs)")
    return None


_OUTCOME_FIELDS = ("valid", "optimal", "failure", "fail_step", "fail_agent", "makespan", "sum_of_costs",
                   "agents_on_goal")
_OUTCOME_KINDS = (bool, bool) + (int,) * 6
_OUTCOME_GETTER = operator.attrgetter(*_OUTCOME_FIELDS)

def _outcome_of(record: list[Any]) -> Outcome:
    """The Outcome of a checked record array, built without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field): it runs once per episode read, 0.7 us against 2.7 us through ``__init__``."""
    outcome = object.__new__(Outcome)
    outcome.__dict__.update(zip(_OUTCOME_FIELDS, record))
    return outcome


# --- the v1 codec -------------------------------------------------------------------------------------------
_HEADER_KEYS = ("producer_version", "run_id", "stage", "split", "policy", "stage_config", "created", "extra")

# Episode record v1: a msgpack array with these fields in this order (see FORMAT.md for each one's encoding).
V1_EPISODE_FIELDS = (
    "height", "width", "grid", "starts", "goals", "labels", "plan", "parse_error", "positions",
    "event_index", "event_flags", "outcome", "reward", "reward_components", "prompt", "completion",
    "prompt_tokens", "completion_tokens", "timings", "slip", "extra",
)
_N_FIELDS_V1 = len(V1_EPISODE_FIELDS)
_U16 = np.dtype("<u2")
_U32 = np.dtype("<u4")
_U8 = np.dtype(np.uint8)


def _cell_dtype(height: int, width: int) -> np.dtype:
    """Cells are row * width + col: one byte each while the map has at most 256 cells, else two (LE)."""
    return _U8 if height * width <= 256 else _U16


def _cells_from_points(points: np.ndarray, height: int, width: int, dtype: np.dtype, name: str) -> bytes:
    """``(..., 2)`` (row, col) -> packed cells; every point must lie on the map."""
    array = points if type(points) is np.ndarray else np.asarray(points)
    if array.dtype.kind not in "iu":
        raise RecordError(f"{name}: integer (row, col) pairs, got dtype {array.dtype}")
    if array.dtype == np.int32 and array.flags.c_contiguous:
        # Fast path (the judge's and the reader's arrays): negative numbers become huge unsigned ones, so the
        # unsigned maximum of each column checks both ends at once.
        pairs = array.view(np.uint32).reshape(-1, 2)
    else:
        pairs = array.reshape(-1, 2).astype(np.int64)
        if pairs.size and pairs.min() < 0:
            pairs = np.where(pairs < 0, np.iinfo(np.int64).max, pairs)  # flagged as off the map below
    # One flat maximum accepts the usual case; only a point beyond the shorter side needs the per-axis check.
    if pairs.size and pairs.max() >= min(height, width):
        max_row, max_col = pairs.max(axis=0).tolist()
        if max_row >= height or max_col >= width:
            bad = int(np.argmax((pairs[:, 0] >= height) | (pairs[:, 1] >= width)))
            point = np.asarray(points).reshape(-1, 2)[bad].tolist()
            raise RecordError(f"{name}: point {bad} (row-major) = {point} is off the {height}x{width} map")
    cells: npt.NDArray[np.integer[Any]] = pairs @ _weights(width, pairs.dtype)
    return cells.astype(dtype).tobytes()


_WEIGHTS: dict[tuple[int, np.dtype[Any]], np.ndarray] = {}


def _weights(width: int, dtype: np.dtype[Any]) -> np.ndarray:
    """``[width, 1]``: (row, col) @ weights = cell. Cached: building a tiny array costs as much as using it."""
    key = (width, dtype)
    weights = _WEIGHTS.get(key)
    if weights is None:
        weights = _WEIGHTS[key] = np.array([width, 1], dtype=dtype)
    return weights


def encode_trace_numpy(
    positions: np.ndarray, events: np.ndarray, height: int, width: int, cell: np.dtype
) -> tuple[bytes, bytes, bytes]:
    """The reference trace encoding: ``(T+1, K, 2)`` positions and ``(T, K)`` event flags (any integer dtypes,
    shapes already checked) -> ``(positions, event_index, event_flags)`` bytes of the v1 record.

    Raises RecordError for a point off the map or a flag outside the EV_* bits."""
    position_bytes = _cells_from_points(positions, height, width, cell, "positions")
    if events.dtype.kind not in "iu":
        raise RecordError(f"events: integer flags, got dtype {events.dtype}")
    flat = events.reshape(-1)
    nonzero = flat.nonzero()[0]
    if not nonzero.size:
        return position_bytes, b"", b""
    flags = flat[nonzero].astype(np.int64)
    unknown = flags & ~_KNOWN_EVENT_BITS  # negative or too large values keep bits here too
    if unknown.any():
        bad = int(np.argmax(unknown != 0))
        t, k = divmod(int(nonzero[bad]), events.shape[1])
        raise RecordError(f"events[{t}][{k}] = {int(flags[bad])}: only the EV_* bits ({_KNOWN_EVENT_BITS})")
    return position_bytes, nonzero.astype(_U32).tobytes(), flags.astype(np.uint8).tobytes()


@njit(cache=True, nogil=True)
def _encode_trace_kernel(
    positions: Int32Array,  # (T+1, K, 2)
    events: Int8Array,  # (T, K)
    height: int,
    width: int,
    wide: bool,
    out: UInt8Array,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Fast twin of :func:`encode_trace_numpy` (int32 positions, int8 events, both C-contiguous).

    Writes into ``out`` (uint8): the cells at ``[0, c)``, the event indices (uint32 LE) from ``c``, the flags from
    ``c + 4*T*K``. Returns ``(c, n_events)``, or ``(-1, i)`` / ``(-2, i)`` for the first point off the map / the
    first unknown flag (flat index ``i``)."""
    n_rows, n_agents = positions.shape[0], positions.shape[1]
    n = 0
    for t in range(n_rows):
        for k in range(n_agents):
            row, col = positions[t, k, 0], positions[t, k, 1]
            if row < 0 or row >= height or col < 0 or col >= width:
                return -1, t * n_agents + k
            cell = row * width + col
            if wide:
                out[n] = cell & 255
                out[n + 1] = cell >> 8
                n += 2
            else:
                out[n] = cell
                n += 1
    index_at = n
    flags_at = n + 4 * events.shape[0] * n_agents
    count = 0
    for t in range(events.shape[0]):
        for k in range(n_agents):
            flag = events[t, k]
            if flag != 0:
                if flag & ~_KNOWN_EVENT_BITS:
                    return -2, t * n_agents + k
                i = t * n_agents + k
                at = index_at + 4 * count
                out[at] = i & 255
                out[at + 1] = (i >> 8) & 255
                out[at + 2] = (i >> 16) & 255
                out[at + 3] = (i >> 24) & 255
                out[flags_at + count] = flag
                count += 1
    return n, count


def _points_from_cells(data: bytes, height: int, width: int, dtype: np.dtype, name: str) -> np.ndarray:
    """Packed cells -> ``(N, 2) int32`` (row, col); every cell must lie on the map."""
    cells = np.frombuffer(data, dtype=dtype).astype(np.int32)
    if cells.size and int(cells.max()) >= height * width:
        bad = int(np.argmax(cells >= height * width))
        raise RecordError(f"{name}: cell {int(cells[bad])} (entry {bad}) is off the {height}x{width} map")
    points = np.empty((cells.size, 2), dtype=np.int32)
    np.divmod(cells, width, out=(points[:, 0], points[:, 1]))
    return points


class CodecV1:
    """Format version 1: encode (writer) and decode (reader) the header and episode records.

    Contract: ``decode_episode(encode_episode(e))`` equals ``e`` for every episode ``encode_episode`` accepts;
    ``decode_*`` raise only :class:`RecordError` on any input a msgpack unpacker (with ``UNPACK_LIMITS``) can
    produce.
    """

    version = 1

    def __init__(self) -> None:
        # The last instance encoded: GRPO groups write one instance many times in a row, so keep its bytes.
        self._last_instance: Instance | None = None
        self._last_instance_fields: tuple[Any, ...] = ()  # _encode_instance's answer for _last_instance
        self._scratch = np.empty(1 << 12, dtype=np.uint8)  # output buffer of the trace kernel, grown on demand

    # --- header -----------------------------------------------------------------------------------------
    def encode_header(self, header: ReplayHeader) -> dict[str, Any]:
        if not isinstance(header, ReplayHeader):
            raise RecordError(f"header = {_short(header)}: a ReplayHeader")
        if header.format_version != self.version:
            raise RecordError(
                f"format_version = {header.format_version!r}: this writer writes version {self.version}"
            )
        record = {
            "producer_version": _text(header.producer_version, "producer_version", MAX_NAME_BYTES, optional=False),
            "run_id": _text(header.run_id, "run_id", MAX_NAME_BYTES, optional=False),
            "stage": _int(header.stage, "stage", 0, 2**31 - 1),
            "split": header.split,
            "policy": _plain_map_out(header.policy, "policy"),
            "stage_config": None if header.stage_config is None else _plain_map_out(header.stage_config, "stage_config"),
            "created": _text(header.created, "created", MAX_NAME_BYTES, optional=False),
            "extra": _plain_map_out(header.extra, "extra"),
        }
        if header.split not in SPLITS:
            raise RecordError(f"split = {_short(header.split)}: one of {', '.join(SPLITS)}")
        return record

    def decode_header(self, record: Any) -> ReplayHeader:
        if type(record) is not dict:
            raise RecordError(f"the header is a map, got {type(record).__name__}")
        keys = set(record)
        if keys != set(_HEADER_KEYS):
            missing, unknown = set(_HEADER_KEYS) - keys, keys - set(_HEADER_KEYS)
            raise RecordError(
                f"header keys: missing {sorted(missing)}, unknown {sorted(map(str, unknown))}"
            )
        split = _text(record["split"], "split", MAX_NAME_BYTES, optional=False)
        if split not in SPLITS:
            raise RecordError(f"split = {_short(split)}: one of {', '.join(SPLITS)}")
        stage = record["stage"]
        if not _is_int(stage) or not 0 <= stage < 2**31:
            raise RecordError(f"stage = {_short(stage)}: an integer 0..2**31-1")
        for key in ("policy", "extra"):
            if type(record[key]) is not dict:
                raise RecordError(f"{key} = {_short(record[key])}: a map")
        if record["stage_config"] is not None and type(record["stage_config"]) is not dict:
            raise RecordError(f"stage_config = {_short(record['stage_config'])}: a map or nil")
        return ReplayHeader(
            format_version=self.version,
            producer_version=_text(record["producer_version"], "producer_version", MAX_NAME_BYTES, optional=False),
            run_id=_text(record["run_id"], "run_id", MAX_NAME_BYTES, optional=False),
            stage=stage,
            split=split,
            policy=record["policy"],
            stage_config=record["stage_config"],
            created=_text(record["created"], "created", MAX_NAME_BYTES, optional=False),
            extra=record["extra"],
        )

    # --- episodes: encoding --------------------------------------------------------------------------------
    def _encode_instance(self, instance: Any) -> tuple[int, int, bytes, bytes, bytes, np.dtype[Any], int]:
        if instance is self._last_instance:
            return self._last_instance_fields
        if not isinstance(instance, Instance):
            raise RecordError(f"instance = {_short(instance)}: a simulator.types.Instance")
        height, width = instance.grid.shape
        cell = _cell_dtype(height, width)
        # Instance validated its arrays on construction (and keeps them read-only): no range checks here.
        grid = np.packbits(instance.grid.view(np.uint8)).tobytes()
        weights = _weights(width, instance.starts.dtype)
        starts = (instance.starts @ weights).astype(cell).tobytes()
        goals = (instance.goals @ weights).astype(cell).tobytes()
        encoded = (height, width, grid, starts, goals, cell, instance.n_agents)
        self._last_instance, self._last_instance_fields = instance, encoded
        return encoded

    def _encode_trace_fast(self, positions: np.ndarray, events: np.ndarray, height: int, width: int,
                           wide: bool) -> tuple[bytes, bytes, bytes] | None:
        """:func:`encode_trace_numpy` in one numba call, for int32 positions and int8 events (what the judge and
        the reader produce); None when a point or flag is bad (the numpy path then names it)."""
        n_events_max = events.size
        need = positions.size + 5 * n_events_max  # two bytes per point: cells at most 2 bytes, 2 coordinates
        if self._scratch.size < need:
            self._scratch = np.empty(max(need, 2 * self._scratch.size), dtype=np.uint8)
        out = self._scratch
        cell_bytes, n_events = _encode_trace_kernel(positions, events, height, width, wide, out)
        if cell_bytes < 0:
            return None
        flags_at = cell_bytes + 4 * n_events_max
        return (
            out[:cell_bytes].tobytes(),
            out[cell_bytes : cell_bytes + 4 * n_events].tobytes(),
            out[flags_at : flags_at + n_events].tobytes(),
        )

    def encode_episode(self, episode: Any) -> list[Any]:
        """The v1 record (a list for msgpack) of ``episode``; checks everything the reader will check."""
        if not isinstance(episode, Episode):
            raise RecordError(f"episode = {_short(episode)}: a replays.types.Episode")
        height, width, grid, starts, goals, cell, n_agents = self._encode_instance(episode.instance)

        positions = episode.positions
        if type(positions) is not np.ndarray:
            positions = np.asarray(positions)
        shape = positions.shape
        if len(shape) != 3 or shape[1:] != (n_agents, 2) or not 1 <= shape[0] <= MAX_STEPS + 1:
            raise RecordError(
                f"positions: shape (T+1, {n_agents}, 2) with 0 <= T <= {MAX_STEPS}, got {tuple(shape)}"
            )
        n_steps = shape[0] - 1
        events = episode.events
        if type(events) is not np.ndarray:
            events = np.asarray(events)
        if events.shape != (n_steps, n_agents):
            raise RecordError(f"events: shape (T, K) = {(n_steps, n_agents)}, got {events.shape}")
        if (positions.dtype == np.int32 and events.dtype == np.int8 and positions.flags.c_contiguous
                and events.flags.c_contiguous):
            trace = self._encode_trace_fast(positions, events, height, width, cell is _U16)
        else:
            trace = None
        # The numpy path: other dtypes, and any bad point or flag (it raises with the message).
        position_bytes, event_index, event_flags = trace or encode_trace_numpy(positions, events, height, width, cell)
        if position_bytes[: len(starts)] != starts:
            raise RecordError(f"positions[0] = {np.asarray(positions)[0].tolist()}: must equal instance.starts")

        plan = episode.plan
        if plan is None:
            plan_record = None
        elif isinstance(plan, JointPlan):
            if plan.n_agents != n_agents:
                raise RecordError(f"plan: {plan.n_agents} agents, the instance has {n_agents}")
            plan_record = [plan.horizon, plan.lengths.astype(_U16).tobytes(), plan.actions.tobytes()]
        else:
            raise RecordError(f"plan = {_short(plan)}: a simulator.types.JointPlan or None")

        labels = episode.labels
        if labels is None:
            labels_record = None
        elif isinstance(labels, InstanceLabels):
            labels_record = _plain_fields(_LABEL_GETTER(labels), _LABEL_FIELDS, _LABEL_KINDS, "labels")
            problem = labels_problem(labels_record, n_agents, starts == goals)
            if problem:
                raise RecordError(problem)
        else:
            raise RecordError(f"labels = {_short(labels)}: InstanceLabels or None")

        outcome = episode.outcome
        if not isinstance(outcome, Outcome):
            raise RecordError(f"outcome = {_short(outcome)}: an Outcome")
        outcome_record = _plain_fields(_OUTCOME_GETTER(outcome), _OUTCOME_FIELDS, _OUTCOME_KINDS, "outcome")
        if not 0 <= outcome_record[2] < len(C.FAILURE_NAMES):
            raise RecordError(f"outcome.failure = {outcome_record[2]}: a code 0..{len(C.FAILURE_NAMES) - 1}")
        prompt_tokens, completion_tokens = episode.prompt_tokens, episode.completion_tokens
        if type(prompt_tokens) is not int or prompt_tokens < 0:
            prompt_tokens = _int(prompt_tokens, "prompt_tokens", 0)
        if type(completion_tokens) is not int or completion_tokens < 0:
            completion_tokens = _int(completion_tokens, "completion_tokens", 0)
        return [
            height,
            width,
            grid,
            starts,
            goals,
            labels_record,
            plan_record,
            _short_text(episode.parse_error, "parse_error"),
            position_bytes,
            event_index,
            event_flags,
            outcome_record,
            _compact_float(_float(episode.reward, "reward")),
            _number_map_out(episode.reward_components, "reward_components"),
            _short_text(episode.prompt, "prompt"),
            _short_text(episode.completion, "completion"),
            prompt_tokens,
            completion_tokens,
            _number_map_out(episode.timings, "timings"),
            _compact_float(_float(episode.slip, "slip")),
            _plain_map_out(episode.extra, "extra"),
        ]

    # --- episodes: decoding --------------------------------------------------------------------------------
    def decode_episode(self, record: Any, where: tuple[str | None, int]) -> LazyEpisode:
        """Check a record's structure and return a :class:`LazyEpisode` (arrays decoded on first access).

        ``where`` = ``(path, index)`` names the episode in errors raised later by the lazy fields.
        """
        if type(record) is not list or len(record) != _N_FIELDS_V1:
            got = f"{len(record)} items" if type(record) is list else type(record).__name__
            raise RecordError(f"an episode record is an array of {_N_FIELDS_V1} fields, got {got}")
        (height, width, grid, starts, goals, labels, plan, parse_error, positions, event_index, event_flags,
         outcome, reward, reward_components, prompt, completion, prompt_tokens, completion_tokens, timings,
         slip, extra) = record

        # The map and the agents: every declared size must match the bytes that carry it.
        if not _is_int(height) or not 1 <= height <= C.MAX_SIDE:
            raise RecordError(f"height = {_short(height)}: an integer 1..{C.MAX_SIDE}")
        if not _is_int(width) or not 1 <= width <= C.MAX_SIDE:
            raise RecordError(f"width = {_short(width)}: an integer 1..{C.MAX_SIDE}")
        n_cells = height * width
        if type(grid) is not bytes or len(grid) != (n_cells + 7) // 8:
            raise RecordError(f"grid: {(n_cells + 7) // 8} bytes of packed bits for {height}x{width}, got {_size(grid)}")
        cell_size = 1 if n_cells <= 256 else 2
        if type(starts) is not bytes or len(starts) % cell_size or not 1 <= len(starts) // cell_size <= C.MAX_AGENTS:
            raise RecordError(f"starts: 1..{C.MAX_AGENTS} cells of {cell_size} byte(s), got {_size(starts)}")
        n_agents = len(starts) // cell_size
        if type(goals) is not bytes or len(goals) != len(starts):
            raise RecordError(f"goals: {len(starts)} bytes (one cell per agent), got {_size(goals)}")
        row_size = n_agents * cell_size
        if type(positions) is not bytes or not positions or len(positions) % row_size:
            raise RecordError(f"positions: (T+1) rows of {row_size} bytes, got {_size(positions)}")
        n_steps = len(positions) // row_size - 1
        if n_steps > MAX_STEPS:
            raise RecordError(f"positions: {n_steps} steps, at most {MAX_STEPS}")
        if type(event_flags) is not bytes or len(event_flags) > n_steps * n_agents:
            raise RecordError(f"event_flags: at most T*K = {n_steps * n_agents} bytes, got {_size(event_flags)}")
        if type(event_index) is not bytes or len(event_index) != 4 * len(event_flags):
            raise RecordError(f"event_index: 4 bytes per event ({len(event_flags)} events), got {_size(event_index)}")

        if plan is not None:
            if type(plan) is not list or len(plan) != 3:
                raise RecordError(f"plan: nil or [horizon, lengths, actions], got {_short(plan)}")
            horizon, lengths, actions = plan
            if not _is_int(horizon) or not 0 <= horizon <= C.MAX_PLAN_LENGTH:
                raise RecordError(f"plan horizon = {_short(horizon)}: an integer 0..{C.MAX_PLAN_LENGTH}")
            if type(lengths) is not bytes or len(lengths) != 2 * n_agents:
                raise RecordError(f"plan lengths: {2 * n_agents} bytes (uint16 per agent), got {_size(lengths)}")
            if type(actions) is not bytes or len(actions) != n_agents * horizon:
                raise RecordError(f"plan actions: {n_agents * horizon} bytes (K x horizon), got {_size(actions)}")

        if labels is not None:
            if type(labels) is not list or len(labels) != 7:
                raise RecordError(f"labels: nil or an array of 7, got {_short(labels)}")
            *numbers, needs_wait = labels
            if not all(_is_int(number) for number in numbers) or type(needs_wait) is not bool:
                raise RecordError(f"labels = {_short(labels)}: 6 integers and a bool")
            problem = labels_problem(labels, n_agents, starts == goals)
            if problem:
                raise RecordError(problem)
            labels = InstanceLabels(**dict(zip(_LABEL_FIELDS, labels)))

        if type(outcome) is not list or len(outcome) != 8:
            raise RecordError(f"outcome: an array of 8, got {_short(outcome)}")
        valid, optimal, failure, fail_step, fail_agent, makespan, sum_of_costs, agents_on_goal = outcome
        if type(valid) is not bool or type(optimal) is not bool:
            raise RecordError(f"outcome = {_short(outcome)}: valid and optimal are bools")
        if not _is_int(failure) or not 0 <= failure < len(C.FAILURE_NAMES):
            raise RecordError(f"outcome.failure = {_short(failure)}: a code 0..{len(C.FAILURE_NAMES) - 1}")
        if not (_is_int(fail_step) and _is_int(fail_agent) and _is_int(makespan) and _is_int(sum_of_costs)
                and _is_int(agents_on_goal)):
            raise RecordError(f"outcome = {_short(outcome)}: integers after the failure code")

        if not _is_int(prompt_tokens) or prompt_tokens < 0 or not _is_int(completion_tokens) or completion_tokens < 0:
            raise RecordError(f"token counts = {_short([prompt_tokens, completion_tokens])}: integers >= 0")
        for name, text in (("parse_error", parse_error), ("prompt", prompt), ("completion", completion)):
            if text is not None and type(text) is not str:
                raise RecordError(f"{name} = {_short(text)}: a string or nil")
        if type(extra) is not dict:
            raise RecordError(f"extra = {_short(extra)}: a map")

        episode = LazyEpisode.__new__(LazyEpisode)
        episode.__dict__.update(
            labels=labels,
            parse_error=parse_error,
            outcome=_outcome_of(outcome),
            reward=_number_in(reward, "reward"),
            reward_components=_number_map_in(reward_components, "reward_components"),
            prompt=prompt,
            completion=completion,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            timings=_number_map_in(timings, "timings"),
            slip=_number_in(slip, "slip"),
            extra=extra,
            _record=record,
            _where=where,
            _decoders=_LAZY_DECODERS_V1,
        )
        return episode


def _size(value: Any) -> str:
    return f"{len(value)} bytes" if type(value) is bytes else type(value).__name__


def _number_in(value: Any, name: str) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise RecordError(f"{name} = {_short(value)}: a number")


# --- v1 lazy decoders (content checks live here) --------------------------------------------------------------
def _decode_instance_v1(record: list[Any]) -> Instance:
    # GRPO groups and evaluation suites repeat one instance many times: decode (and validate) each once.
    # Instances are immutable (read-only arrays), so sharing one object between episodes is safe.
    global _instance_cache_cells
    key = tuple(record[:5])
    instance = _INSTANCE_CACHE.get(key)
    if instance is None:
        instance = _build_instance_v1(*key)
        cells = key[0] * key[1]
        if len(_INSTANCE_CACHE) >= _INSTANCE_CACHE_SIZE or _instance_cache_cells + cells > _INSTANCE_CACHE_CELLS:
            _INSTANCE_CACHE.clear()  # crude but bounded: a cache of recent instances, not of all of them
            _instance_cache_cells = 0
        _INSTANCE_CACHE[key] = instance
        _instance_cache_cells += cells
    return instance


_INSTANCE_CACHE: dict[tuple[Any, ...], Instance] = {}  # (height, width, grid, starts, goals) bytes -> Instance
_INSTANCE_CACHE_SIZE = 4096  # instances
_INSTANCE_CACHE_CELLS = 2**22  # map cells in all (about 4.5 MiB of grids and keys at most)
_instance_cache_cells = 0


def _build_instance_v1(height: int, width: int, grid_bytes: bytes, start_bytes: bytes, goal_bytes: bytes) -> Instance:
    n_cells = height * width
    spare_bits = len(grid_bytes) * 8 - n_cells
    if spare_bits and grid_bytes[-1] & ((1 << spare_bits) - 1):
        raise RecordError("grid: the padding bits after the last cell must be 0")
    grid = np.unpackbits(np.frombuffer(grid_bytes, dtype=np.uint8), count=n_cells).reshape(height, width)
    cell = _cell_dtype(height, width)
    starts = _points_from_cells(start_bytes, height, width, cell, "starts")
    goals = _points_from_cells(goal_bytes, height, width, cell, "goals")
    try:
        return Instance(grid=grid.view(np.int8), starts=starts, goals=goals)
    except ConfigError as exc:
        raise RecordError(str(exc)) from None


def _decode_positions_v1(record: list[Any]) -> npt.NDArray[np.int32]:
    height, width, _, start_bytes = record[:4]
    position_bytes = record[8]
    if position_bytes[: len(start_bytes)] != start_bytes:
        raise RecordError("row 0 must equal the instance's starts")
    n_agents = len(start_bytes) // (1 if height * width <= 256 else 2)
    points = _points_from_cells(position_bytes, height, width, _cell_dtype(height, width), "positions")
    return points.reshape(-1, n_agents, 2)


def _decode_events_v1(record: list[Any]) -> npt.NDArray[np.int8]:
    height, width, _, start_bytes = record[:4]
    cell_size = 1 if height * width <= 256 else 2
    n_agents = len(start_bytes) // cell_size
    n_steps = len(record[8]) // (n_agents * cell_size) - 1
    index_bytes, flag_bytes = record[9], record[10]
    events = np.zeros(n_steps * n_agents, dtype=np.int8)
    if flag_bytes:
        if flag_bytes.translate(None, _EVENT_FLAG_BYTES):
            bad = next(i for i, code in enumerate(flag_bytes) if code not in _EVENT_FLAG_BYTES)
            raise RecordError(f"flag {flag_bytes[bad]} of event {bad}: nonzero, only the EV_* bits ({_KNOWN_EVENT_BITS})")
        index = np.frombuffer(index_bytes, dtype=_U32)
        if int(index[-1]) >= n_steps * n_agents or (index.size > 1 and not (np.diff(index.astype(np.int64)) > 0).all()):
            raise RecordError(f"event index: strictly increasing, below T*K = {n_steps * n_agents}")
        events[index] = np.frombuffer(flag_bytes, dtype=np.int8)
    return events.reshape(n_steps, n_agents)


def _decode_plan_v1(record: list[Any]) -> JointPlan | None:
    plan = record[6]
    if plan is None:
        return None
    horizon, length_bytes, action_bytes = plan
    if action_bytes.translate(None, _ACTION_BYTES):
        bad = next(i for i, code in enumerate(action_bytes) if code >= C.N_ACTIONS)
        k, t = divmod(bad, horizon)
        raise RecordError(f"actions[{k}][{t}] = {action_bytes[bad]}: an action code 0..{C.N_ACTIONS - 1}")
    lengths = np.frombuffer(length_bytes, dtype=_U16)
    actions = np.frombuffer(action_bytes, dtype=np.int8).reshape(lengths.size, horizon)
    if lengths.size and int(lengths.max()) > horizon:
        raise RecordError(f"lengths = {lengths.tolist()}: each at most the horizon {horizon}")
    if (actions[np.arange(horizon)[None, :] >= lengths[:, None]] != C.WAIT).any():
        raise RecordError("actions after an agent's length must be WAIT (0)")
    try:
        return JointPlan(actions=actions, lengths=lengths)
    except ConfigError as exc:
        raise RecordError(str(exc)) from None


_LAZY_DECODERS_V1: dict[str, Callable[[list[Any]], Any]] = {
    "instance": _decode_instance_v1,
    "positions": _decode_positions_v1,
    "events": _decode_events_v1,
    "plan": _decode_plan_v1,
}
