"""Reading documents (JSON and YAML already parsed) into typed values, at the bottom of the house: every package's
reader checks a value's kind and range the same way and names it by its dotted path (``summary.by_size.6.valid_rate``,
``stage record.scores.valid_rate``).

:func:`check_value` / :func:`read_key` / :func:`read_mapping` / :func:`read_table` check kinds (``int``, ``number``,
``bool``, ``str``, ``mapping``, ``list``); :func:`checked_int` / :func:`checked_real` check numbers in a range
(NaN, infinities and bools refused); :func:`side_key` / :func:`pair_key` read a document's text keys (``"6"``,
``"3x6"``) as the ints and tuples the values hold in memory, :func:`key_text` writes them back;
:class:`NumberRecord` is the base of a frozen record of numbers read field by field. Declared fields (bounds and help
on a dataclass field) are :mod:`simulator.fields`'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import Field, fields
from typing import Any, ClassVar, TypeGuard, TypeVar

import numpy as np

from simulator.errors import ConfigError


def is_integer(value: Any) -> TypeGuard[int | np.integer[Any]]:
    """An int (NumPy's too), not a bool: ``agents: true`` is a mistake, never a count."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_python_int(value: Any) -> TypeGuard[int]:
    """A Python int, not a bool and not NumPy's: for a value kept as it is (in a record written as JSON, a count
    the code does arithmetic with), where ``np.int64(3)`` would fail later; :func:`is_integer` reads documents."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: Any) -> TypeGuard[int | float | np.integer[Any] | np.floating[Any]]:
    """An int or a float (NumPy's too), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def checked_int(value: Any, field: str, low: int, high: int) -> int:
    """``value`` as an int when it is an integer in ``[low, high]``; else ConfigError naming ``field``."""
    if not is_integer(value) or not low <= value <= high:
        raise ConfigError(field, value, f"an integer {low} <= {field.rsplit('.', 1)[-1]} <= {high}")
    return int(value)


def checked_real(value: Any, field: str, low: float, high: float) -> float:
    """``value`` as a float when it is a number in ``[low, high]``; else ConfigError naming ``field``."""
    name = field.rsplit(".", 1)[-1]
    # The range test also rejects non-finite values: NaN fails every comparison and infinities lie outside the
    # finite bounds. (Not math.isfinite(): a huge int such as 10**400 compares fine but overflows a float.)
    if not is_real(value) or not low <= value <= high:
        raise ConfigError(field, value, f"a finite number {low} <= {name} <= {high}")
    return float(value)


_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (lambda value: isinstance(value, int) and not isinstance(value, bool), "an integer"),
    "number": (lambda value: isinstance(value, (int, float)) and not isinstance(value, bool), "a number"),
    "bool": (lambda value: isinstance(value, bool), "true or false"),
    "str": (lambda value: isinstance(value, str), "a string"),
    "mapping": (lambda value: isinstance(value, Mapping), "a mapping"),
    "list": (lambda value: isinstance(value, list), "a list"),
}


def check_value(value: Any, where: str, kind: str) -> Any:
    """``value`` when it is of ``kind`` (``int``, ``number``, ``bool``, ``str``, ``mapping``, ``list``), else ConfigError
    naming ``where``. Numbers are kept as they are (an integer stays an integer), so a document reads back equal."""
    test, words = _KINDS[kind]
    if not test(value):
        raise ConfigError(where, value, words)
    return value


def read_key(data: Any, key: str, where: str, kind: str, optional: bool = False) -> Any:
    """``data[key]`` checked by :func:`check_value`; ConfigError naming ``where.key`` when it is missing (with
    ``optional``, a missing key or null reads as None) and naming ``where`` when ``data`` is not a mapping."""
    name = f"{where}.{key}" if where else key
    if not isinstance(data, Mapping):
        raise ConfigError(where or "record", data, "a mapping")
    if data.get(key) is None and optional:
        return None
    if key not in data:
        raise ConfigError(name, None, "present")
    return check_value(data[key], name, kind)


def read_mapping(value: Any, where: str, read: Callable[[Any, str], Any],
                 key: Callable[[str, str], Any] | None = None) -> dict[Any, Any]:
    """``value``, a mapping, with each of its values read by ``read(item, where)`` (``where`` ending in the key),
    and each of its keys by ``key(name, where)`` (None: kept as text; :func:`side_key`, :func:`pair_key`)."""
    return {(key(str(name), f"{where}.{name}") if key is not None else str(name)): read(item, f"{where}.{name}")
            for name, item in check_value(value, where, "mapping").items()}


def read_table(data: Any, key: str, where: str, read: Callable[[Any, str], Any],
               keys: Callable[[str, str], Any] | None = None) -> dict[Any, Any]:
    """:func:`read_mapping` of ``data[key]``."""
    return read_mapping(read_key(data, key, where, "mapping"), f"{where}.{key}", read, keys)


# --- keys: integers and pairs in memory, text only in documents --------------------------------------------------
_MAX_KEY_DIGITS = 9


def side_key(text: str, where: str) -> int:
    """A document's count key (a map side ``"6"``, an agent count, a step) as an int; ConfigError naming
    ``where`` unless it is 1 to 9 ASCII digits."""
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_KEY_DIGITS):
        raise ConfigError(where, text[:40], f"a key of 1 to {_MAX_KEY_DIGITS} digits (a count or a map side)")
    return int(text)


def pair_key(separator: str) -> Callable[[str, str], tuple[int, int]]:
    """A reader of ``"<a><separator><b>"`` keys (``"3x6"``, ``"5:3"``) as ``(a, b)``."""
    def read(text: str, where: str) -> tuple[int, int]:
        first, found, second = text.partition(separator)
        if not found:
            raise ConfigError(where, text[:40], f"a key <count>{separator}<count>")
        return side_key(first, where), side_key(second, where)
    return read


def key_text(key: int | str | tuple[int, int | str], separator: str = ":") -> str:
    """A key as its document writes it: ``6`` -> ``"6"``, ``(5, 3)`` -> ``"5:3"`` (``separator`` ``"x"``: ``"3x6"``)."""
    return separator.join(map(str, key)) if isinstance(key, tuple) else str(key)


Record = TypeVar("Record", bound="NumberRecord")


class NumberRecord:
    """Base of a frozen dataclass of numbers: its document is its fields in order, and :meth:`from_dict` reads an
    ``int`` field as an integer, any other as a number (a missing or ill-typed key names its path)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}

    @classmethod
    def from_dict(cls: type[Record], data: Any, where: str = "record") -> Record:
        return cls(**{item.name: read_key(data, item.name, where, "int" if item.type in ("int", int) else "number")
                      for item in fields(cls)})


__all__ = ["NumberRecord", "check_value", "checked_int", "checked_real", "is_integer", "is_real", "key_text",
           "pair_key", "read_key", "read_mapping", "read_table", "side_key"]
