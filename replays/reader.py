"""Reading replay files: :class:`ReplayReader` (lazy, random access), :func:`read_replay`, :func:`iter_replay_files`.

Opening a file reads only its preamble, header, index footer and trailer (the footer lists every episode's
byte offset), so ``len(reader)`` and ``reader[i]`` are cheap whatever the file's size. Every declared length is
checked against the file and the limits in ``replays.container`` before anything is allocated, and every problem,
from a missing file to a bad record, raises :class:`ReplayError` naming the file, the place and the reason.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from types import TracebackType
from typing import Iterable, Iterator, overload

import msgpack
import numpy as np

from replays.codec_v1 import CodecV1
from replays.container import (
    FILE_SUFFIX,
    MAGIC,
    MAX_EPISODES,
    MAX_HEADER_BYTES,
    MAX_RECORD_BYTES,
    PREAMBLE_SIZE,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    UNPACK_LIMITS,
)
from replays.errors import RecordError, ReplayError
from replays.registry import codec_for
from replays.types import Episode, ReplayHeader
from simulator.documents import is_integer
from simulator.errors import ConfigError
from simulator.files import file_kind, open_regular

_CHUNK_BYTES = 1 << 20  # iteration reads whole records in chunks of about this size


class ReplayReader:
    """A replay file opened for reading.

    Attributes and operations:
        header: the file's :class:`ReplayHeader` (``header.format_version`` is the file's version).
        len(reader): the number of episodes (from the index footer; no scan).
        reader[i]: episode ``i`` (negative indices count from the end; slices give lists); reads one record.
        for episode in reader: every episode in order, read in chunks.

    With ``lazy=True`` (the default) episodes are :class:`replays.types.LazyEpisode`: the record's structure is
    checked when it is read, its arrays are decoded and checked on first access (raising :class:`ReplayError`
    then). With ``lazy=False`` every episode is decoded and checked in full before it is returned.

    The reader keeps the file open (close it, or use ``with``); it reads with positioned reads, so iterating and
    random access may be mixed. A file replaced under the same name while open is not noticed: the reader
    keeps reading the file it opened.

    Raises:
        ReplayError: the file cannot be opened, is not a replay file, is of an unknown version, is truncated,
            or breaks the spec anywhere.
    """

    def __init__(self, path: str | os.PathLike[str], lazy: bool = True) -> None:
        self.path = os.fspath(path)
        self.lazy = lazy
        try:  # a FIFO or device is refused before any blocking open or read
            self._file = open_regular(self.path, "a replay file")
        except ConfigError as exc:
            reason = f"{exc.value}, not a regular file" if exc.allowed.endswith("regular file") else exc.value
            raise ReplayError(self.path, "file", f"cannot open: {reason}") from None
        self._lock = threading.Lock()  # only for platforms without os.pread
        try:
            self._open()
        except BaseException:
            self._file.close()
            raise

    # --- opening ------------------------------------------------------------------------------------------
    def _fail(self, where: str | int, reason: str) -> ReplayError:
        return ReplayError(self.path, where, reason)

    def _open(self) -> None:
        size = os.fstat(self._file.fileno()).st_size
        self._size = size
        if size < PREAMBLE_SIZE:
            raise self._fail("file", f"not a replay file: {size} bytes, shorter than the {PREAMBLE_SIZE}-byte preamble")
        preamble = self._read_at(0, PREAMBLE_SIZE)
        if preamble[: len(MAGIC)] != MAGIC:
            raise self._fail("file", f"not a replay file: it does not start with {MAGIC!r}")
        (version,) = struct.unpack("<I", preamble[len(MAGIC):])
        try:
            self._codec: CodecV1 = codec_for(version)
        except RecordError as exc:
            raise self._fail("file", str(exc)) from None
        if size < PREAMBLE_SIZE + TRAILER_SIZE:
            raise self._fail("file", f"truncated: {size} bytes, no room for the index trailer")
        trailer = self._read_at(size - TRAILER_SIZE, TRAILER_SIZE)
        if trailer[8:] != TRAILER_MAGIC:
            raise self._fail("file", "truncated or not closed by its writer: no index trailer at the end")
        (footer_offset,) = struct.unpack("<Q", trailer[:8])
        if not PREAMBLE_SIZE < footer_offset <= size - TRAILER_SIZE:
            raise self._fail("index", f"footer offset {footer_offset} is outside {PREAMBLE_SIZE + 1}..{size - TRAILER_SIZE}")

        header_end = self._read_header(version, footer_offset)
        self._read_index(header_end, footer_offset)

    def _read_header(self, version: int, footer_offset: int) -> int:
        region = min(footer_offset - PREAMBLE_SIZE, MAX_HEADER_BYTES)
        unpacker = msgpack.Unpacker(max_buffer_size=region, **UNPACK_LIMITS)
        unpacker.feed(self._read_at(PREAMBLE_SIZE, region))
        try:
            record = unpacker.unpack()
        except msgpack.OutOfData:
            raise self._fail("header", f"truncated, or larger than {MAX_HEADER_BYTES} bytes") from None
        except Exception as exc:  # any complaint of the msgpack decoder about hostile bytes
            raise self._fail("header", f"not valid msgpack: {exc}") from None
        try:
            self.header: ReplayHeader = self._codec.decode_header(record)
        except RecordError as exc:
            raise self._fail("header", str(exc)) from None
        header_end: int = PREAMBLE_SIZE + unpacker.tell()
        return header_end

    def _read_index(self, header_end: int, footer_offset: int) -> None:
        footer_size = self._size - TRAILER_SIZE - footer_offset
        if footer_size > 8 * MAX_EPISODES + 16:
            raise self._fail("index", f"footer of {footer_size} bytes, more than {MAX_EPISODES} episodes can need")
        footer = self._read_at(footer_offset, footer_size)
        limits = dict(UNPACK_LIMITS, max_bin_len=footer_size)
        try:
            count, offset_bytes = msgpack.unpackb(footer, **limits)
        except Exception as exc:  # bad msgpack, trailing bytes, or not a pair
            raise self._fail("index", f"not a valid footer [count, offsets]: {exc}") from None
        if type(count) is not int or not 0 <= count <= MAX_EPISODES:
            raise self._fail("index", f"episode count {count!r}: an integer 0..{MAX_EPISODES}")
        if type(offset_bytes) is not bytes or len(offset_bytes) != 8 * count:
            raise self._fail("index", f"offsets: {8 * count} bytes for {count} episodes")
        bounds = np.empty(count + 1, dtype=np.int64)
        offsets = np.frombuffer(offset_bytes, dtype="<u8")
        if count and int(offsets.max()) >= footer_offset:
            raise self._fail("index", f"an episode offset lies past the footer at {footer_offset}")
        bounds[:count] = offsets
        bounds[count] = footer_offset
        if bounds[0] != header_end:
            raise self._fail("index", f"the first record must start right after the header, at {header_end}")
        lengths = np.diff(bounds)
        if count and (lengths.min() <= 0 or lengths.max() > MAX_RECORD_BYTES):
            bad = int(np.argmax((lengths <= 0) | (lengths > MAX_RECORD_BYTES)))
            raise self._fail("index", f"episode {bad} spans {int(lengths[bad])} bytes (allowed 1..{MAX_RECORD_BYTES})")
        self._bounds = bounds  # (count + 1,) int64: record i spans bounds[i]:bounds[i+1]
        self._count = count

    def _read_at(self, offset: int, size: int) -> bytes:
        fd = self._file.fileno()
        if hasattr(os, "pread"):
            data = os.pread(fd, size, offset)
        else:  # pragma: no cover - Windows
            with self._lock:
                self._file.seek(offset)
                data = self._file.read(size)
        if len(data) != size:
            raise self._fail("file", f"short read at byte {offset}: the file changed while open")
        return data

    # --- episodes -----------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    def _decode(self, record: object, index: int) -> Episode:
        try:
            episode = self._codec.decode_episode(record, (self.path, index))
        except RecordError as exc:
            raise self._fail(index, str(exc)) from None
        return episode if self.lazy else episode.materialized()

    @overload
    def __getitem__(self, index: int) -> Episode: ...

    @overload
    def __getitem__(self, index: slice) -> list[Episode]: ...

    def __getitem__(self, index: int | slice) -> Episode | list[Episode]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if not is_integer(index):
            raise TypeError(f"episode index must be an int or a slice, not {type(index).__name__}")
        position = int(index) + self._count if index < 0 else int(index)
        if not 0 <= position < self._count:
            raise IndexError(f"episode {index} of a file with {self._count} episodes")
        start, end = int(self._bounds[position]), int(self._bounds[position + 1])
        try:
            record = msgpack.unpackb(self._read_at(start, end - start), **UNPACK_LIMITS)
        except ReplayError:
            raise
        except Exception as exc:  # bad msgpack, or a record that does not end where the index says
            raise self._fail(position, f"not a valid msgpack record: {exc}") from None
        return self._decode(record, position)

    def __iter__(self) -> Iterator[Episode]:
        return self.iter_range(0, self._count)

    def iter_range(self, start: int, stop: int) -> Iterator[Episode]:
        """Episodes ``start`` to ``stop - 1`` in order, reading whole records in chunks of about 1 MiB."""
        bounds = self._bounds
        i, stop = max(0, start), min(stop, self._count)
        while i < stop:
            last = int(np.searchsorted(bounds, bounds[i] + _CHUNK_BYTES, side="right")) - 1
            j = min(stop, max(i + 1, last))
            base = int(bounds[i])
            ends = (bounds[i + 1 : j + 1] - base).tolist()
            data = self._read_at(base, ends[-1])
            unpacker = msgpack.Unpacker(max_buffer_size=len(data), **UNPACK_LIMITS)
            unpacker.feed(data)
            for n, end in enumerate(ends):
                try:
                    record = unpacker.unpack()
                except Exception as exc:  # any complaint of the msgpack decoder about hostile bytes
                    raise self._fail(i + n, f"not a valid msgpack record: {exc!r}") from None
                if unpacker.tell() != end:
                    raise self._fail(i + n, "the record does not end where the index says")
                yield self._decode(record, i + n)
            i = j

    # --- lifetime -----------------------------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ReplayReader":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ReplayReader({self.path!r}, {self._count} episodes, format v{self.header.format_version})"


def read_replay(path: str | os.PathLike[str]) -> tuple[ReplayHeader, list[Episode]]:
    """The header and every episode of a file, decoded and checked in full (plain :class:`Episode` objects)."""
    with ReplayReader(path, lazy=False) as reader:
        return reader.header, list(reader)


def replay_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The replay files under ``paths`` (see :func:`iter_replay_files`), in order, each once: a file named twice,
    or named and inside a named folder, or a folder spelt two ways (``runs/a`` and ``runs/a/.``) is read once.
    Raises :class:`ReplayError` when a path does not exist."""
    seen: set[Path] = set()
    out = []
    for path in paths:
        for file in iter_replay_files(path):
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                out.append(file)
    return out


def iter_replay_files(path_or_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """The replay files at ``path_or_dir``: the file itself, or a folder's ``*.mlr`` files sorted by name.

    Hidden files (writers' temporaries among them) and subfolders are skipped. Raises :class:`ReplayError` when
    the path does not exist, or when a folder's ``*.mlr`` entry is neither a file nor a folder (a FIFO, a device,
    a dangling link): named, never skipped without a word nor opened.
    """
    path = Path(path_or_dir)
    if path.is_dir():
        children = sorted((child for child in path.iterdir()
                           if child.suffix == FILE_SUFFIX and not child.name.startswith(".")),
                          key=lambda child: child.name)
        for child in children:
            if not (child.is_file() or child.is_dir()):
                try:
                    kind = f"{file_kind(os.stat(child).st_mode)}, not a replay file"
                except OSError:
                    kind = "a link to nothing, not a replay file"
                raise ReplayError(child, "file", kind)
        yield from (child for child in children if child.is_file())
    elif path.is_file():
        yield path
    else:
        try:
            kind = f"{file_kind(os.stat(path).st_mode)}, not a replay file or a folder of them"
        except OSError:
            kind = "no such file or folder"
        raise ReplayError(path, "file", kind)

