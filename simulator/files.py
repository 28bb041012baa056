"""Bounded reads of users' files (maps, scenarios, grid configs): a file over its limit is refused after reading
at most ``limit + 1`` bytes, never loaded whole, and every failure is a :class:`ConfigError` naming the file."""

from __future__ import annotations

import os

from simulator.errors import ConfigError


def read_text_bounded(path: str | os.PathLike[str], limit: int, what: str) -> str:
    """The UTF-8 text of ``path``, at most ``limit`` bytes.

    Args:
        path: the file.
        limit: most bytes accepted.
        what: the kind of file in words, for the error (e.g. ``"a MovingAI .map file"``).

    Raises:
        ConfigError: the file is missing or unreadable, larger than ``limit`` bytes, or not UTF-8.
    """
    name = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(name, "unreadable", f"{what}, readable", exc.strerror or str(exc)) from None
    if len(data) > limit:
        raise ConfigError(name, f"more than {limit:,} bytes", f"{what} of at most {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "not UTF-8", f"{what} as UTF-8 text", str(exc)) from None
