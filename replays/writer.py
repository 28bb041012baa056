"""Writing replay files: :class:`ReplayWriter` (streaming) and :func:`write_replay` (one call).

The file appears under its name only when the writer closes: bytes go to a hidden temporary file beside it
(``simulator.atomic.AtomicWriter``), and closing appends the index footer, fsyncs and renames. A writer that
raises, is interrupted, or whose process is killed leaves the previous file (or no file) under the name.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from types import TracebackType
from dataclasses import replace
from typing import Iterable

import msgpack

from replays.container import FORMAT_VERSION, MAGIC, MAX_EPISODES, MAX_HEADER_BYTES, MAX_RECORD_BYTES, TRAILER_MAGIC
from replays.errors import RecordError, ReplayError
from replays.registry import writer_codec
from replays.types import Episode, ReplayHeader
from simulator.atomic import AtomicWriter
from simulator.secrets import holding, redact


def _redacted(text: str | None) -> str | None:
    """``text`` redacted; anything that is not a string is left for the codec's checks to refuse."""
    return redact(text) if isinstance(text, str) else text


class ReplayWriter:
    """Append episodes to a new replay file; the file is complete and visible only after :meth:`close`.

    Use as a context manager: leaving the block normally closes (commits) the file; an exception discards it
    and leaves whatever was under ``path`` before. ``write`` checks each episode against the spec and raises
    :class:`ReplayError` (naming the file and the episode's index) without writing anything of it, so a caller
    may catch it and go on.

    Args:
        path: where the file will be; its folder is created if missing.
        header: the file's header; ``header.format_version`` must be ``FORMAT_VERSION``.
    """

    def __init__(self, path: str | os.PathLike[str], header: ReplayHeader) -> None:
        self.path = os.fspath(path)
        self._codec = writer_codec()
        self._packer = msgpack.Packer(use_bin_type=True)
        try:
            header_bytes = self._packer.pack(self._codec.encode_header(header))
        except RecordError as exc:
            raise ReplayError(self.path, "header", str(exc)) from None
        except (TypeError, ValueError, OverflowError) as exc:  # msgpack refusing a value
            raise ReplayError(self.path, "header", f"not msgpack-able: {exc}") from None
        if len(header_bytes) > MAX_HEADER_BYTES:
            raise ReplayError(self.path, "header", f"{len(header_bytes)} bytes, at most {MAX_HEADER_BYTES}")
        self.header = header
        self._offsets = array("Q")  # byte offset of each episode record
        self._out: AtomicWriter | None = None
        preamble = MAGIC + struct.pack("<I", FORMAT_VERSION)
        try:
            out = AtomicWriter(self.path)
        except OSError as exc:
            raise ReplayError(self.path, "file", f"cannot create: {exc.strerror or exc}") from exc
        try:
            out.write(preamble)
            out.write(header_bytes)
        except BaseException:
            out.discard()
            raise
        self._out = out
        self._position = len(preamble) + len(header_bytes)

    def __len__(self) -> int:
        """Episodes written so far."""
        return len(self._offsets)

    def write(self, episode: Episode) -> None:
        """Append one episode (checked first; nothing is written when it breaks the spec)."""
        if self._out is None:
            raise ReplayError(self.path, len(self._offsets), "the writer is closed")
        index = len(self._offsets)
        if holding():  # a model's text that quotes a key the process holds is stored without it
            episode = replace(episode, prompt=_redacted(episode.prompt), completion=_redacted(episode.completion),
                              parse_error=_redacted(episode.parse_error))
        if index >= MAX_EPISODES:
            raise ReplayError(self.path, index, f"a file holds at most {MAX_EPISODES} episodes")
        try:
            data = self._packer.pack(self._codec.encode_episode(episode))
        except RecordError as exc:
            raise ReplayError(self.path, index, str(exc)) from None
        except ReplayError as exc:  # a lazily read episode whose arrays turned out bad in their own file
            raise ReplayError(self.path, index, f"the episode could not be read: {exc}") from exc
        except (TypeError, ValueError, OverflowError) as exc:  # e.g. a lone surrogate in a text
            raise ReplayError(self.path, index, f"not msgpack-able: {exc}") from None
        if len(data) > MAX_RECORD_BYTES:
            raise ReplayError(self.path, index, f"record of {len(data)} bytes, at most {MAX_RECORD_BYTES}")
        self._offsets.append(self._position)
        self._out.write(data)
        self._position += len(data)

    def flush(self) -> None:
        """Hand buffered bytes to the OS (the temporary file grows); the file is still published only by close."""
        if self._out is not None:
            self._out.handle.flush()

    def write_all(self, episodes: Iterable[Episode]) -> None:
        for episode in episodes:
            self.write(episode)

    def close(self) -> None:
        """Write the index footer and trailer, fsync, and move the file under its name. Idempotent."""
        if self._out is None:
            return
        offsets = self._offsets
        if sys.byteorder == "big":
            offsets = array("Q", offsets)
            offsets.byteswap()  # the footer is little-endian on every machine
        footer = self._packer.pack([len(self._offsets), offsets.tobytes()])
        trailer = struct.pack("<Q", self._position) + TRAILER_MAGIC
        out, self._out = self._out, None
        try:
            out.write(footer)
            out.write(trailer)
        except BaseException:
            out.discard()
            raise
        out.commit()

    def abort(self) -> None:
        """Drop everything written; ``path`` keeps what it held before. Idempotent."""
        if self._out is not None:
            out, self._out = self._out, None
            out.discard()

    @property
    def closed(self) -> bool:
        return self._out is None

    def __enter__(self) -> "ReplayWriter":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        # A writer dropped without close() never publishes its file; remove the temporary one.
        out = getattr(self, "_out", None)
        if out is not None:
            try:
                out.discard()
            except Exception:  # at interpreter exit the os module may already be gone; nothing left to do
                pass


def write_replay(path: str | os.PathLike[str], header: ReplayHeader, episodes: Iterable[Episode]) -> int:
    """Write a whole replay file atomically; returns the number of episodes written."""
    with ReplayWriter(path, header) as writer:
        writer.write_all(episodes)
        return len(writer)
