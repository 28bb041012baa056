"""The stage config: the small document an environment engineer writes to set the next stage's data.

Document format
---------------
A YAML or JSON mapping. ``agents``, ``samples`` and ``sizes`` are required; the rest are optional::

    agents: 2            # agents per instance: an integer, or an inclusive range [min, max] such as [2, 3]
    samples: 4000        # instances in the stage, 1..1,000,000
    seed: 0              # generator seed, 0 <= seed < 2**63 (default 0)
    slip: 0.0            # slippery-ice probability in [0, 1] (default 0.0: deterministic moves)
    horizon: null        # max plan length per agent, 1..4096, or null to let the generator derive it
    sizes:               # square map side -> how that size is sampled; sides 3..32 (the benchmark uses 3..10)
      "4": {data_ratio: 0.25, hole_ratio: 0.2, wait_ratio: 0.3}
      "6": {data_ratio: 0.75, hole_ratio: 0.3, wait_ratio: 0.5}

Per size: ``data_ratio`` is that size's share of the stage's samples (the shares sum to 1 within 1e-6; 0 keeps a
size listed but unused), ``hole_ratio`` the share of cells that are holes (at most 0.9), ``wait_ratio`` the share
of that size's instances whose optimal solution needs at least one agent to wait. Optional per size,
``min_makespan`` and ``max_makespan`` (integers 1..4096, or null: no bound) keep only instances whose optimal
makespan lies between them, the length of plan the stage asks for (e.g. ``{..., min_makespan: 2, max_makespan: 4}``).

Canonical form (what :meth:`StageConfig.to_dict` and :func:`save_config` write): keys in the order above, every
optional top-level key written out (a size's makespan bounds only when set, so documents without them read and
write as before), ``agents`` as an integer when min == max and as ``[min, max]`` otherwise, size keys as
decimal strings without leading zeros (``"4"``; JSON allows only string keys) in ascending numeric order, floats
written with ``repr`` so they load back bit for bit. Input may also use integer size keys (YAML ``4:``).

Rules checked on construction (each failure raises :class:`simulator.errors.ConfigError` naming the field in
the document's dotted form, e.g. ``sizes.6.hole_ratio``, the value and the allowed range; nothing is rewritten):

* ratios are real numbers (not booleans or strings), finite, in [0, 1]; ``hole_ratio`` <= 0.9;
* the ``data_ratio`` values sum to 1 within 1e-6; at least one size; sides are integers 3..32;
* ``1 <= agents min <= agents max <= 16``; ``1 <= samples <= 1,000,000``; ``slip`` in [0, 1];
  ``horizon`` null or 1..4096; ``seed`` an integer in [0, 2**63);
* capacity, for every size in use (``data_ratio > 0``): a side ``s`` map has
  ``holes = round_half_up(hole_ratio * s * s)`` holes (:meth:`SizeSpec.hole_count`) and
  ``free = s * s - holes`` free cells, and needs ``free >= agents max``. The reason: starts are distinct among
  themselves and so are goals (an agent's start may be its own goal), so K agents need K free cells and no more;
* a size in use with ``wait_ratio > 0`` needs ``agents max >= 2``: a lone agent never has to wait;
* ``min_makespan`` <= ``max_makespan`` when both are set;
* unknown keys are rejected with the list of allowed keys; duplicate keys (also ``4`` next to ``"4"``) too.

Sizes with ``data_ratio == 0`` are range-checked but skip the capacity and wait rules: they produce nothing.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from simulator import constants as C
from simulator.atomic import atomic_write
from simulator.documents import checked_int as _checked_int
from simulator.documents import checked_real as _checked_real
from simulator.documents import is_integer as _is_integer
from simulator.errors import ConfigError
from simulator.fields import REQUIRED, allowed_of, integer, number, schema_property
from simulator.files import (MAX_CONFIG_BYTES, MAX_DEPTH, MAX_INT_DIGITS, cut, read_text_bounded,
                             reject_duplicate_json_keys)

# --- limits of the document ----------------------------------------------------------------------------------
MIN_SIZE = 3  # smallest map side a stage may sample
MAX_SIZE = 32  # largest map side a stage may sample (the published benchmark stops at 10)
MAX_STAGE_AGENTS = 16  # most agents per instance in a stage (the simulator itself allows C.MAX_AGENTS)
MAX_SAMPLES = 1_000_000  # most instances in one stage
MAX_HOLE_RATIO = 0.9  # beyond this a map is mostly holes and almost never solvable
MAX_HORIZON = C.MAX_PLAN_LENGTH  # a horizon longer than the judge accepts would be useless
MAX_SEED = 2**63 - 1  # seeds must fit a signed 64-bit integer (numba kernels, numpy generators)
DATA_RATIO_TOLERANCE = 1e-6  # how far the data ratios' sum may be from 1

TOP_LEVEL_KEYS = ("agents", "samples", "seed", "slip", "horizon", "sizes")
REQUIRED_KEYS = ("agents", "samples", "sizes")
SIZE_KEYS = ("data_ratio", "hole_ratio", "wait_ratio", "min_makespan", "max_makespan")
REQUIRED_SIZE_KEYS = SIZE_KEYS[:3]
FORMATS = ("yaml", "json")
_SIZES_ALLOWED = "a non-empty mapping of map side -> {data_ratio, hole_ratio, wait_ratio}"
_SUFFIX_FORMATS = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}


def _reject_unknown_keys(data: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in data:
        if key not in allowed:
            field = f"{where}.{key}" if where else str(key)
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else ""
            raise ConfigError(field, key, f"a known key: one of {', '.join(allowed)}", hint)


def _size_key(key: Any) -> int:
    """A document's size key (``4`` or ``"4"``) as an int; other spellings raise."""
    if _is_integer(key):
        side = int(key)
    elif isinstance(key, str) and re.fullmatch(r"[1-9][0-9]*", key):
        side = int(key)
    else:
        raise ConfigError(
            f"sizes.{key}", key, f'a map side as an integer {MIN_SIZE}..{MAX_SIZE}, written 4 or "4" (no leading zeros)'
        )
    if not MIN_SIZE <= side <= MAX_SIZE:
        raise ConfigError(f"sizes.{key}", key, f"a map side {MIN_SIZE} <= side <= {MAX_SIZE}")
    return side


def _makespan_bound(what: str) -> str:
    return f"Optional, 1..{MAX_HORIZON} or null (default: no bound): only instances whose optimal makespan is {what}"


def _bounds(cls: Any, name: str) -> tuple[Any, Any]:
    """The ``(low, high)`` field ``name`` of ``cls`` declares (:mod:`simulator.fields`)."""
    allowed = allowed_of(cls, name)
    return allowed.low, allowed.high


@dataclass(frozen=True)
class SizeSpec:
    """How one map size is sampled in a stage. Validated on construction (fields named bare, e.g. ``hole_ratio``;
    inside a :class:`StageConfig` document they are reported as ``sizes.<side>.<field>``)."""

    data_ratio: float = number(REQUIRED, 0, 1, description=(
        "Share of the stage's samples drawn at this size, 0..1. The data_ratio values of all sizes must sum to 1 "
        "(within 1e-6). 0 keeps the size listed but unused."))
    """Share of the stage's samples drawn at this size, in [0, 1]; 0 keeps the size listed but unused."""
    hole_ratio: float = number(REQUIRED, 0, MAX_HOLE_RATIO, description=(
        f"Share of the map's cells that are holes, 0..{MAX_HOLE_RATIO}. A side-s map gets round(hole_ratio*s*s) "
        "holes (halves round up), and the cells left free must be at least the largest agent count. More holes "
        "make paths longer and instances harder."))
    """Share of this size's cells that are holes, in [0, 0.9]; see :meth:`hole_count` for the exact count."""
    wait_ratio: float = number(REQUIRED, 0, 1, description=(
        "Share of this size's instances whose optimal solution needs at least one agent to wait to resolve a "
        "conflict, 0..1. Must be 0 when every instance has a single agent."))
    """Share of this size's instances whose optimal solution needs at least one agent to wait, in [0, 1]."""
    min_makespan: int | None = integer(None, 1, MAX_HORIZON, optional=True, description=_makespan_bound(
        "at least this. With max_makespan it sets how long the plans this size asks for are (the steps the best "
        "joint plan takes)."))
    """Least optimal makespan of this size's instances, 1..MAX_HORIZON; None: no lower bound."""
    max_makespan: int | None = integer(None, 1, MAX_HORIZON, optional=True, description=_makespan_bound(
        "at most this (at least min_makespan). Small values put agents near their goals."))
    """Greatest optimal makespan of this size's instances, 1..MAX_HORIZON; None: no upper bound."""

    def __post_init__(self) -> None:
        for name in ("data_ratio", "hole_ratio", "wait_ratio"):
            object.__setattr__(self, name, _checked_real(getattr(self, name), name, *_bounds(SizeSpec, name)))
        for name in ("min_makespan", "max_makespan"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _checked_int(getattr(self, name), name, *_bounds(SizeSpec, name)))
        if self.min_makespan is not None and self.max_makespan is not None and self.min_makespan > self.max_makespan:
            raise ConfigError("max_makespan", self.max_makespan, f"at least min_makespan ({self.min_makespan})")

    def makespan_bounds(self) -> tuple[int, int]:
        """``(least, greatest)`` optimal makespan this size's instances may have (1 and MAX_HORIZON when unset)."""
        return (self.min_makespan or 1, self.max_makespan or MAX_HORIZON)

    def hole_count(self, side: int) -> int:
        """Holes on a ``side x side`` map: ``hole_ratio * side**2`` rounded half up, computed exactly.

        Exact rational arithmetic on the float's true value, so the answer never depends on floating-point
        rounding (``0.3 * 100`` is 30.000000000000004 in floats; this returns 30). The generator uses this count.
        """
        return math.floor(Fraction(self.hole_ratio) * side * side + Fraction(1, 2))

    def free_cells(self, side: int) -> int:
        """Ice cells on a ``side x side`` map: ``side**2 - hole_count(side)``."""
        return side * side - self.hole_count(side)

    def to_dict(self) -> dict[str, float | int]:
        """The three ratios, then each makespan bound that is set (an unset bound is left out)."""
        out: dict[str, float | int] = {"data_ratio": self.data_ratio, "hole_ratio": self.hole_ratio,
                                       "wait_ratio": self.wait_ratio}
        for name in ("min_makespan", "max_makespan"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> "SizeSpec":
        """Build from ``{data_ratio, hole_ratio, wait_ratio}`` (all three required) and the optional
        ``min_makespan`` / ``max_makespan`` (null or absent: no bound).

        ``where`` prefixes the field names in errors, e.g. ``"sizes.6"`` gives ``sizes.6.hole_ratio``.
        """
        prefix = f"{where}." if where else ""
        if not isinstance(data, Mapping):
            raise ConfigError(where or "size", data, "a mapping {data_ratio: .., hole_ratio: .., wait_ratio: ..}")
        _reject_unknown_keys(data, SIZE_KEYS, where)
        for key in REQUIRED_SIZE_KEYS:
            if key not in data:
                raise ConfigError(
                    f"{prefix}{key}", None, "present: every size sets data_ratio, hole_ratio and wait_ratio"
                )
        try:
            return cls(data_ratio=data["data_ratio"], hole_ratio=data["hole_ratio"], wait_ratio=data["wait_ratio"],
                       min_makespan=data.get("min_makespan"), max_makespan=data.get("max_makespan"))
        except ConfigError as error:
            raise ConfigError(f"{prefix}{error.field}", error.value, error.allowed) from None


class SizeTable(Mapping[int, "SizeSpec"]):
    """A read-only, hashable, picklable mapping ``side (int) -> SizeSpec``, iterated in ascending side order."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[int, SizeSpec]) -> None:
        self._entries = {side: entries[side] for side in sorted(entries)}

    def __getitem__(self, side: int) -> SizeSpec:
        return self._entries[side]

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self._entries == dict(other.items())

    def __hash__(self) -> int:
        return hash(tuple(self._entries.items()))

    def __repr__(self) -> str:
        return f"SizeTable({self._entries!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"_entries": self._entries}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._entries = state["_entries"]


@dataclass(frozen=True)
class StageConfig:
    """The sampling distribution of one training stage. Validated on construction (see the module docstring for
    every rule); errors name the document's fields (``agents``, ``sizes.6.hole_ratio``), not the attributes.

    Build it from a document with :meth:`from_dict`, :func:`load_config` or :func:`parse_config_text`; change a
    field with ``dataclasses.replace(cfg, samples=...)``, which validates again.
    """

    agents_min: int
    """Fewest agents in an instance, 1..16 (the document's ``agents``, or its range's first entry)."""
    agents_max: int
    """Most agents in an instance, agents_min..16 (equal to ``agents_min`` for a fixed count)."""
    samples: int = integer(REQUIRED, 1, MAX_SAMPLES, description=(
        f"Number of instances in the stage, 1..{MAX_SAMPLES}, split among sizes by data_ratio."))
    """Instances in the stage, 1..1,000,000, split among sizes by :meth:`size_counts`."""
    sizes: Mapping[int, SizeSpec]  # type: ignore[misc]  # samples' declaration has no default (REQUIRED)
    """Map side (3..32) -> how that size is sampled; stored as a read-only :class:`SizeTable` in ascending order."""
    seed: int = integer(0, 0, MAX_SEED, description=(
        "Generator seed (default 0). The same config and seed give the same instances."))
    """Generator seed, 0 <= seed < 2**63: the same config and seed give the same instances."""
    slip: float = number(0.0, 0, 1, description=(
        "Slippery ice: probability that a move slips sideways, 0..1 (default 0: moves are exact)."))
    """Probability that a move slips sideways (slippery ice), in [0, 1]; 0 is deterministic."""
    horizon: int | None = integer(None, 1, MAX_HORIZON, optional=True, description=(
        f"Maximum plan length per agent, 1..{MAX_HORIZON}, or null (default) to derive it from each instance."))
    """Max plan length per agent, 1..4096; None lets the generator derive it from the instance."""

    def __post_init__(self) -> None:
        agents_min = _checked_int(self.agents_min, "agents", 1, MAX_STAGE_AGENTS)
        agents_max = _checked_int(self.agents_max, "agents", 1, MAX_STAGE_AGENTS)
        if agents_min > agents_max:
            raise ConfigError("agents", [agents_min, agents_max], "a range [min, max] with min <= max")
        object.__setattr__(self, "agents_min", agents_min)
        object.__setattr__(self, "agents_max", agents_max)
        object.__setattr__(self, "samples", _checked_int(self.samples, "samples", *_bounds(StageConfig, "samples")))
        object.__setattr__(self, "seed", _checked_int(self.seed, "seed", *_bounds(StageConfig, "seed")))
        object.__setattr__(self, "slip", _checked_real(self.slip, "slip", *_bounds(StageConfig, "slip")))
        if self.horizon is not None:
            object.__setattr__(self, "horizon", _checked_int(self.horizon, "horizon", *_bounds(StageConfig, "horizon")))
        object.__setattr__(self, "sizes", self._checked_sizes(self.sizes, agents_max))

    @staticmethod
    def _checked_sizes(sizes: Any, agents_max: int) -> SizeTable:
        if not isinstance(sizes, Mapping) or not sizes:
            raise ConfigError("sizes", sizes, _SIZES_ALLOWED)
        for side, spec in sizes.items():
            if not _is_integer(side) or not MIN_SIZE <= side <= MAX_SIZE:
                raise ConfigError(f"sizes.{side}", side, f"a map side: an integer {MIN_SIZE} <= side <= {MAX_SIZE}")
            if not isinstance(spec, SizeSpec):
                raise ConfigError(f"sizes.{side}", spec, "a SizeSpec")
        table = SizeTable({int(side): spec for side, spec in sizes.items()})
        # Exact sum: the tolerance test must not itself depend on the order floats are added in.
        ratio_sum = float(sum(Fraction(spec.data_ratio) for spec in table.values()))
        if abs(ratio_sum - 1.0) > DATA_RATIO_TOLERANCE:
            raise ConfigError(
                "sizes.*.data_ratio", ratio_sum, f"data_ratio values summing to 1 (within {DATA_RATIO_TOLERANCE:g})"
            )
        for side, spec in table.items():
            if spec.data_ratio == 0:
                continue  # listed but unused: it produces no instance, so capacity does not matter
            if side * side < agents_max:
                raise ConfigError(
                    f"sizes.{side}", side, f"a side with at least {agents_max} cells for {agents_max} agents",
                    "use a larger size, fewer agents, or data_ratio 0",
                )
            free = spec.free_cells(side)
            if free < agents_max:
                safe_ratio = (side * side - agents_max) / (side * side)
                raise ConfigError(
                    f"sizes.{side}.hole_ratio",
                    spec.hole_ratio,
                    f"at most {safe_ratio:.6g} on a {side}x{side} map with up to {agents_max} agents: "
                    f"starts must be distinct, so at least {agents_max} cells must stay free",
                    f"{spec.hole_count(side)} holes leave {free} free cells",
                )
            if spec.wait_ratio > 0 and agents_max < 2:
                raise ConfigError(
                    f"sizes.{side}.wait_ratio", spec.wait_ratio, "0 when every instance has 1 agent",
                    "a lone agent never has to wait",
                )
        return table

    # --- views ------------------------------------------------------------------------------------------------
    @property
    def agents(self) -> int | tuple[int, int]:
        """The document's ``agents``: an int for a fixed count, ``(min, max)`` for a range."""
        return self.agents_min if self.agents_min == self.agents_max else (self.agents_min, self.agents_max)

    def agent_counts(self) -> tuple[int, ...]:
        """Every agent count the stage may use, ascending: ``agents_min..agents_max`` inclusive."""
        return tuple(range(self.agents_min, self.agents_max + 1))

    def used_sizes(self) -> tuple[int, ...]:
        """Sides with ``data_ratio > 0``, ascending."""
        return tuple(side for side, spec in self.sizes.items() if spec.data_ratio > 0)

    def size_counts(self) -> dict[int, int]:
        """Split ``samples`` among sizes by ``data_ratio`` (largest-remainder method), summing exactly to samples.

        Each size's quota is ``samples * data_ratio / sum(data_ratio)`` in exact rational arithmetic (dividing by
        the sum absorbs the 1e-6 tolerance). Each size first gets the floor of its quota; the samples left over
        (fewer than the number of sizes) go one each to the sizes with the largest fractional parts, ties broken
        by the smaller side first. A size with ``data_ratio == 0`` always gets 0. Returns every listed side,
        ascending, zeros included.
        """
        weights = {side: Fraction(spec.data_ratio) for side, spec in self.sizes.items()}
        total = sum(weights.values())
        quotas = {side: self.samples * weight / total for side, weight in weights.items()}
        counts = {side: math.floor(quota) for side, quota in quotas.items()}
        leftover = self.samples - sum(counts.values())
        by_remainder = sorted(quotas, key=lambda side: (-(quotas[side] - counts[side]), side))
        for side in by_remainder[:leftover]:
            counts[side] += 1
        return counts

    # --- documents --------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The canonical document (a fresh dict of plain Python values, JSON- and YAML-ready)."""
        agents = self.agents
        return {
            "agents": list(agents) if isinstance(agents, tuple) else agents,
            "samples": self.samples,
            "seed": self.seed,
            "slip": self.slip,
            "horizon": self.horizon,
            "sizes": {str(side): spec.to_dict() for side, spec in self.sizes.items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> "StageConfig":
        """Build from a document (a mapping as loaded from YAML or JSON); raises ConfigError on any problem."""
        if not isinstance(data, Mapping):
            raise ConfigError("config", data, f"a mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
        _reject_unknown_keys(data, TOP_LEVEL_KEYS, "")
        for key in REQUIRED_KEYS:
            if key not in data:
                raise ConfigError(key, None, f"present: {', '.join(REQUIRED_KEYS)} are required")
        agents_min, agents_max = _parse_agents(data["agents"])
        sizes_doc = data["sizes"]
        if not isinstance(sizes_doc, Mapping) or not sizes_doc:
            raise ConfigError("sizes", sizes_doc, _SIZES_ALLOWED)
        sizes: dict[int, SizeSpec] = {}
        for key, entry in sizes_doc.items():
            side = _size_key(key)
            if side in sizes:
                raise ConfigError(f"sizes.{key}", key, "each map side listed once", f"side {side} appears twice")
            sizes[side] = SizeSpec.from_dict(entry, where=f"sizes.{side}")
        return cls(
            agents_min=agents_min,
            agents_max=agents_max,
            samples=data["samples"],
            sizes=sizes,
            seed=data.get("seed", 0),
            slip=data.get("slip", 0.0),
            horizon=data.get("horizon"),
        )


def _parse_agents(value: Any) -> tuple[int, int]:
    allowed = f"an integer 1..{MAX_STAGE_AGENTS}, or an inclusive range [min, max] of such integers"
    if _is_integer(value):
        return int(value), int(value)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_integer(entry) for entry in value):
        return int(value[0]), int(value[1])
    raise ConfigError("agents", value, allowed)


def default_stage_config() -> StageConfig:
    """A sensible first stage: 2 agents, 2000 samples, sizes 3..6 equally, 20% holes, 30% needing a wait."""
    spec = SizeSpec(data_ratio=0.25, hole_ratio=0.2, wait_ratio=0.3)
    return StageConfig(agents_min=2, agents_max=2, samples=2000, sizes={side: spec for side in (3, 4, 5, 6)}, seed=0)


# --- text and files ------------------------------------------------------------------------------------------
class _StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys and anchors/aliases, and reads ``1e-3`` as a number.

    PyYAML follows YAML 1.1, where a float needs a dot (``1e-3`` would load as the *string* "1e-3"); YAML 1.2
    and JSON read it as a number, and an engineer model writing ``hole_ratio: 1e-3`` means the number. Aliases
    are refused because a few hundred bytes of them expand into gigabytes (a "billion laughs" document); no
    config needs them.
    """

    _depth = 0  # lists and mappings open around the node being composed (bounded: no RecursionError)

    def compose_node(self, parent: Any, index: Any) -> Any:
        # The two ignores: types-PyYAML leaves Parser.peek_event unannotated.
        if self.check_event(yaml.AliasEvent) or getattr(
                self.peek_event(), "anchor", None) is not None:  # type: ignore[no-untyped-call]
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(None, None, "anchors and aliases are not accepted", event.start_mark)
        if self._depth >= MAX_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(None, None, f"lists or mappings nested more than {MAX_DEPTH} deep",
                                              event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = str(node.value).replace("_", "").lstrip("+-").lstrip("0")
        if len(digits) > MAX_INT_DIGITS:  # counted before conversion: int() refuses 4,300 digits with a ValueError
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(digits):,} digits ({cut(str(node.value))}): at most "
                f"{MAX_INT_DIGITS} digits are allowed", node.start_mark)
        text = str(node.value).replace("_", "").lstrip("+-")
        if (len(text) > 1 and text[0] == "0" and text[1:].isdigit()) or ":" in text:
            # YAML 1.1 reads 010 as octal 8 and 1:30 as 90: a size key 010 became side 8 without a word
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is a YAML 1.1 octal or base-60 number, not what it looks like "
                "(write it without a leading zero or colon, or quote it)", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)  # resolve `<<` merge keys first, so merged keys are not called duplicates
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key; the base class reports it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_exponent_floats(loader: type[yaml.SafeLoader]) -> None:
    """Make ``loader`` read ``1e-3`` (a float without a dot) as a number, as JSON and YAML 1.2 do; PyYAML's
    YAML 1.1 rules read it as the string "1e-3". Every YAML reader of the project (config files, ``--set``
    values, engineer answers) follows this one rule."""
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )


_StrictYamlLoader.add_constructor("tag:yaml.org,2002:int", _StrictYamlLoader.construct_yaml_int)
read_exponent_floats(_StrictYamlLoader)


def load_yaml(text: str) -> Any:
    """Plain data from YAML text, read the way every config file and ``--set`` value of the project is: safe
    (no Python objects), duplicate keys and anchors/aliases refused, ``1e-3`` a number. Raises ``yaml.YAMLError``
    (callers turn it into a ConfigError naming their source) and RecursionError for absurdly deep nesting."""
    return yaml.load(text, Loader=_StrictYamlLoader)  # a SafeLoader subclass: builds plain values only


def _check_format(format: str, source: str) -> str:
    normalised = {"yml": "yaml"}.get(format, format)
    if normalised not in FORMATS:
        raise ConfigError(f"{source} format", format, "'yaml' (or 'yml') or 'json'")
    return normalised


def parse_config_text(text: str, format: str, source: str = "<text>") -> StageConfig:
    """Parse a document in ``format`` ("yaml", "yml" or "json") into a StageConfig.

    Raises ConfigError for everything: text that is empty, not valid YAML/JSON, or not a mapping names
    ``source`` as the field and gives the parser's reason; a content error names the document field (e.g.
    ``sizes.6.hole_ratio``) and its message starts with ``source``.
    """
    format = _check_format(format, source)
    if not isinstance(text, str):
        raise ConfigError(source, type(text).__name__, f"a {format.upper()} document as a str")
    if not text.strip():
        raise ConfigError(source, text, f"a {format.upper()} mapping of the stage config", "the document is empty")
    try:
        if format == "yaml":
            data = load_yaml(text)
        else:
            data = json.loads(text, object_pairs_hook=reject_duplicate_json_keys)
    except (yaml.YAMLError, ValueError, RecursionError) as error:
        # PyYAML calls the text "<unicode string>"; name the real source and fold its multi-line report.
        reason = " ".join(str(error).replace('"<unicode string>"', source).split())
        raise ConfigError(source, text, f"valid {format.upper()}", reason) from None
    if data is None:
        raise ConfigError(source, text, f"a {format.upper()} mapping of the stage config", "the document is empty")
    if not isinstance(data, Mapping):
        wanted = f"a {format.upper()} mapping of the stage config"
        raise ConfigError(source, data, wanted, f"the document is of type {type(data).__name__}")
    try:
        return StageConfig.from_dict(data)
    except ConfigError as error:
        if source != "<text>":
            error.args = (f"{source}: {error.args[0]}",)  # keep field/value/allowed; say which file
        raise


def format_config_text(cfg: StageConfig, format: str) -> str:
    """The canonical document as text: YAML in block style with one flow-style line per size, or indented JSON.

    Floats are written with ``repr`` (JSON) or PyYAML's repr-based writer, so parsing the text gives back an
    equal config, floats bit for bit.
    """
    format = _check_format(format, "<text>")
    document = cfg.to_dict()
    if format == "json":
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=None, allow_unicode=True, width=120)


def format_for_path(path: Path, allowed: str = "a file ending in .yaml, .yml or .json") -> str:
    """``"json"`` or ``"yaml"`` by the file's suffix (any case); another suffix: ConfigError naming the file, its
    suffix and ``allowed``."""
    format = _SUFFIX_FORMATS.get(path.suffix.lower())
    if format is None:
        raise ConfigError(str(path), path.suffix, allowed)
    return format


def load_config(path: str | os.PathLike[str]) -> StageConfig:
    """Read a stage config file: YAML for ``.yaml``/``.yml``, JSON for ``.json``.

    A missing or unreadable file, non-UTF-8 bytes, bad YAML/JSON, an empty document or one that is not a mapping
    raises ConfigError naming the file and the reason, never a raw OSError/yaml/json exception.
    """
    path = Path(path)
    format = format_for_path(path)
    text = read_text_bounded(path, MAX_CONFIG_BYTES, f"a {format.upper()} stage config")
    return parse_config_text(text, format, source=str(path))


def save_config(cfg: StageConfig, path: str | os.PathLike[str]) -> None:
    """Write ``cfg``'s canonical document to ``path`` (format from the suffix), atomically.

    The text is produced first, then written to a temporary file in the same folder, flushed to disk and moved
    over ``path`` with ``os.replace``: a reader sees the old file or the new one, never half of one, and a failure
    at any point leaves the old file untouched and no temporary file behind. A new file gets mode 0644; a
    replaced file keeps its mode.
    """
    path = Path(path)
    text = format_config_text(cfg, format_for_path(path))
    atomic_write(path, text)


# --- comparing configs ---------------------------------------------------------------------------------------
def _shown(value: Any) -> str:
    """A document value as an engineer would write it: null, [2, 3], repr-exact floats."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(entry) for entry in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_shown(entry)}" for key, entry in value.items()) + "}"
    return repr(value)


def diff_configs(old: StageConfig, new: StageConfig) -> list[str]:
    """Human-readable changes from ``old`` to ``new``, one line each; empty when the configs are equal.

    Order: top-level fields in document order (``agents``, ``samples``, ``seed``, ``slip``, ``horizon``), then
    sizes by ascending side. Lines look like ``samples: 4000 -> 6000``, ``agents: 2 -> [2, 3]``,
    ``sizes.6.hole_ratio: 0.3 -> 0.4``, ``sizes.8: added {data_ratio: 0.2, hole_ratio: 0.3, wait_ratio: 0.5}``,
    ``sizes.3: removed (was {data_ratio: 0.25, ...})``.
    """
    before, after = old.to_dict(), new.to_dict()
    changes = [
        f"{key}: {_shown(before[key])} -> {_shown(after[key])}"
        for key in TOP_LEVEL_KEYS
        if key != "sizes" and before[key] != after[key]
    ]
    for side in sorted(set(old.sizes) | set(new.sizes)):
        if side not in old.sizes:
            changes.append(f"sizes.{side}: added {_shown(new.sizes[side].to_dict())}")
        elif side not in new.sizes:
            changes.append(f"sizes.{side}: removed (was {_shown(old.sizes[side].to_dict())})")
        else:
            old_spec, new_spec = old.sizes[side], new.sizes[side]
            changes.extend(
                f"sizes.{side}.{key}: {_shown(getattr(old_spec, key))} -> {_shown(getattr(new_spec, key))}"
                for key in SIZE_KEYS
                if getattr(old_spec, key) != getattr(new_spec, key)
            )
    return changes


# --- JSON Schema ---------------------------------------------------------------------------------------------
def config_json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of the stage config document, with a description on every field.

    It checks types, ranges and keys. Rules across fields (data ratios summing to 1, agents min <= max, enough
    free cells for the agents, waits needing 2+ agents) are stated in the descriptions and enforced by
    :class:`StageConfig`: every config that constructs validates against this schema, not the reverse.
    Returns a fresh dict on every call, so a caller may edit it.
    """
    agent_count = {"type": "integer", "minimum": 1, "maximum": MAX_STAGE_AGENTS}
    side_pattern = "^([3-9]|[12][0-9]|3[0-2])$"  # the decimal strings "3".."32"; a test pins it to MIN/MAX_SIZE
    size_spec = {
        "type": "object",
        "description": "How one map size is sampled.",
        "additionalProperties": False,
        "required": list(REQUIRED_SIZE_KEYS),
        "properties": {name: schema_property(SizeSpec, name) for name in SIZE_KEYS},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "MAPF-FrozenLake stage config",
        "description": (
            "The sampling distribution of the next training stage: how many agents, how many instances, and for "
            "each square map size its share of the data, its share of holes and its share of instances needing "
            "a wait. Every instance is certified solvable by an optimal solver. Unknown keys are rejected."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": list(REQUIRED_KEYS),
        "properties": {
            "agents": {
                "description": (
                    f"Agents per instance: an integer 1..{MAX_STAGE_AGENTS}, or an inclusive range [min, max] "
                    "(min <= max) to mix counts, e.g. [2, 3]. More agents mean more conflicts."
                ),
                "oneOf": [
                    agent_count,
                    {"type": "array", "prefixItems": [agent_count, agent_count], "items": False, "minItems": 2},
                ],
            },
            "samples": schema_property(StageConfig, "samples"),
            "seed": schema_property(StageConfig, "seed"),
            "slip": schema_property(StageConfig, "slip"),
            "horizon": schema_property(StageConfig, "horizon"),
            "sizes": {
                "type": "object",
                "minProperties": 1,
                "description": (
                    f"Map side length as a string key (\"{MIN_SIZE}\"..\"{MAX_SIZE}\"; the benchmark uses 3..10) "
                    "-> how that size is sampled. Maps are square."
                ),
                "propertyNames": {"pattern": side_pattern},
                "additionalProperties": size_spec,
            },
        },
    }


__all__ = [
    "DATA_RATIO_TOLERANCE",
    "MAX_HOLE_RATIO",
    "MAX_HORIZON",
    "MAX_SAMPLES",
    "MAX_SEED",
    "MAX_SIZE",
    "MAX_STAGE_AGENTS",
    "MIN_SIZE",
    "SizeSpec",
    "SizeTable",
    "StageConfig",
    "config_json_schema",
    "default_stage_config",
    "diff_configs",
    "format_config_text",
    "load_config",
    "parse_config_text",
    "reject_duplicate_json_keys",
    "save_config",
]
