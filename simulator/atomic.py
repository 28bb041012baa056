"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Everything the product writes (configs, instance files, replays, run records) goes through here or through
:class:`AtomicWriter` for streams.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import IO, Iterator


class AtomicWriter:
    """A binary stream to a temporary file beside ``path``, moved over ``path`` on :meth:`commit`.

    Use as a context manager: leaving the block normally commits; an exception (KeyboardInterrupt included)
    discards the temporary file and leaves ``path`` as it was. A process killed mid-write leaves at most a hidden
    ``.NAME.*.tmp`` file, never a partial file under ``path``. A new file gets mode 0644; a replaced file keeps
    its mode.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():  # checked first: os.replace would fail only after the whole write, naming the temp file
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(self.path))
        for parent in self.path.parents:  # a file where a folder must be: name it, not the mkdir that trips on it
            if parent.exists():
                if not parent.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, "is a file, so it cannot hold "
                                             f"{self.path.name}", str(parent))
                break
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._mode = self.path.stat().st_mode & 0o777
        except FileNotFoundError:
            self._mode = 0o644
        descriptor, self.temp_name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.handle: IO[bytes] = os.fdopen(descriptor, "wb")
        self._closed = False

    def write(self, data: bytes) -> int:
        return self.handle.write(data)

    def commit(self) -> None:
        if self._closed:
            return
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.chmod(self.temp_name, self._mode)
            os.replace(self.temp_name, self.path)
        except BaseException:
            self.discard()
            raise
        self._closed = True

    def discard(self) -> None:
        if self._closed:
            return
        self.handle.close()
        try:
            os.unlink(self.temp_name)
        except FileNotFoundError:
            pass
        self._closed = True

    def __enter__(self) -> "AtomicWriter":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with AtomicWriter(path) as writer:
        writer.write(payload)


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike[str], replace: bool = False) -> Iterator[Path]:
    """Build a folder under a temporary name beside ``path`` and rename it to ``path`` when the block ends.

    The block fills the yielded folder; leaving it normally moves the folder into place in one rename, so a
    process killed half-way leaves at most a hidden ``.NAME.*.tmp`` folder, never a ``path`` missing files (a
    model folder with its config but no weights). An exception removes the temporary folder. ``path`` must not
    exist yet: a finished folder is never replaced, unless ``replace`` (a user's ``--force``): then the old
    folder is moved aside only once the new one is complete, and removed after the new one is in place.
    """
    target = Path(path)
    if target.exists() and not (replace and target.is_dir() and not target.is_symlink()):
        raise FileExistsError(errno.EEXIST, "already exists", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield temp
        os.chmod(temp, 0o755)  # mkdtemp makes it private; a finished folder reads like any other
        old = None
        if target.exists():  # replace: the old folder goes aside only now, when the new one is complete
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.rename(target, old / target.name)
        os.rename(temp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
