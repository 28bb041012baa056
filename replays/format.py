"""The replay format under one name (spec: ``replays/FORMAT.md``).

A replay file is ``preamble (magic + version) | header | episode records | index footer | trailer``. The parts
live by role: ``replays.container`` (magic, trailer, limits), ``replays.types`` (:class:`Episode`,
:class:`InstanceLabels`, :class:`Outcome`, :class:`ReplayHeader`, :class:`LazyEpisode`), ``replays.codec_v1``
(the v1 msgpack codec) and ``replays.registry`` (:data:`CODECS`, the codecs keyed by format version). This module
re-exports their public names.
"""

from __future__ import annotations

from replays.codec_v1 import V1_EPISODE_FIELDS, CodecV1, encode_trace_numpy
from replays.container import (
    FILE_SUFFIX,
    FORMAT_VERSION,
    MAGIC,
    MAX_BIN_BYTES,
    MAX_CONTAINER_LEN,
    MAX_EPISODES,
    MAX_HEADER_BYTES,
    MAX_NAME_BYTES,
    MAX_NESTING,
    MAX_RECORD_BYTES,
    MAX_STEPS,
    MAX_TEXT_BYTES,
    PREAMBLE_SIZE,
    SPLITS,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    UNPACK_LIMITS,
)
from replays.errors import RecordError
from replays.registry import CODECS, codec_for, writer_codec
from replays.types import Episode, InstanceLabels, LazyEpisode, Outcome, ReplayHeader, producer_version

__all__ = [
    "CODECS",
    "FILE_SUFFIX",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_BIN_BYTES",
    "MAX_CONTAINER_LEN",
    "MAX_EPISODES",
    "MAX_HEADER_BYTES",
    "MAX_NAME_BYTES",
    "MAX_NESTING",
    "MAX_RECORD_BYTES",
    "MAX_STEPS",
    "MAX_TEXT_BYTES",
    "PREAMBLE_SIZE",
    "SPLITS",
    "TRAILER_MAGIC",
    "TRAILER_SIZE",
    "UNPACK_LIMITS",
    "V1_EPISODE_FIELDS",
    "CodecV1",
    "Episode",
    "InstanceLabels",
    "LazyEpisode",
    "Outcome",
    "RecordError",
    "ReplayHeader",
    "codec_for",
    "encode_trace_numpy",
    "producer_version",
    "writer_codec",
]
