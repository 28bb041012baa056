"""An engineer's options, declared once: each option is a field of the engineer's dataclass, and the field says
which values it takes (``low: float = number(0.2, 0, 1)``). The checks and their ConfigError (naming
``ENGINEER.OPTION``, the value and what is allowed), the unknown-option error of ``make_engineer`` and the option
table (``mapf-lake engineers NAME``, the docs' engineer reference) all read that one declaration; an option's
help is the docstring under its field.

Fields that are an engineer's state between stages (``state(dict)``, ``side_state()``) or objects only Python code
passes (``python_object()``), its ``name`` and an ``llm`` engineer's ``backend_spec`` are not rows of the table.

An engineer derived from :class:`DeclaredOptions` needs no ``__post_init__`` of its own: construction checks the
options and hands the state fields' values to its ``load_state``. One whose state is tables of map sides to numbers
(``values: dict = side_state()``) derives :class:`SideTableState` as well, which reads and writes them.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError

ALLOWED = "allowed"
STATE = "state"
SIDE_TABLE = "side_table"
OBJECT = "object"
NOT_OPTIONS = ("name", "backend_spec")


@dataclass(frozen=True)
class Allowed:
    """The values an option takes: ``choices`` (names), else a finite number (an integer when ``integer``) in
    ``[low, high]``, None for no bound at that end. Bools are no numbers here."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    choices: tuple[str, ...] = ()

    def admits(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        return math.isfinite(value) and (self.low is None or value >= self.low) and (
            self.high is None or value <= self.high)

    def __str__(self) -> str:
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            return f"{kind} in [{self.low}, {self.high}]"
        if self.low is not None:
            return f"{kind} >= {self.low}"
        return kind if self.high is None else f"{kind} <= {self.high}"


def number(default: float, low: float, high: float) -> Any:
    """An option that is an int or float in ``[low, high]``."""
    return dataclasses.field(default=default, metadata={ALLOWED: Allowed(low, high)})


def integer(default: int, low: int, high: int | None = None) -> Any:
    """An option that is an integer at least ``low`` and at most ``high`` (None: no upper bound)."""
    return dataclasses.field(default=default, metadata={ALLOWED: Allowed(low, high, integer=True)})


def choice(default: str, choices: tuple[str, ...]) -> Any:
    """An option that is one of ``choices``."""
    return dataclasses.field(default=default, metadata={ALLOWED: Allowed(choices=tuple(choices))})


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


@dataclass(frozen=True)
class Option:
    """One row of an engineer's option table."""

    name: str
    default: Any
    allowed: str
    """What the declaration allows ("a number in [0, 1]"), else the field's type."""
    help: str
    """The docstring under the field ("" when it has none)."""


def field_docs(cls: type) -> dict[str, str]:
    """The docstrings under the fields of ``cls`` and of the classes it derives from (attribute docstrings), by
    field name, the nearest class's winning; a class whose source cannot be read adds none."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for statement, after in zip(body, body[1:]):
            if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[statement.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def option_names(cls: type) -> list[str]:
    """The options ``make_engineer`` takes for an engineer class: its init fields but the name (and
    ``backend_spec``), state fields included (a decision's state continues through them)."""
    return [field.name for field in dataclasses.fields(cls) if field.init and field.name not in NOT_OPTIONS]


def option_table(cls: type) -> list[Option]:
    """The options of an engineer class for people: its option fields without the state ones, in order."""
    docs = field_docs(cls)
    rows = []
    for field in dataclasses.fields(cls):
        if not field.init or field.name in NOT_OPTIONS or STATE in field.metadata or OBJECT in field.metadata:
            continue
        default = field.default if field.default is not dataclasses.MISSING else None
        allowed = field.metadata[ALLOWED] if ALLOWED in field.metadata else field.type
        rows.append(Option(field.name, default, str(allowed), docs[field.name] if field.name in docs else ""))
    return rows


def as_written(value: Any) -> str:
    """A default as a config file writes it: ``true``, ``null``, ``valid_rate``, ``0.5``."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def format_option_table(rows: list[Option], width: int = 80) -> str:
    """``rows`` as text for a terminal ``width`` columns wide: each option's name, default and allowed values on
    a line, its help wrapped and indented under them."""
    name_width = max((len(row.name) for row in rows), default=0) + 2
    lines = []
    for row in rows:
        lines.append(f"  {row.name:<{name_width}}{as_written(row.default):<12} {row.allowed}".rstrip())
        if row.help:
            lines.extend(textwrap.wrap(row.help.replace("``", ""), width, initial_indent=" " * 6,
                                       subsequent_indent=" " * 6))
    return "\n".join(lines)


__all__ = ["Allowed", "DeclaredOptions", "Option", "SideTableState", "as_written", "check_options", "choice",
           "declared_state", "field_docs", "format_option_table", "integer", "number", "option_names", "option_table",
           "python_object", "side_state", "state"]
