"""The registry of replay codecs keyed by format version.

The writer always uses ``CODECS[FORMAT_VERSION]``; the reader picks the codec named by the file's preamble, so
files of older versions keep loading after a v2 is added (add ``CODECS[2]``; never edit what a v1 record means).
"""

from __future__ import annotations

from replays.codec_v1 import CodecV1
from replays.container import FORMAT_VERSION
from replays.errors import RecordError

# Decoders by format version. A v2 adds its codec here; the reader finds it by the file's preamble.
CODECS: dict[int, CodecV1] = {1: CodecV1()}


def codec_for(version: int) -> CodecV1:
    """The codec of ``version``; RecordError when this code does not know it."""
    codec = CODECS.get(version)
    if codec is None:
        raise RecordError(f"format version {version} is unknown here (this code reads {sorted(CODECS)})")
    return codec


def writer_codec() -> CodecV1:
    """A fresh codec of the current version (fresh: it caches the last instance it encoded)."""
    return type(CODECS[FORMAT_VERSION])()
