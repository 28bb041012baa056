"""Reading users' files: the one door every reader that takes a path goes through.

Opening (:func:`open_regular`, :func:`read_bytes_bounded`, :func:`read_text_bounded`): the path is checked with
``os.stat`` before it is opened, so a FIFO, a device (a link to ``/dev/zero``), a socket or a folder is refused
with one line instead of blocking forever or filling memory; the open itself is non-blocking and checked again
with ``fstat`` (a FIFO swapped in between is refused too, never waited on). A file over its kind's limit is
refused after reading at most ``limit + 1`` bytes. Text is UTF-8; a leading byte-order mark is dropped, for every
kind of file alike (YAML and JSON read the same). Every failure is a :class:`ConfigError` naming the file.

Limits, by kind of file (bytes; the docs' "Limits" section lists them):

====================  ==========================  =========================================================
constant              value                       files
====================  ==========================  =========================================================
MAX_CONFIG_BYTES      4 MiB                       stage configs, run configs, POGEMA grid configs, --history
MAX_INSTANCE_BYTES    16 MiB                      one instance (``solve FILE``, ``play --map`` text or JSON)
MAX_INSTANCES_BYTES   1 GiB                       JSON-lines instance files (``eval --instances``, ``play``)
MAX_MAP_BYTES         1 MiB                       a MovingAI ``.map``
MAX_SCEN_BYTES        16 MiB                      a MovingAI ``.scen``
====================  ==========================  =========================================================

Numbers in documents (:func:`load_json`, :func:`check_document`, :func:`bounded_int`): an integer of more than
``MAX_INT_DIGITS`` digits is refused before it is converted (Python refuses ``int()`` of 4,300 digits with a
ValueError), a non-finite number (``NaN``, ``Infinity``, ``1e309``) is refused, and nesting deeper than
``MAX_DEPTH`` is refused (no RecursionError). The error names the file, the line or key, the value (cut) and the
allowed range. The YAML reader of :mod:`simulator.config` follows the same rules.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any, BinaryIO

from simulator.errors import ConfigError

MAX_CONFIG_BYTES = 4 << 20  # a config is kilobytes; an engineer's history of 1,000 stages is well under this
MAX_INSTANCE_BYTES = 16 << 20  # one 256x256 instance as map text is about 200 KB
MAX_INSTANCES_BYTES = 1 << 30  # a gen --out file: ~2 KB per 10x10 instance, so about 500,000 of them
MAX_MAP_BYTES = 1 << 20  # a 256x256 map is about 66 KB; generous for CRLF line ends and trailing blank lines
MAX_SCEN_BYTES = 16 << 20  # about 300,000 scenario lines
MAX_INT_DIGITS = 40  # an integer in a document has at most this many digits (a 64-bit seed has 20)
MAX_DEPTH = 64  # nesting of lists and mappings in a document (ours go 4 deep)
_SHOWN = 40  # characters of a refused value shown in an error

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """A file's kind in words from its ``st_mode`` (``"a FIFO (named pipe)"``, ``"a folder"``, ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _field(name: str, flag: str) -> str:
    return f"{flag} {name}" if flag else name


def open_regular(path: str | os.PathLike[str], what: str, flag: str = "") -> BinaryIO:
    """``path`` opened for binary reading, when it is a regular file (links followed).

    Args:
        path: the file.
        what: the kind of file in words, for the error (e.g. ``"a MovingAI .map file"``).
        flag: the option that named it (``"--map"``), put before the file in errors; empty for none.

    Raises:
        ConfigError: missing or unreadable, or not a regular file (FIFO, device, folder, socket): refused before
            any blocking open or read.
    """
    name = os.fspath(path)
    field = _field(name, flag)
    try:
        mode = os.stat(name).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(field, file_kind(mode), f"{what}, a regular file")
        descriptor = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(field, exc.strerror or type(exc).__name__, f"{what}, a readable file") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):  # swapped since the stat
            raise ConfigError(field, file_kind(mode), f"{what}, a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bytes_bounded(path: str | os.PathLike[str], limit: int, what: str, flag: str = "") -> bytes:
    """The bytes of ``path`` (a regular file, :func:`open_regular`), at most ``limit`` of them.

    Raises:
        ConfigError: as :func:`open_regular`, or the file is larger than ``limit`` bytes.
    """
    field = _field(os.fspath(path), flag)
    with open_regular(path, what, flag) as handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:  # refused by its size, before a byte is read (a sparse file of gigabytes costs nothing)
                raise ConfigError(field, f"more than {limit:,} bytes", f"{what} of at most {limit:,} bytes")
            # sized by the file, since read(n) sets aside n bytes up front; bounded even if the file grew since
            data = handle.read(min(size, limit) + 1)
        except OSError as exc:
            raise ConfigError(field, exc.strerror or type(exc).__name__, f"{what}, a readable file") from None
        if len(data) > limit:
            raise ConfigError(field, f"more than {limit:,} bytes", f"{what} of at most {limit:,} bytes")
    return data


def decode_text(data: bytes, what: str, field: str) -> str:
    """``data`` as UTF-8 text, a leading byte-order mark dropped; ConfigError naming ``field`` when not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(field, "not UTF-8", f"{what} as UTF-8 text", str(exc)) from None


def read_text_bounded(path: str | os.PathLike[str], limit: int, what: str, flag: str = "") -> str:
    """The UTF-8 text of ``path``, at most ``limit`` bytes (a byte-order mark dropped).

    Args:
        path: the file.
        limit: most bytes accepted.
        what: the kind of file in words, for the error (e.g. ``"a MovingAI .map file"``).
        flag: the option that named it, for the error.

    Raises:
        ConfigError: the file is missing or unreadable, not a regular file, larger than ``limit`` bytes, or not
            UTF-8.
    """
    return decode_text(read_bytes_bounded(path, limit, what, flag), what, _field(os.fspath(path), flag))


# --- numbers and nesting in documents ---------------------------------------------------------------------------
def cut(text: str, limit: int = _SHOWN) -> str:
    """``text`` cut to ``limit`` characters (``...`` marks a cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bounded_int(text: str, where: str, name: str = "an integer", low: int | None = None,
                high: int | None = None) -> int:
    """The integer written as ``text`` (ASCII digits, an optional sign), checked before conversion: at most
    ``MAX_INT_DIGITS`` digits, then within ``low..high`` where given. ConfigError naming ``where`` otherwise."""
    span = (f" {low}..{high}" if low is not None and high is not None else
            f" >= {low}" if low is not None else f" <= {high}" if high is not None else "")
    allowed = f"{name}{span}"
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        raise ConfigError(where, cut(text), allowed)
    significant = digits.lstrip("0") or "0"  # int() counts leading zeros against its own digit limit
    if len(significant) > MAX_INT_DIGITS:
        raise ConfigError(where, f"{cut(text)} ({len(digits):,} digits)", f"{allowed}, at most {MAX_INT_DIGITS} digits")
    value = -int(significant) if text[:1] == "-" else int(significant)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ConfigError(where, value, allowed)
    return value


class _NumberRefused(ValueError):
    """Raised inside the JSON decoder's hooks; turned into a ConfigError that names the file and line."""

    def __init__(self, token: str, allowed: str) -> None:
        super().__init__(token)
        self.token = token
        self.allowed = allowed


def _json_int(token: str) -> int:
    if len(token.lstrip("-").lstrip("0")) > MAX_INT_DIGITS:
        raise _NumberRefused(token, f"an integer of at most {MAX_INT_DIGITS} digits")
    return int(token)


def _json_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _NumberRefused(token, "a finite number (about -1.8e308..1.8e308)")
    return value


def _json_constant(token: str) -> float:
    raise _NumberRefused(token, "a finite number: NaN and Infinity are not JSON")


def check_depth(value: Any, where: str) -> Any:
    """``value`` when its lists and mappings nest at most ``MAX_DEPTH`` deep (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise ConfigError(where, f"lists or mappings nested more than {MAX_DEPTH} deep",
                                  f"a document nested at most {MAX_DEPTH} deep")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def _line_of(text: str, token: str) -> int | None:
    at = text.find(token)
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def reject_duplicate_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of every JSON reader: a key given twice is a ValueError, not the last one silently."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def load_json(text: str, source: str, what: str = "a JSON document", line: int | None = None,
              object_only: bool = False, typed_later: bool = False) -> Any:
    """The JSON document ``text`` (from ``source``, line ``line`` of it for JSON lines), with the documents'
    number rules: integers of at most ``MAX_INT_DIGITS`` digits, finite numbers only, nesting at most
    ``MAX_DEPTH`` deep, no duplicate keys; with ``object_only``, a JSON object. Anything else is a ConfigError
    naming ``source`` and the line, the value (cut) and what is allowed. With ``typed_later``, NaN, Infinity and
    1e309 are read as floats, for a caller whose typed checks refuse them naming the key (the scorer's records)."""
    where = f"{source} line {line}" if line is not None else source
    numbers: dict[str, Any] = {} if typed_later else {"parse_float": _json_float, "parse_constant": _json_constant}
    try:
        data = json.loads(text, object_pairs_hook=reject_duplicate_json_keys, parse_int=_json_int, **numbers)
    except _NumberRefused as exc:
        found = line if line is not None else _line_of(text, exc.token)
        at = f"{source} line {found}" if found is not None else source
        raise ConfigError(at, cut(exc.token), exc.allowed) from None
    except RecursionError:
        raise ConfigError(where, "lists or mappings nested too deeply",
                          f"{what}, nested at most {MAX_DEPTH} deep") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError; so is a duplicate key
        reason = " ".join(str(exc).split())[:200]
        raise ConfigError(where, cut(" ".join(text.split())), f"{what}, valid JSON", reason) from None
    check_depth(data, where)
    if object_only and not isinstance(data, dict):
        raise ConfigError(where, f"a JSON {type(data).__name__}: {cut(' '.join(text.split()))}",
                          f"{what}: a JSON object {{...}}")
    return data
