"""The one error type of the replay format: :class:`ReplayError` (and the internal :class:`RecordError`).

Everything that goes wrong while reading or writing a replay file (a missing file, bad bytes, a record that
breaks the spec in ``replays/FORMAT.md``, an episode the writer cannot store) raises it, so a caller (the CLI,
the viewers, failure mining) catches one type and shows one message.
"""

from __future__ import annotations

import os


class ReplayError(ValueError):
    """A replay file (or an episode bound for one) breaks the format.

    The message reads ``"<file>: <where>: <reason>"``, e.g.
    ``"runs/a/stage1.mlr: episode 17: positions: cell 70 is off the 8x8 map"``.

    Attributes:
        path: the file, as given by the caller (``None`` when there is no file yet, e.g. encoding in memory).
        where: ``"header"``, ``"file"``, ``"index"``, or the 0-based episode index (an ``int``).
        reason: what is wrong, in words.
    """

    def __init__(self, path: str | os.PathLike[str] | None, where: str | int, reason: str) -> None:
        self.path = None if path is None else os.fspath(path)
        self.where = where
        self.reason = reason
        place = f"episode {where}" if isinstance(where, int) else str(where)
        super().__init__(f"{self.path or '<memory>'}: {place}: {reason}")


class RecordError(Exception):
    """Internal: one rule of the spec is broken. The reader and writer add the file and the place and re-raise
    it as :class:`ReplayError`; it never escapes this package."""
