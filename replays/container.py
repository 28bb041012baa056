"""The replay container: the bytes every version shares (magic, trailer, suffix, splits) and the limits a
reader checks a file against before it allocates anything (spec: ``replays/FORMAT.md``).

Shared by ``replays.writer``, ``replays.reader`` and the codecs (``replays.codec_v1``).
"""

from __future__ import annotations

FORMAT_VERSION = 1  # what the writer writes; bump only together with a new entry in CODECS
MAGIC = b"MLREPLAY"  # first 8 bytes of every replay file, any version
PREAMBLE_SIZE = len(MAGIC) + 4  # magic + format version (uint32 little-endian)
TRAILER_MAGIC = b"MLRINDEX"  # last 8 bytes of a complete file
TRAILER_SIZE = 8 + len(TRAILER_MAGIC)  # footer offset (uint64 little-endian) + trailer magic
FILE_SUFFIX = ".mlr"
SPLITS = ("train", "validation", "eval", "play", "rollout")

# --- limits (a hostile file is rejected before anything of its declared size is allocated) -------------------
MAX_HEADER_BYTES = 4 * 2**20  # the msgpack header object
MAX_RECORD_BYTES = 64 * 2**20  # one episode record (texts included)
MAX_TEXT_BYTES = 16 * 2**20  # one string (prompt, completion, parse error) in UTF-8
MAX_NAME_BYTES = 1024  # short header strings: producer_version, run_id, created
MAX_BIN_BYTES = 16 * 2**20  # one packed array
MAX_CONTAINER_LEN = 65_536  # elements of any msgpack array or map
MAX_NESTING = 32  # depth of free-form dicts (extra, policy, stage_config)
MAX_STEPS = 65_535  # steps of one episode's trace (T)
MAX_EPISODES = 10_000_000  # episodes in one file (the index footer is 8 bytes per episode)

# Keyword arguments for msgpack.Unpacker / unpackb: every declared length is checked against these before the
# unpacker allocates; ext types (msgpack timestamps included) are not part of the format.
UNPACK_LIMITS = dict(
    raw=False,
    strict_map_key=True,
    max_str_len=MAX_TEXT_BYTES,
    max_bin_len=MAX_BIN_BYTES,
    max_array_len=MAX_CONTAINER_LEN,
    max_map_len=MAX_CONTAINER_LEN,
    max_ext_len=0,
)
