"""The one error type the simulator raises for bad input.

Every check of a config, instance, state, action or plan raises :class:`ConfigError` with the offending field,
the value it had and what is allowed, so a user (or an engineer model) can fix the input without reading code.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _BoundedRepr(reprlib.Repr):
    """A ``repr`` whose work is bounded whatever the value: containers are cut after a few items and levels (a
    YAML alias bomb is never expanded to be printed), long strings and huge integers are shortened without
    building their full text (Python refuses ``repr`` of an integer over 4,300 digits)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = self.maxdict = 8
        self.maxstring = 100
        self.maxother = 100
        self.maxlong = 60

    def repr_int(self, value: int, level: int) -> str:
        if value.bit_length() > 190:  # more than ~57 digits: say how big instead of writing it
            return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(value, level)


_REPR = _BoundedRepr()


def short_repr(value: Any, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters, in time and memory bounded by the limit, not the value."""
    try:
        shown = _REPR.repr(value)
    except Exception:  # a value whose own __repr__ fails: name its type only
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


class ConfigError(ValueError):
    """Bad input: names the field, the value and the allowed range.

    Attributes:
        field: dotted name of the offending field, e.g. ``"instance.starts[2]"``.
        value: the value that was rejected (shortened in the message when long).
        allowed: the allowed range or rule, in words.
    """

    def __init__(self, field: str, value: Any, allowed: str, detail: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        shown = short_repr(value)
        message = f"{field} = {shown} is not allowed: {allowed}"
        if detail:
            message += f" ({detail})"
        super().__init__(message)


def in_file(error: ConfigError, path: object) -> ConfigError:
    """``error`` naming the file ``path`` first (``FILE: field = value is not allowed: ...``), as every refusal of a
    file's content does; field, value and allowed stay. Named once: a second call with the same file changes nothing."""
    if not str(error.args[0]).startswith(f"{path}:"):
        error.args = (f"{path}: {error.args[0]}",)
    return error


@contextmanager
def naming_file(path: object | None) -> Iterator[None]:
    """A ConfigError raised inside (a generator refusing a config's band, a document refusing a field) names the file
    ``path`` first (:func:`in_file`); None: the values came from flags, and the error stays as it is."""
    try:
        yield
    except ConfigError as error:
        if path is not None:
            in_file(error, path)
        raise

