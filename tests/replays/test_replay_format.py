"""Tests of the replay format (spec: replays/FORMAT.md): round trips, hostile files, killed writers, the v1 fixture."""

from __future__ import annotations

import hashlib
import pickle
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mapf_strategies import instances, plans_for
from replays import codec_v1
from replays import types as replay_types
from replays.container import FORMAT_VERSION, MAGIC, SPLITS, TRAILER_MAGIC
from replays.errors import RecordError, ReplayError
from replays.reader import ReplayReader, iter_replay_files, read_replay
from replays.registry import CODECS
from replays.types import Episode, InstanceLabels, LazyEpisode, Outcome, ReplayHeader
from replays.writer import ReplayWriter, write_replay
from simulator import constants as C
from simulator.types import Instance, JointPlan
from tests.replays.replay_fixture_v1 import FIXTURE_PATH, fixture_episodes, fixture_header

TESTS = Path(__file__).parent
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MANY = settings(SETTINGS, max_examples=300)


# --- builders ---------------------------------------------------------------------------------------------------
def header(**changes) -> ReplayHeader:
    base = dict(format_version=FORMAT_VERSION, producer_version="tests", run_id="r", stage=0, split="train",
                policy={"name": "test"}, stage_config=None, created="2026-01-01T00:00:00+00:00", extra={})
    base.update(changes)
    return ReplayHeader(**base)


def simple_episode(instance: Instance | None = None, steps: int = 2, **changes) -> Episode:
    instance = instance or Instance(grid=np.zeros((4, 4), np.int8), starts=[[0, 0], [3, 3]], goals=[[0, 3], [3, 0]])
    positions = np.repeat(instance.starts[None], steps + 1, axis=0)
    fields = dict(
        instance=instance, labels=None, plan=JointPlan.from_sequences([[C.WAIT] * steps] * instance.n_agents),
        parse_error=None, positions=positions, events=np.zeros((steps, instance.n_agents), np.int8),
        outcome=Outcome(False, C.GOAL_NOT_REACHED, steps, 0, -1, -1, 0, optimal=False),
    )
    fields.update(changes)
    return Episode(**fields)


def assemble(records: list[bytes], header_object=None, version: int = FORMAT_VERSION) -> bytes:
    """A replay file built by hand from raw record bytes, following FORMAT.md (not using the writer)."""
    preamble = MAGIC + struct.pack("<I", version)
    if header_object is None:
        header_object = CODECS[1].encode_header(header())
    head = msgpack.packb(header_object, use_bin_type=True)
    offsets, position = [], len(preamble) + len(head)
    for record in records:
        offsets.append(position)
        position += len(record)
    footer = msgpack.packb([len(records), struct.pack(f"<{len(offsets)}Q", *offsets)], use_bin_type=True)
    return preamble + head + b"".join(records) + footer + struct.pack("<Q", position) + TRAILER_MAGIC


def raw_record(episode: Episode) -> list:
    return codec_v1.CodecV1().encode_episode(episode)


def pack(record) -> bytes:
    return msgpack.packb(record, use_bin_type=True)


def read_everything(path: Path) -> None:
    """Open, read every episode lazily, touch every field, then read it all eagerly."""
    with ReplayReader(path) as reader:
        for episode in reader:
            for name in replay_types._EPISODE_FIELDS:
                getattr(episode, name)
        for i in range(len(reader)):
            reader[i].materialized()
    read_replay(path)


# --- strategies -------------------------------------------------------------------------------------------------
texts = st.none() | st.text(max_size=40)
finite = st.floats(allow_nan=False, allow_infinity=True, width=64)
names = st.text(max_size=12)
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(names, children, max_size=4),
    max_leaves=12,
)
plain_dicts = st.dictionaries(names, plain, max_size=4)


@st.composite
def episodes(draw) -> Episode:
    big = draw(st.booleans())  # up to 20x20: most of these maps have more than 256 cells (two-byte cells)
    instance = draw(instances(max_side=20 if big else 12, max_agents=6))
    k = instance.n_agents
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    steps = draw(st.integers(0, 12))
    positions = np.stack([rng.integers(0, instance.height, (steps + 1, k)),
                          rng.integers(0, instance.width, (steps + 1, k))], axis=-1).astype(np.int32)
    positions[0] = instance.starts
    flag_choices = np.array([0, 0, 0, C.EV_GOAL, C.EV_HOLE, C.EV_VERTEX | C.EV_EDGE, C.EV_ILLEGAL | C.EV_SLIP, 63])
    events = rng.choice(flag_choices, (steps, k)).astype(np.int8)
    parsed = draw(st.booleans())
    plan = draw(plans_for(instance, max_length=10)) if parsed else None
    labels = None
    if draw(st.booleans()):  # in range (labels_problem): the makespan 0 exactly when every agent is on its goal
        trivial = bool(np.array_equal(instance.starts, instance.goals))
        makespan = 0 if trivial else draw(st.integers(1, C.MAX_PLAN_LENGTH))
        sum_of_costs = draw(st.integers(makespan, k * C.MAX_PLAN_LENGTH))
        labels = InstanceLabels(draw(st.integers(1, 256)), draw(st.integers(0, 2**64 - 1)),
                                draw(st.integers(0, 10**6)), makespan, sum_of_costs,
                                draw(st.integers(0, sum_of_costs)), draw(st.booleans()))
    outcome = draw(st.builds(
        Outcome, st.booleans(), st.integers(0, len(C.FAILURE_NAMES) - 1), st.integers(-1, 100),
        st.integers(-1, 5), st.integers(-1, 100), st.integers(-1, 600), st.integers(0, 6), optimal=st.booleans()))
    return Episode(
        instance=instance, labels=labels, plan=plan, parse_error=None if parsed else draw(st.text(max_size=30)),
        positions=positions, events=events, outcome=outcome,
        reward=draw(finite), reward_components=draw(st.dictionaries(names, finite, max_size=4)),
        prompt=draw(texts), completion=draw(texts),
        prompt_tokens=draw(st.integers(0, 10**6)), completion_tokens=draw(st.integers(0, 10**6)),
        timings=draw(st.dictionaries(names, st.floats(0, 1e6), max_size=3)),
        slip=draw(st.floats(0, 1)), extra=draw(plain_dicts),
    )


headers = st.builds(
    header, run_id=st.text(max_size=20), stage=st.integers(0, 1000), split=st.sampled_from(SPLITS),
    policy=plain_dicts, stage_config=st.none() | plain_dicts, extra=plain_dicts,
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("replays")


@pytest.fixture(scope="module")
def small_file(folder) -> bytes:
    """The bytes of a small valid file (3 episodes) to cut and corrupt."""
    path = folder / "small.mlr"
    write_replay(path, fixture_header(), fixture_episodes())
    return path.read_bytes()


# --- round trips ------------------------------------------------------------------------------------------------
@MANY
@given(head=headers, items=st.lists(episodes(), max_size=4))
def test_replay__round_trip_gives_equal_header_and_episodes(folder, head, items):
    path = folder / "round_trip.mlr"
    assert write_replay(path, head, items) == len(items)
    got_header, got = read_replay(path)
    assert got_header == head
    assert got == items
    assert all(type(episode) is Episode for episode in got)
    with ReplayReader(path) as reader:
        lazy = list(reader)
        assert lazy == items
        assert [reader[i] for i in range(len(reader))] == items
        for episode, item in zip(lazy, items):
            assert episode.positions.dtype == np.int32 and episode.events.dtype == np.int8
            assert episode.positions.shape == item.positions.shape
            assert episode.n_steps == item.n_steps
            assert type(episode.reward) is float and type(episode.slip) is float


def test_replay__floats_keep_their_type_and_sign(folder):
    path = folder / "floats.mlr"
    values = [1.0, 0.0, -0.0, 2.0**60, -3.0, 0.1, float("inf")]
    items = [simple_episode(reward=value, slip=abs(value) if value < 1 else 0.5, reward_components={"a": value})
             for value in values]
    write_replay(path, header(), items)
    _, got = read_replay(path)
    for episode, value in zip(got, values):
        assert type(episode.reward) is float and episode.reward == value
        assert str(episode.reward) == str(value)  # -0.0 stays -0.0
        assert type(episode.reward_components["a"]) is float


def test_writer__numpy_scalars_and_other_dtypes_are_accepted(folder):
    path = folder / "dtypes.mlr"
    episode = simple_episode()
    as_numpy = simple_episode(
        positions=episode.positions.astype(np.int64), events=episode.events.astype(np.uint8),
        outcome=Outcome(np.bool_(False), np.int8(C.GOAL_NOT_REACHED), np.int32(2), np.int64(0), -1, -1, 0, optimal=np.bool_(False)),
        reward=np.float32(0.5), prompt_tokens=np.int64(3),
    )
    write_replay(path, header(), [as_numpy])
    _, (got,) = read_replay(path)
    assert got == as_numpy and type(got.outcome.failure) is int and got.prompt_tokens == 3


def test_writer__copies_lazily_read_episodes_to_another_file(folder):
    source, copy = folder / "source.mlr", folder / "copy.mlr"
    write_replay(source, fixture_header(), fixture_episodes())
    with ReplayReader(source) as reader:
        write_replay(copy, reader.header, (episode for episode in reader if not episode.outcome.valid))
    assert read_replay(copy) == (fixture_header(), fixture_episodes()[1:])


def test_lazy_episode__pickles_and_copies_as_a_plain_episode(folder):
    path = folder / "pickle.mlr"
    write_replay(path, fixture_header(), fixture_episodes())
    with ReplayReader(path) as reader:
        episode = reader[0]
        assert isinstance(episode, LazyEpisode) and "positions" not in episode.__dict__
        clone = pickle.loads(pickle.dumps(episode))
    assert type(clone) is Episode and clone == fixture_episodes()[0]
    assert "_record" not in episode.__dict__  # fully decoded: the raw record was let go
    with pytest.raises(AttributeError):
        episode.no_such_field  # noqa: B018 (the attribute access is what raises)


@MANY
@given(height=st.integers(1, 40), width=st.integers(1, 40), n_agents=st.integers(1, 6), steps=st.integers(0, 10),
       seed=st.integers(0, 2**32 - 1), off_map=st.booleans(), bad_flag=st.booleans())
def test_trace_encoding__numba_kernel_agrees_with_numpy_reference(height, width, n_agents, steps, seed, off_map,
                                                                   bad_flag):
    rng = np.random.default_rng(seed)
    positions = np.stack([rng.integers(0, height, (steps + 1, n_agents)),
                          rng.integers(0, width, (steps + 1, n_agents))], axis=-1).astype(np.int32)
    if off_map:
        positions[rng.integers(steps + 1), rng.integers(n_agents), rng.integers(2)] = rng.choice([-1, height, width, 999])
    events = rng.choice(np.array([0, 0, 1, 16, 63, 6], np.int8), (steps, n_agents))
    if bad_flag and events.size:
        events.flat[rng.integers(events.size)] = rng.choice(np.array([64, -1, -128], np.int8))
    cell = codec_v1._cell_dtype(height, width)
    fast = codec_v1.CodecV1()._encode_trace_fast(positions, events, height, width, cell is codec_v1._U16)
    try:
        reference = codec_v1.encode_trace_numpy(positions, events, height, width, cell)
    except RecordError:
        reference = None
    assert fast == reference


# --- the writer refuses what the reader would refuse ------------------------------------------------------------
def _bad_cases():
    base = simple_episode()
    hole_map = Instance(grid=[[0, 1], [0, 0]], starts=[[0, 0]], goals=[[1, 1]])
    return [
        ("positions off the map", dict(positions=np.array([[[0, 0], [3, 3]], [[0, 4], [3, 3]], [[0, 0], [3, 3]]])),
         "off the 4x4 map"),
        ("negative position", dict(positions=np.array([[[0, 0], [3, 3]], [[-1, 0], [3, 3]], [[0, 0], [3, 3]]])),
         "off the 4x4 map"),
        ("row 0 is not the starts", dict(positions=np.zeros((3, 2, 2), np.int32)), "instance.starts"),
        ("positions of the wrong shape", dict(positions=np.zeros((3, 3, 2), np.int32)), "shape"),
        ("float positions", dict(positions=base.positions.astype(float)), "integer"),
        ("events of the wrong shape", dict(events=np.zeros((3, 2), np.int8)), "shape"),
        ("unknown event flag", dict(events=np.array([[0, 64], [0, 0]], np.int8)), "EV_* bits"),
        ("negative event flag", dict(events=np.array([[0, -1], [0, 0]], np.int64)), "EV_* bits"),
        ("plan for another agent count", dict(plan=JointPlan.from_sequences([[1]])), "agents"),
        ("plan of the wrong type", dict(plan=[[1, 2]]), "JointPlan"),
        ("unknown failure code", dict(outcome=Outcome(False, 99, 0, 0, 0, 0, 0, optimal=False)), "failure"),
        ("float in an int field", dict(outcome=Outcome(False, 2, 3.5, 0, 0, 0, 0, optimal=False)), "fail_step"),
        ("string reward", dict(reward="1"), "reward"),
        ("negative token count", dict(prompt_tokens=-1), "prompt_tokens"),
        ("long reward name", dict(reward_components={"é" * 600: 1.0}), "1024 UTF-8 bytes"),
        ("tuple in extra", dict(extra={"size": (8, 8)}), "use a list"),
        ("int key in extra", dict(extra={1: "a"}), "not a str"),
        ("numpy value in extra", dict(extra={"a": np.int64(1)}), "plain msgpack"),
        ("lone surrogate in text", dict(completion="\ud800"), "msgpack"),
        ("non-str text", dict(prompt=b"bytes"), "prompt"),
        ("labels of the wrong type", dict(labels={"size": 4}), "labels"),
        ("instance of the wrong type", dict(instance="4x4"), "Instance"),
        ("float positions without a plan", dict(instance=hole_map, positions=np.zeros((1, 1, 2)),
                                                events=np.zeros((0, 1)), plan=None), "integer"),
        ("a start on another map", dict(instance=hole_map, positions=np.array([[[1, 1]]]), events=np.zeros((0, 1), np.int8),
                                        plan=None), "instance.starts"),
    ]


@pytest.mark.parametrize("name, changes, reason", _bad_cases(), ids=[case[0] for case in _bad_cases()])
def test_writer__rejects_a_bad_episode_and_writes_nothing_of_it(folder, name, changes, reason):
    path = folder / "bad.mlr"
    good = simple_episode()
    with ReplayWriter(path, header()) as writer:
        writer.write(good)
        with pytest.raises(ReplayError) as caught:
            writer.write(Episode(**{**vars(good), **changes}))
        assert caught.value.where == 1 and caught.value.path == str(path)
        assert str(path) in str(caught.value) and "episode 1" in str(caught.value) and reason in str(caught.value)
        writer.write(good)
    _, got = read_replay(path)
    assert got == [good, good]


@pytest.mark.parametrize("changes, reason", [
    (dict(split="test"), "split"),
    (dict(format_version=2), "format_version"),
    (dict(stage=-1), "stage"),
    (dict(policy={"a": (1,)}), "use a list"),
    (dict(run_id=None), "run_id"),
])
def test_writer__rejects_a_bad_header_and_leaves_no_file(folder, changes, reason):
    path = folder / "bad_header.mlr"
    with pytest.raises(ReplayError, match=reason) as caught:
        ReplayWriter(path, header(**changes))
    assert caught.value.where == "header" and not path.exists()


def test_writer__exception_in_block_keeps_the_previous_file(folder):
    path = folder / "previous.mlr"
    write_replay(path, header(run_id="old"), [simple_episode()])
    with pytest.raises(RuntimeError):
        with ReplayWriter(path, header(run_id="new")) as writer:
            writer.write(simple_episode())
            raise RuntimeError("stop")
    got_header, got = read_replay(path)
    assert got_header.run_id == "old" and len(got) == 1
    assert not [p for p in folder.iterdir() if p.name.startswith(".previous.mlr.")]


# --- killed writers -------------------------------------------------------------------------------------------
def _kill_after(path: Path, episodes_first: int) -> None:
    """Start the slow writer, let it write a few episodes, SIGKILL it."""
    process = subprocess.Popen(
        [sys.executable, str(TESTS / "replay_kill_writer.py"), str(path), "1000", "0.02"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        for line in process.stdout:
            if line.strip() == f"wrote {episodes_first}" or time.monotonic() > deadline:
                break
        temporaries = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
        assert temporaries and temporaries[0].stat().st_size > 1000 * episodes_first // 2  # mid-stream for real
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_writer__killed_mid_stream_leaves_the_previous_complete_file(tmp_path):
    path = tmp_path / "stage.mlr"
    write_replay(path, fixture_header(), fixture_episodes())
    before = path.read_bytes()
    _kill_after(path, 5)
    assert path.read_bytes() == before
    got_header, got = read_replay(path)
    assert got_header == fixture_header() and got == fixture_episodes()
    assert list(iter_replay_files(tmp_path)) == [path]  # the writer's leftover temporary is hidden and skipped


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_writer__killed_mid_stream_leaves_nothing_under_the_name(tmp_path):
    path = tmp_path / "stage.mlr"
    _kill_after(path, 3)
    assert not path.exists()
    assert list(iter_replay_files(tmp_path)) == []


# --- hostile files: only ReplayError, quickly, in bounded memory --------------------------------------------------
def _only_replay_errors(path: Path, data: bytes, seconds: float = 2.0) -> bool:
    """Read ``data`` as a replay file; True when it loaded, False on ReplayError; any other exception fails."""
    path.write_bytes(data)
    start = time.perf_counter()
    try:
        read_everything(path)
        return True
    except ReplayError as exc:
        assert str(path) in str(exc)
        return False
    finally:
        assert time.perf_counter() - start < seconds, f"reading took {time.perf_counter() - start:.1f}s"


@MANY
@given(data=st.binary(max_size=400), with_magic=st.booleans(), with_trailer=st.booleans())
def test_reader__random_bytes_raise_only_replay_error(folder, data, with_magic, with_trailer):
    if with_magic:
        data = MAGIC + b"\x01\x00\x00\x00" + data
    if with_trailer:
        data += struct.pack("<Q", len(data) // 2) + TRAILER_MAGIC
    _only_replay_errors(folder / "random.mlr", data)


@MANY
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["set", "insert", "delete"]),
                                st.binary(min_size=1, max_size=6)), min_size=1, max_size=4))
def test_reader__edited_files_load_or_raise_replay_error(folder, small_file, edits):
    data = bytearray(small_file)
    for position, kind, chunk in edits:
        position %= len(data)
        if kind == "set":
            data[position : position + len(chunk)] = chunk[: len(data) - position]
        elif kind == "insert":
            data[position:position] = chunk
        else:
            del data[position : position + len(chunk)]
    _only_replay_errors(folder / "edited.mlr", bytes(data))


def test_reader__every_truncation_raises_replay_error(folder, small_file):
    path = folder / "truncated.mlr"
    for size in range(len(small_file)):
        assert not _only_replay_errors(path, small_file[:size]), f"a file cut at {size} bytes loaded"
    assert _only_replay_errors(path, small_file)


def test_reader__every_bit_flip_loads_or_raises_replay_error(folder, small_file):
    path = folder / "flipped.mlr"
    outcomes = {True: 0, False: 0}
    for position in range(len(small_file)):
        for bit in (position % 8, 7 - position % 8):
            data = bytearray(small_file)
            data[position] ^= 1 << bit
            outcomes[_only_replay_errors(path, bytes(data))] += 1
    assert outcomes[False] > 0  # most flips are caught; some (a text character, a float) are still valid files


def _wrong_values():
    return ["x", b"x", -1, 2**64 - 1, 3.5, None, True, [], {}, [1] * 30, {"a": 1}, {"k" * 2000: 1.0}, b"\x00" * 5000]


def test_reader__wrong_types_in_every_field_raise_replay_error(folder):
    path = folder / "wrong_types.mlr"
    record = raw_record(fixture_episodes()[0])
    loaded = 0
    for index in range(len(record)):
        for value in _wrong_values():
            mutated = list(record)
            mutated[index] = value
            loaded += _only_replay_errors(path, assemble([pack(mutated)]))
    # Only a few replacements are valid values (nil labels, an empty map of reward components, ...).
    assert loaded < len(record) * len(_wrong_values()) // 5
    for bad in ([], [1, 2], "record", None, record[:-1], record + [0], {"height": 4}):
        assert not _only_replay_errors(path, assemble([pack(bad)]))


def test_reader__content_errors_name_the_episode_when_the_arrays_are_read(folder):
    path = folder / "content.mlr"
    record = raw_record(simple_episode())
    record[2] = b"\xff\xff"  # every cell a hole: the starts are on holes
    data = assemble([pack(raw_record(simple_episode())), pack(record)])
    path.write_bytes(data)
    with ReplayReader(path) as reader:
        first, second = list(reader)  # the structure is fine: iterating works
        assert first == simple_episode()
        with pytest.raises(ReplayError, match=r"episode 1: instance: instance\.starts") as caught:
            second.instance  # noqa: B018 (decoding on access is what raises)
        assert caught.value.where == 1 and caught.value.path == str(path)
    with pytest.raises(ReplayError, match="episode 1"):
        read_replay(path)


@pytest.mark.parametrize("field_index, value, reason", [
    (9, struct.pack("<I", 99), "event index"),  # past T*K
    (10, b"\x40", "flag"),  # unknown bit
    (8, b"\x00\x0f" + b"\x00\x10" * 2, "off the 4x4 map"),  # cell 16 on a 16-cell map
    (8, b"\x01\x0f" * 3, "row 0"),
    (6, [2, b"\x02\x00\x02\x00", b"\x00\x00\x00\x07"], "action code"),
    (6, [2, b"\x01\x00\x02\x00", b"\x00\x01\x00\x00"], "WAIT"),
    (6, [2, b"\x03\x00\x02\x00", b"\x00\x00\x00\x00"], "horizon"),
])
def test_reader__array_content_is_checked_on_decode(folder, field_index, value, reason):
    record = raw_record(simple_episode())
    if field_index == 9:
        record[10] = b"\x10"  # one event, at a bad index
    if field_index == 10:
        record[9] = struct.pack("<I", 0)  # one event, with a bad flag
    record[field_index] = value
    path = folder / "array_content.mlr"
    path.write_bytes(assemble([pack(record)]))
    with pytest.raises(ReplayError, match=reason):
        read_replay(path)


GOOD_LABELS = [4, 7, 0, 3, 6, 6, False]  # size, seed, index, optimal makespan, sum of costs, distances, needs_wait


@pytest.mark.parametrize("position, value, names", [
    (3, 2**63 - 1, "optimal_makespan"),
    (3, -1, "optimal_makespan"),
    (3, 0, "optimal_makespan"),  # 0 steps, yet the agents start off their goals
    (3, C.MAX_PLAN_LENGTH + 1, "optimal_makespan"),
    (0, 0, "size"),
    (0, C.MAX_SIDE + 1, "size"),
    (1, -1, "seed"),
    (2, -1, "index"),
    (4, 2, "optimal_sum_of_costs"),  # below the optimal makespan
    (4, 2 * C.MAX_PLAN_LENGTH + 1, "optimal_sum_of_costs"),
    (5, 7, "sum_of_distances"),  # above the optimal sum of costs it bounds from below
    (5, -1, "sum_of_distances"),
])
def test_reader__labels_out_of_range_are_refused_naming_the_field(folder, position, value, names):
    record = raw_record(simple_episode())
    record[5] = list(GOOD_LABELS)
    path = folder / "labels.mlr"
    path.write_bytes(assemble([pack(record)]))
    assert read_replay(path)[1][0].labels.optimal_makespan == 3
    record[5][position] = value
    path.write_bytes(assemble([pack(record)]))
    with pytest.raises(ReplayError, match=f"labels.{names}"):
        read_replay(path)
    labels = InstanceLabels(*record[5])
    with pytest.raises(ReplayError, match=f"labels.{names}"):  # the writer refuses what the reader would
        write_replay(folder / "labels-written.mlr", header(), [simple_episode(labels=labels)])


def test_reader__a_trivial_instance_has_optimal_makespan_0():
    from replays.codec_v1 import labels_problem

    assert labels_problem([3, 0, 0, 0, 0, 0, False], n_agents=1, trivial=True) is None
    assert "optimal_makespan" in labels_problem([3, 0, 0, 1, 1, 0, False], n_agents=1, trivial=True)


def _huge_cases(small_file: bytes) -> list[bytes]:
    record = raw_record(simple_episode())
    huge_in_record = []
    for prefix in (b"\xc6\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff",
                   b"\xdc\xff\xff", b"\xde\xff\xff", b"\xc5\xff\xff"):
        # A field declaring a huge length, followed by the rest of a record.
        fields = [pack(value) for value in record]
        fields[14] = prefix
        huge_in_record.append(b"\xdc\x00\x15" + b"".join(fields))
    cases = [assemble([raw]) for raw in huge_in_record]
    cases += [assemble([b"\xdd\xff\xff\xff\xff"]), assemble([b"\x91" * 100_000 + b"\xc0"])]  # huge, deep
    size = len(small_file)
    body = small_file[: size - 16]
    cases += [
        body + struct.pack("<Q", 2**64 - 1) + TRAILER_MAGIC,  # footer offset past the end
        body + struct.pack("<Q", 13) + TRAILER_MAGIC,  # footer offset inside the header
        small_file[:12] + b"\xdf\xff\xff\xff\xff" + small_file[12:],  # huge header map
    ]
    footer_offset = struct.unpack("<Q", small_file[-16:-8])[0]
    for footer in ([10**9, b""], [10**9, b"\x00" * 8], [3, struct.pack("<3Q", 0, 2**63, 2**64 - 1)],
                   [2**64 - 1, b""], b"\xc6\xff\xff\xff\xff"):
        raw = footer if isinstance(footer, bytes) else pack(footer)
        start = small_file[:footer_offset]
        cases.append(start + raw + struct.pack("<Q", footer_offset) + TRAILER_MAGIC)
    cases.append(MAGIC + struct.pack("<I", 2**32 - 1) + small_file[12:])  # unknown version
    return cases


def test_reader__huge_declared_lengths_fail_fast_in_bounded_memory(folder, small_file):
    path = folder / "huge.mlr"
    tracemalloc.start()
    try:
        for data in _huge_cases(small_file):
            tracemalloc.reset_peak()
            assert not _only_replay_errors(path, data, seconds=1.0)
            assert tracemalloc.get_traced_memory()[1] < 32 * 2**20, "a hostile file made the reader allocate"
    finally:
        tracemalloc.stop()


def test_reader__unknown_version_and_foreign_files_say_so(folder, small_file):
    path = folder / "version.mlr"
    path.write_bytes(MAGIC + struct.pack("<I", 7) + small_file[12:])
    with pytest.raises(ReplayError, match=r"version 7 is unknown") as caught:
        ReplayReader(path)
    assert caught.value.where == "file"
    path.write_bytes(b'{"json": "lines"}\n' * 3)
    with pytest.raises(ReplayError, match="not a replay file"):
        ReplayReader(path)
    with pytest.raises(ReplayError, match="cannot open"):
        ReplayReader(folder / "missing.mlr")


def test_reader__decoders_are_looked_up_by_the_file_version(folder, small_file, monkeypatch):
    """A file of another version is decoded by the codec registered for that version (how a v2 will be added)."""

    class Renamed(codec_v1.CodecV1):
        version = 9

        def decode_header(self, record):
            decoded = super().decode_header(record)
            decoded.run_id = "decoded by v9"
            return decoded

    monkeypatch.setitem(CODECS, 9, Renamed())
    path = folder / "v9.mlr"
    path.write_bytes(MAGIC + struct.pack("<I", 9) + small_file[12:])
    got_header, got = read_replay(path)
    assert got_header.format_version == 9 and got_header.run_id == "decoded by v9" and got == fixture_episodes()


# --- the checked-in v1 fixture ----------------------------------------------------------------------------------
def test_fixture_v1__loads_and_equals_its_known_content():
    got_header, got = read_replay(FIXTURE_PATH)
    assert got_header == fixture_header() and got_header.format_version == 1
    assert got == fixture_episodes()
    assert got[2].instance.height * got[2].instance.width > 256  # covers two-byte cells
    assert got[1].outcome.failure_name == "parse_error" and got[2].outcome.failure_name == "hole"


@pytest.mark.skipif(FORMAT_VERSION != 1, reason="the writer has moved on; the v1 fixture stays as it is")
def test_fixture_v1__the_writer_reproduces_it_byte_for_byte(tmp_path):
    path = tmp_path / "again.mlr"
    write_replay(path, fixture_header(), fixture_episodes())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(FIXTURE_PATH.read_bytes()).hexdigest()


# --- big files: len, random access, lazy open ---------------------------------------------------------------------
def test_reader__repeated_instances_are_decoded_once_and_shared(folder):
    path = folder / "shared.mlr"
    items = [simple_episode(reward=float(i)) for i in range(3)]
    write_replay(path, header(), items)
    _, got = read_replay(path)
    assert got == items and got[0].instance is got[1].instance is got[2].instance
    assert not got[0].instance.grid.flags.writeable


def test_reader__len_random_access_and_lazy_open_on_10000_episodes(tmp_path):
    rng = np.random.default_rng(0)
    pool = []
    for _ in range(50):
        cells = rng.choice(64, 4, replace=False)
        points = np.stack(np.divmod(cells, 8), axis=1)
        pool.append(Instance(grid=np.zeros((8, 8), np.int8), starts=points[:2], goals=points[2:]))
    items = [simple_episode(pool[i % 50], steps=20, reward=float(i)) for i in range(10_000)]
    path = tmp_path / "big.mlr"
    write_replay(path, header(), items)
    start = time.perf_counter()
    with ReplayReader(path) as reader:
        first = reader[0]
        assert first == items[0]
        opened = time.perf_counter() - start
        assert len(reader) == 10_000
        assert reader[-1] == items[-1] and reader[5_000] == items[5_000] and reader[np.int64(7)] == items[7]
        assert reader[9_998:] == items[9_998:]
        assert [episode.reward for episode in reader.iter_range(4_000, 4_003)] == [4000.0, 4001.0, 4002.0]
        assert sum(1 for _ in reader) == 10_000
        with pytest.raises(IndexError):
            reader[10_000]
    assert opened < 1.0


def test_iter_replay_files__sorted_replay_files_only(tmp_path):
    for name in ("b.mlr", "a.mlr", "c.jsonl", ".a.mlr.x1.tmp", "10.mlr"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.mlr").mkdir()
    assert [p.name for p in iter_replay_files(tmp_path)] == ["10.mlr", "a.mlr", "b.mlr"]
    assert list(iter_replay_files(tmp_path / "a.mlr")) == [tmp_path / "a.mlr"]
    with pytest.raises(ReplayError, match="no such"):
        list(iter_replay_files(tmp_path / "nothing"))


def test_bench__quick_run_reports_every_figure():
    from curriculum.benches.replay import format_replay_bench, run_replay_bench

    result = run_replay_bench(quick=True)
    assert result["replay"]["bytes_per_episode"] < 220
    assert result["ratios"]["jsonl_bytes_over_replay"] > 3
    text = format_replay_bench(result)
    assert "bytes / episode" in text and "JSON lines" in text
