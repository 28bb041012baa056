"""An engineer's options, declared once: each option is a field of the engineer's dataclass, and the field says
which values it takes (``low: float = number(0.2, 0, 1)``). The checks and their ConfigError (naming
``ENGINEER.OPTION``, the value and what is allowed), the unknown-option error of ``make_engineer`` and the option
table (``mapf-lake engineers NAME``, the docs' engineer reference) all read that one declaration
(:mod:`simulator.fields`, which the run config's settings use too); an option's help is the docstring under its
field.

Fields that are an engineer's state between stages (``state(dict)``, ``side_state()``) or objects only Python code
passes (``python_object()``), its ``name`` and an ``llm`` engineer's ``backend_spec`` are not rows of the table.

An engineer derived from :class:`DeclaredOptions` needs no ``__post_init__`` of its own: construction checks the
options and hands the state fields' values to its ``load_state``. One whose state is tables of map sides to numbers
(``values: dict = side_state()``) derives :class:`SideTableState` as well, which reads and writes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from simulator.config import MAX_SIZE, MIN_SIZE
from simulator.errors import ConfigError
from simulator.files import cut
from simulator.text import printable
from simulator.documents import is_python_int
from simulator.fields import (ALLOWED, Allowed, FieldRow, as_written, choice, field_docs, field_rows, format_rows,
                              integer, number)

STATE = "state"
SIDE_TABLE = "side_table"
OBJECT = "object"
NOT_OPTIONS = ("name", "backend_spec")


def state(factory: Callable[[], Any] | None = None) -> Any:
    """A field that carries the engineer's state from stage to stage (see its ``load_state``), not an option:
    empty from ``factory``, or None without one."""
    if factory is None:
        return dataclasses.field(default=None, metadata={STATE: True})
    return dataclasses.field(default_factory=factory, metadata={STATE: True})


def side_state(integer: bool = False, low: float | None = None, high: float | None = None) -> Any:
    """State that is a table of map sides to finite numbers (integers when ``integer``; each in ``[low, high]``,
    None for no bound at that end), empty at first; :class:`SideTableState` reads and writes it."""
    return dataclasses.field(default_factory=dict,
                             metadata={STATE: True, SIDE_TABLE: Allowed(low, high, integer=integer)})


def state_mapping(value: Any, where: str, allowed: str) -> Mapping[Any, Any]:
    """``value`` when it is a mapping (None: an empty one); else ConfigError naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(where, value, allowed)
    return value


def state_side(key: Any, where: str) -> int:
    """A map side written as a state table's key (``"6"`` in JSON, or 6): an integer ``MIN_SIZE..MAX_SIZE``;
    else ConfigError naming ``where``."""
    allowed = f"a map side, an integer in [{MIN_SIZE}, {MAX_SIZE}]"
    if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 3:
        key = int(key)
    if not is_python_int(key) or not MIN_SIZE <= key <= MAX_SIZE:
        raise ConfigError(where, key, allowed)
    return key


def state_value(value: Any, allowed: Allowed, where: str) -> Any:
    """``value`` when ``allowed`` admits it (a number as a float unless ``allowed.integer``: ``1`` reads as
    ``1.0``); else ConfigError naming ``where``, the value and ``allowed``. NaN and infinities are never admitted."""
    if not allowed.admits(value):
        raise ConfigError(where, value, str(allowed))
    return value if value is None or allowed.integer or allowed.choices or allowed.boolean else float(value)


def declared_state(owner: Any) -> dict[str, Any]:
    """The values of ``owner``'s state fields (``state(...)``) by name: the document its ``load_state`` reads."""
    return {field.name: getattr(owner, field.name) for field in dataclasses.fields(owner) if STATE in field.metadata}


def python_object(default: Any = None) -> Any:
    """An option only Python code passes (an object, such as a ready backend), not a value a config file holds:
    ``make_engineer`` takes it, the option table leaves it out."""
    return dataclasses.field(default=default, metadata={OBJECT: True})


def check_options(owner: Any) -> None:
    """ConfigError naming ``NAME.OPTION`` for the first field of ``owner`` (in declaration order) whose value its
    declaration does not allow."""
    for field in dataclasses.fields(owner):
        value = getattr(owner, field.name)
        if ALLOWED in field.metadata and not field.metadata[ALLOWED].admits(value):
            raise ConfigError(f"{owner.name}.{field.name}", value, str(field.metadata[ALLOWED]))


class DeclaredOptions:
    """Base of an engineer dataclass whose options are declared (see the module docstring): construction checks
    them, then an engineer with state fields continues from their values through its ``load_state``. A subclass
    with checks of its own calls ``super().__post_init__()`` first."""

    def __post_init__(self) -> None:
        check_options(self)
        load_state = getattr(self, "load_state", None)
        if load_state is not None:
            load_state(declared_state(self))


class SideTableState:
    """``load_state`` and ``state`` of an engineer whose state is its ``side_state()`` fields: the document is
    ``{FIELD: {"SIDE": number}}``, sides ascending; a document that is not one raises ConfigError naming
    ``NAME state`` and the expected shape."""

    name: str

    def _tables(self) -> dict[str, Allowed]:
        return {field.name: field.metadata[SIDE_TABLE] for field in dataclasses.fields(self)  # type: ignore[arg-type]
                if SIDE_TABLE in field.metadata}

    def load_state(self, state: dict | None) -> None:
        """Continue from a previous decision's ``details["state"]`` (None or {}: empty tables). Each table's
        sides and values are checked against their declaration (``side_state``); the first one out of range (or
        NaN, or not a number) is a ConfigError naming ``NAME state.FIELD.SIDE``, the value and what is allowed."""
        tables = self._tables()
        expected = "{" + ", ".join(f"{name}: {{side: {allowed}}}" for name, allowed in tables.items()) + "}"
        document = state_mapping(state, f"{self.name} state", expected)
        read = {}
        for name, allowed in tables.items():
            where = f"{self.name} state.{name}"
            table = state_mapping(document.get(name), where, f"a mapping of map sides to {allowed}")
            read[name] = {state_side(side, f"{where}.{cut(printable(str(side)), 12)}"):
                          state_value(value, allowed, f"{where}.{cut(printable(str(side)), 12)}") for side, value in table.items()}
        for name, table in read.items():
            setattr(self, name, table)

    def state(self) -> dict:
        return {name: {str(side): value for side, value in sorted(getattr(self, name).items())}
                for name in self._tables()}


Option = FieldRow
"""One row of an engineer's option table (:class:`simulator.fields.FieldRow`)."""


def option_names(cls: type) -> list[str]:
    """The options ``make_engineer`` takes for an engineer class: its init fields but the name (and
    ``backend_spec``), state fields included (a decision's state continues through them)."""
    return [field.name for field in dataclasses.fields(cls) if field.init and field.name not in NOT_OPTIONS]


def option_table(cls: type) -> list[Option]:
    """The options of an engineer class for people: its option fields without the state ones, in order."""
    hidden = tuple(field.name for field in dataclasses.fields(cls)  # type: ignore[arg-type]
                   if field.name in NOT_OPTIONS or STATE in field.metadata or OBJECT in field.metadata)
    return field_rows(cls, skip=hidden)


format_option_table = format_rows
"""``rows`` as text for a terminal (:func:`simulator.fields.format_rows`)."""


__all__ = ["Allowed", "DeclaredOptions", "Option", "SideTableState", "as_written", "check_options", "choice",
           "declared_state", "field_docs", "format_option_table", "integer", "number", "option_names", "option_table",
           "python_object", "side_state", "state", "state_mapping", "state_side", "state_value"]
