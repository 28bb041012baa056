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
from collections.abc import Callable
from typing import Any

from simulator.errors import ConfigError
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


def side_state(integer: bool = False, low: float | None = None) -> Any:
    """State that is a table of map sides to numbers (integers when ``integer``; each at least ``low`` unless it
    is None), empty at first; :class:`SideTableState` reads and writes it."""
    return dataclasses.field(default_factory=dict, metadata={STATE: True, SIDE_TABLE: Allowed(low, integer=integer)})


def _side_table(state: dict, key: str, cast: Callable[[Any], float]) -> dict[int, float]:
    """``state[key]`` (a mapping of map sides to values, absent or None: empty) with int sides and ``cast``
    values; TypeError, ValueError or AttributeError when it is not one."""
    return {int(side): cast(value) for side, value in (state.get(key) or {}).items()}


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
        """Continue from a previous decision's ``details["state"]`` (None or {}: empty tables)."""
        tables = self._tables()
        expected = "{" + ", ".join(f"{name}: {{side: {allowed}}}" for name, allowed in tables.items()) + "}"
        try:
            read = {name: _side_table(state or {}, name, int if allowed.integer else float)
                    for name, allowed in tables.items()}
        except (TypeError, ValueError, AttributeError) as error:
            raise ConfigError(f"{self.name} state", state, f"{expected} ({error})") from error
        if not all(allowed.admits(value) for name, allowed in tables.items() for value in read[name].values()):
            raise ConfigError(f"{self.name} state", state, expected)
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
           "python_object", "side_state", "state"]
