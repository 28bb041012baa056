"""Declared fields: a dataclass field says once which values it takes and what it means, and the checks, the
error text, the option and settings tables (``--help``, ``mapf-lake engineers NAME``, ``mapf-lake train
--settings``, the docs) and the JSON Schema are all read from that declaration.

A declaration is a dataclass field made by :func:`number`, :func:`integer`, :func:`choice` or :func:`flag`:

.. code-block:: python

    @dataclass(frozen=True)
    class Training:
        steps: int = integer(60, 1, 10_000_000)
        \"\"\"Optimizer steps per stage.\"\"\"

The field's help is its ``description=`` when given (for text built from constants), else the docstring under the
field. :func:`check_fields` raises the ConfigError of the first field whose value its declaration does not
allow, naming ``PREFIX.FIELD``, the value and :class:`Allowed`'s words; :func:`field_rows` lists the declared
fields for people; :func:`schema_property` is one field's JSON Schema.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import textwrap
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError

MAX_REAL = 1e300  # the largest integer a number field admits: it is read as a float, and 10**309 overflows one

ALLOWED = "allowed"
DESCRIPTION = "description"
REQUIRED: Any = dataclasses.MISSING
"""The default of a declared field that has none (``data_ratio: float = number(REQUIRED, 0, 1)``)."""


@dataclass(frozen=True)
class Allowed:
    """The values a field takes: ``choices`` (names), ``boolean`` (true or false), else a finite number (an integer
    when ``integer``) in ``[low, high]`` (``(low, high]`` when ``low_open``), None for no bound at that end; with
    ``optional``, None too. Bools are no numbers here."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    choices: tuple[str, ...] = ()
    boolean: bool = False
    optional: bool = False
    low_open: bool = False

    def admits(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.boolean:
            return isinstance(value, bool)
        if self.choices:
            return isinstance(value, str) and value in self.choices
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if isinstance(value, int) and not self.integer and abs(value) > MAX_REAL:
            return False  # a number field reads it as a float: 10**400 would overflow
        return (self.high is None or value <= self.high) and (isinstance(value, int) or math.isfinite(value))

    def __str__(self) -> str:
        tail = " (or null)" if self.optional else ""
        if self.boolean:
            return "true or false" + tail
        if self.choices:
            return f"one of {', '.join(self.choices)}" + tail
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            return f"{kind} in {'(' if self.low_open else '['}{self.low}, {self.high}]" + tail
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {self.low}" + tail
        return (kind if self.high is None else f"{kind} <= {self.high}") + tail

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the values (``type``, then ``enum`` or the bounds)."""
        kind = "boolean" if self.boolean else "string" if self.choices else "integer" if self.integer else "number"
        out: dict[str, Any] = {"type": [kind, "null"] if self.optional else kind}
        if self.choices:
            out["enum"] = list(self.choices)
        if self.low is not None:
            out["exclusiveMinimum" if self.low_open else "minimum"] = self.low
        if self.high is not None:
            out["maximum"] = self.high
        return out


def _declared(default: Any, allowed: Allowed, description: str | None) -> Any:
    metadata: dict[str, Any] = {ALLOWED: allowed}
    if description is not None:
        metadata[DESCRIPTION] = description
    return dataclasses.field(default=default, metadata=metadata)


def number(default: Any, low: float | None, high: float | None, *, optional: bool = False, low_open: bool = False,
           description: str | None = None) -> Any:
    """A field that is an int or float in ``[low, high]`` (``(low, high]`` with ``low_open``; None with ``optional``)."""
    return _declared(default, Allowed(low, high, optional=optional, low_open=low_open), description)


def integer(default: Any, low: int | None, high: int | None = None, *, optional: bool = False,
            description: str | None = None) -> Any:
    """A field that is an integer at least ``low`` and at most ``high`` (None: no bound; None too with ``optional``)."""
    return _declared(default, Allowed(low, high, integer=True, optional=optional), description)


def choice(default: Any, choices: tuple[str, ...], *, description: str | None = None) -> Any:
    """A field that is one of ``choices``."""
    return _declared(default, Allowed(choices=tuple(choices)), description)


def flag(default: bool, *, description: str | None = None) -> Any:
    """A field that is true or false."""
    return _declared(default, Allowed(boolean=True), description)


def allowed_of(cls: Any, name: str) -> Allowed:
    """The declaration of field ``name`` of the dataclass ``cls``; KeyError when it has none."""
    field = {field.name: field for field in dataclasses.fields(cls)}[name]
    allowed: Allowed = field.metadata[ALLOWED]
    return allowed


def check_fields(owner: Any, prefix: str) -> None:
    """ConfigError naming ``prefix.FIELD`` (``FIELD`` when ``prefix`` is empty) for the first declared field of
    ``owner``, in declaration order, whose value its declaration does not allow."""
    for field in dataclasses.fields(owner):
        value = getattr(owner, field.name)
        if ALLOWED in field.metadata and not field.metadata[ALLOWED].admits(value):
            raise ConfigError(f"{prefix}.{field.name}" if prefix else field.name, value, str(field.metadata[ALLOWED]))


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


def field_help(cls: type, name: str, docs: dict[str, str] | None = None) -> str:
    """Field ``name``'s help: its declared ``description``, else the docstring under it ("" when none)."""
    field = {field.name: field for field in dataclasses.fields(cls)}[name]
    if DESCRIPTION in field.metadata:
        return str(field.metadata[DESCRIPTION])
    docs = field_docs(cls) if docs is None else docs
    return docs.get(name, "")


@dataclass(frozen=True)
class FieldRow:
    """One row of a settings or option table."""

    name: str
    default: Any
    allowed: str
    """What the declaration allows ("a number in [0, 1]"), else the field's type."""
    help: str
    """The field's help (:func:`field_help`)."""


def field_rows(cls: type, skip: tuple[str, ...] = (), prefix: str = "") -> list[FieldRow]:
    """The init fields of the dataclass ``cls`` for people, in order (names under ``prefix``), but ``skip``."""
    docs = field_docs(cls)
    rows = []
    for field in dataclasses.fields(cls):
        if not field.init or field.name in skip:
            continue
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = None
        allowed = field.metadata[ALLOWED] if ALLOWED in field.metadata else field.type
        rows.append(FieldRow(prefix + field.name, default, str(allowed), field_help(cls, field.name, docs)))
    return rows


def schema_property(cls: type, name: str, docs: dict[str, str] | None = None) -> dict[str, Any]:
    """Field ``name``'s JSON Schema: its declaration's (:meth:`Allowed.schema`), its default when it has one, and
    its help as the description."""
    field = {field.name: field for field in dataclasses.fields(cls)}[name]
    allowed: Allowed = field.metadata[ALLOWED]
    out = allowed.schema()
    if field.default is not dataclasses.MISSING:
        out["default"] = field.default
    out["description"] = field_help(cls, name, docs)
    return out


def as_written(value: Any) -> str:
    """A value as a config file writes it: ``true``, ``null``, ``valid_rate``, ``0.5``."""
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else '""' if value == "" else str(value)


def format_rows(rows: list[FieldRow], width: int = 80, stacked: bool = False) -> str:
    """``rows`` as text for a terminal ``width`` columns wide: each field's name, default and allowed values on a
    line (``stacked``: ``name = default`` on one, the allowed values wrapped under it, for long names), its help
    wrapped and indented under them."""
    name_width = max((len(row.name) for row in rows), default=0) + 2
    lines = []
    for row in rows:
        if stacked:
            lines.append(f"  {row.name} = {as_written(row.default)}")
            lines.extend(textwrap.wrap(f"allowed: {row.allowed}", width, initial_indent=" " * 6,
                                       subsequent_indent=" " * 8))
        else:
            lines.append(f"  {row.name:<{name_width}}{as_written(row.default):<12} {row.allowed}".rstrip())
        if row.help:
            lines.extend(textwrap.wrap(row.help.replace("``", ""), width, initial_indent=" " * 6,
                                       subsequent_indent=" " * 6))
    return "\n".join(lines)


__all__ = ["ALLOWED", "DESCRIPTION", "REQUIRED", "Allowed", "FieldRow", "allowed_of", "as_written", "check_fields",
           "choice", "field_docs", "field_help", "field_rows", "flag", "format_rows", "integer", "number",
           "schema_property"]
