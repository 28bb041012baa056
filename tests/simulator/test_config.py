"""Tests of the stage config (simulator/config.py): validation, documents, files, schema and helpers."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import pickle
import stat
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import config
from simulator.config import (
    MAX_SIZE,
    MIN_SIZE,
    SizeSpec,
    StageConfig,
    config_json_schema,
    default_stage_config,
    diff_configs,
    format_config_text,
    load_config,
    parse_config_text,
    save_config,
)
from simulator.errors import ConfigError
from tests.documents import DELETE, set_at

jsonschema = pytest.importorskip("jsonschema")

EXAMPLE_YAML = """\
agents: 2            # or [2, 3]
samples: 4000
seed: 0
slip: 0.0
horizon: null
sizes:
  "4": {data_ratio: 0.25, hole_ratio: 0.2, wait_ratio: 0.3}
  "6": {data_ratio: 0.75, hole_ratio: 0.3, wait_ratio: 0.5}
"""


def good_document() -> dict:
    """A fresh valid document; tests mutate their own copy."""
    return {
        "agents": 2,
        "samples": 100,
        "seed": 7,
        "slip": 0.0,
        "horizon": None,
        "sizes": {
            "4": {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3},
            "6": {"data_ratio": 0.75, "hole_ratio": 0.3, "wait_ratio": 0.5},
        },
    }


def float_bits(value):
    """The document with every float replaced by its exact hex spelling, so -0.0 and 0.0 differ."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, dict):
        return {key: float_bits(entry) for key, entry in value.items()}
    if isinstance(value, list):
        return [float_bits(entry) for entry in value]
    return value


# --- strategies ----------------------------------------------------------------------------------------------
@st.composite
def stage_configs(draw) -> StageConfig:
    """Valid configs, floats drawn from the whole allowed range (subnormals included)."""
    agents_min = draw(st.integers(1, 5))
    agents_max = draw(st.integers(agents_min, 8))
    sides = draw(st.lists(st.integers(MIN_SIZE, MAX_SIZE), min_size=1, max_size=6, unique=True))
    weights = draw(
        st.lists(st.integers(0, 1000), min_size=len(sides), max_size=len(sides)).filter(lambda ws: sum(ws) > 0)
    )
    sizes = {}
    for side, weight in zip(sides, weights):
        # Stay within the capacity rule: at most side*side - agents_max holes.
        max_hole = min(config.MAX_HOLE_RATIO, (side * side - agents_max) / (side * side))
        wait = draw(st.floats(0.0, 1.0)) if agents_max >= 2 else 0.0
        least = draw(st.none() | st.integers(1, config.MAX_HORIZON))
        most = draw(st.none() | st.integers(least or 1, config.MAX_HORIZON))
        sizes[side] = SizeSpec(
            data_ratio=weight / sum(weights), hole_ratio=draw(st.floats(0.0, max_hole)), wait_ratio=wait,
            min_makespan=least, max_makespan=most,
        )
    return StageConfig(
        agents_min=agents_min,
        agents_max=agents_max,
        samples=draw(st.integers(1, config.MAX_SAMPLES)),
        sizes=sizes,
        seed=draw(st.integers(0, config.MAX_SEED)),
        slip=draw(st.floats(0.0, 1.0)),
        horizon=draw(st.none() | st.integers(1, config.MAX_HORIZON)),
    )


# --- validation, table-driven --------------------------------------------------------------------------------
def _set(path: str, value):
    """A mutation of good_document(): set the dotted path (keys as written) to value."""
    return lambda document: set_at(document, path.split("."), value)


def _delete(path: str):
    return _set(path, DELETE)


def _chain(*mutations):
    def mutate(document: dict) -> None:
        for mutation in mutations:
            mutation(document)

    return mutate


def _replace_sizes(sizes):
    def mutate(document: dict) -> None:
        document["sizes"] = sizes

    return mutate


ONE_SIZE = {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}
NAN, INF = float("nan"), float("inf")

# (row id, mutation of good_document(), field named in the error, whether the JSON Schema alone rejects it:
#  True / False for rules across fields the schema cannot state / None where the document is not JSON at all)
BAD_DOCUMENTS = [
    ("agents zero", _set("agents", 0), "agents", True),
    ("agents above 16", _set("agents", 17), "agents", True),
    ("agents range reversed", _set("agents", [3, 2]), "agents", False),
    ("agents range of one", _set("agents", [2]), "agents", True),
    ("agents range of three", _set("agents", [1, 2, 3]), "agents", True),
    ("agents range above 16", _set("agents", [2, 20]), "agents", True),
    ("agents bool", _set("agents", True), "agents", True),
    ("agents string", _set("agents", "2"), "agents", True),
    ("agents float", _set("agents", 2.5), "agents", True),
    ("agents mapping", _set("agents", {"min": 1, "max": 2}), "agents", True),
    ("samples zero", _set("samples", 0), "samples", True),
    ("samples too many", _set("samples", 1_000_001), "samples", True),
    ("samples string", _set("samples", "100"), "samples", True),
    ("samples fractional", _set("samples", 10.5), "samples", True),
    ("seed negative", _set("seed", -1), "seed", True),
    ("seed 2**63", _set("seed", 2**63), "seed", True),
    ("seed null", _set("seed", None), "seed", True),
    ("slip negative", _set("slip", -0.1), "slip", True),
    ("slip above 1", _set("slip", 1.5), "slip", True),
    ("slip nan", _set("slip", NAN), "slip", None),
    ("slip inf", _set("slip", INF), "slip", None),
    ("slip huge integer", _set("slip", 10**400), "slip", True),
    ("slip string", _set("slip", "0.1"), "slip", True),
    ("slip bool", _set("slip", False), "slip", True),
    ("horizon zero", _set("horizon", 0), "horizon", True),
    ("horizon too long", _set("horizon", 4097), "horizon", True),
    ("horizon fractional", _set("horizon", 12.5), "horizon", True),
    ("horizon string", _set("horizon", "auto"), "horizon", True),
    ("sizes empty", _replace_sizes({}), "sizes", True),
    ("sizes list", _replace_sizes([4, 6]), "sizes", True),
    ("sizes missing", _delete("sizes"), "sizes", True),
    ("agents missing", _delete("agents"), "agents", True),
    ("samples missing", _delete("samples"), "samples", True),
    ("unknown top-level key", _set("episodes", 3), "episodes", True),
    ("side too small", _replace_sizes({"2": ONE_SIZE}), "sizes.2", True),
    ("side too large", _replace_sizes({"33": ONE_SIZE}), "sizes.33", True),
    ("side written 4x4", _replace_sizes({"4x4": ONE_SIZE}), "sizes.4x4", True),
    ("side with leading zero", _replace_sizes({"04": ONE_SIZE}), "sizes.04", True),
    ("side as float key", _replace_sizes({4.0: ONE_SIZE}), "sizes.4.0", None),
    ("side as bool key", _replace_sizes({True: ONE_SIZE}), "sizes.True", None),
    ("side twice, int and string", _replace_sizes({4: ONE_SIZE, "4": ONE_SIZE}), "sizes.4", None),
    ("size entry not a mapping", _set("sizes.4", 0.25), "sizes.4", True),
    ("size key unknown", _set("sizes.4.hole_ratoi", 0.1), "sizes.4.hole_ratoi", True),
    ("size key missing", _delete("sizes.4.wait_ratio"), "sizes.4.wait_ratio", True),
    ("hole ratio above 0.9", _set("sizes.4.hole_ratio", 0.95), "sizes.4.hole_ratio", True),
    ("hole ratio negative", _set("sizes.4.hole_ratio", -0.1), "sizes.4.hole_ratio", True),
    ("hole ratio nan", _set("sizes.4.hole_ratio", NAN), "sizes.4.hole_ratio", None),
    ("hole ratio string", _set("sizes.4.hole_ratio", "0.2"), "sizes.4.hole_ratio", True),
    ("hole ratio bool", _set("sizes.4.hole_ratio", True), "sizes.4.hole_ratio", True),
    ("hole ratio null", _set("sizes.4.hole_ratio", None), "sizes.4.hole_ratio", True),
    ("wait ratio above 1", _set("sizes.6.wait_ratio", 1.01), "sizes.6.wait_ratio", True),
    ("wait ratio -inf", _set("sizes.6.wait_ratio", -INF), "sizes.6.wait_ratio", None),
    ("data ratio above 1", _set("sizes.6.data_ratio", 1.5), "sizes.6.data_ratio", True),
    ("data ratios sum below 1", _set("sizes.6.data_ratio", 0.7), "sizes.*.data_ratio", False),
    ("data ratios sum above 1", _set("sizes.4.data_ratio", 0.26), "sizes.*.data_ratio", False),
    ("data ratios all zero", _replace_sizes({"4": ONE_SIZE | {"data_ratio": 0.0}}), "sizes.*.data_ratio", False),
    ("too few free cells", _set("agents", 14), "sizes.4.hole_ratio", False),
    (
        "map smaller than the agents",
        _chain(_set("agents", [2, 10]), _replace_sizes({"3": ONE_SIZE | {"hole_ratio": 0.0}})),
        "sizes.3",
        False,
    ),
    ("waits with one agent", _set("agents", 1), "sizes.4.wait_ratio", False),
    ("min makespan zero", _set("sizes.4.min_makespan", 0), "sizes.4.min_makespan", True),
    ("max makespan too long", _set("sizes.4.max_makespan", 4097), "sizes.4.max_makespan", True),
    ("max makespan fractional", _set("sizes.6.max_makespan", 3.5), "sizes.6.max_makespan", True),
    ("min makespan bool", _set("sizes.6.min_makespan", True), "sizes.6.min_makespan", True),
    ("min makespan string", _set("sizes.6.min_makespan", "3"), "sizes.6.min_makespan", True),
    ("makespan band reversed", _chain(_set("sizes.4.min_makespan", 5), _set("sizes.4.max_makespan", 3)),
     "sizes.4.max_makespan", False),
]


@pytest.mark.parametrize(
    ("mutation", "field"), [pytest.param(m, f, id=name) for name, m, f, _ in BAD_DOCUMENTS]
)
def test_from_dict__bad_document_names_the_field(mutation, field):
    document = good_document()
    mutation(document)
    with pytest.raises(ConfigError) as caught:
        StageConfig.from_dict(document)
    assert caught.value.field == field
    message = str(caught.value)
    assert message.startswith(field) and "is not allowed" in message and caught.value.allowed in message


def test_from_dict__unknown_key_lists_allowed_keys_and_suggests():
    document = good_document()
    document["sample"] = 5
    with pytest.raises(ConfigError) as caught:
        StageConfig.from_dict(document)
    message = str(caught.value)
    for key in config.TOP_LEVEL_KEYS:
        assert key in message
    assert "did you mean 'samples'?" in message


def test_from_dict__capacity_error_states_the_rule():
    document = good_document()
    document["agents"] = 12
    document["sizes"]["4"]["hole_ratio"] = 0.3  # 4x4: round(4.8) = 5 holes, 11 free cells < 12 agents
    with pytest.raises(ConfigError) as caught:
        StageConfig.from_dict(document)
    assert caught.value.field == "sizes.4.hole_ratio"
    assert "5 holes leave 11 free cells" in str(caught.value)
    assert "at most 0.25" in caught.value.allowed


def test_from_dict__not_a_mapping_raises():
    with pytest.raises(ConfigError) as caught:
        StageConfig.from_dict([1, 2])
    assert caught.value.field == "config"


@pytest.mark.parametrize(
    ("agents", "expected_counts"),
    [(1, (1,)), (3, (3,)), ([2, 3], (2, 3)), ([2, 2], (2,)), ([1, 4], (1, 2, 3, 4)), ((2, 5), (2, 3, 4, 5))],
)
def test_from_dict__agents_int_or_range(agents, expected_counts):
    document = good_document()
    document["agents"] = agents
    for spec in document["sizes"].values():
        spec["wait_ratio"] = 0.0  # a 1-agent stage cannot ask for waits
    cfg = StageConfig.from_dict(document)
    assert cfg.agent_counts() == expected_counts
    assert (cfg.agents_min, cfg.agents_max) == (expected_counts[0], expected_counts[-1])


def test_from_dict__int_and_string_size_keys_are_the_same():
    with_strings = good_document()
    with_ints = good_document()
    with_ints["sizes"] = {int(side): spec for side, spec in with_ints["sizes"].items()}
    assert StageConfig.from_dict(with_strings) == StageConfig.from_dict(with_ints)


def test_from_dict__optional_keys_default():
    cfg = StageConfig.from_dict({"agents": 2, "samples": 10, "sizes": {3: ONE_SIZE}})
    assert (cfg.seed, cfg.slip, cfg.horizon) == (0, 0.0, None)


def test_from_dict__zero_data_ratio_size_is_allowed_and_skips_capacity():
    document = good_document()
    document["agents"] = 6
    # 3x3 with 80% holes has 2 free cells, too few for 6 agents, but the size is unused.
    document["sizes"]["3"] = {"data_ratio": 0.0, "hole_ratio": 0.8, "wait_ratio": 1.0}
    cfg = StageConfig.from_dict(document)
    assert cfg.used_sizes() == (4, 6)
    assert cfg.size_counts()[3] == 0


@pytest.mark.parametrize(("offset", "accepted"), [(5e-7, True), (-5e-7, True), (2e-6, False), (-2e-6, False)])
def test_from_dict__data_ratio_sum_tolerance(offset, accepted):
    document = good_document()
    document["sizes"]["6"]["data_ratio"] = 0.75 + offset
    if accepted:
        StageConfig.from_dict(document)
    else:
        with pytest.raises(ConfigError, match=r"sizes\.\*\.data_ratio"):
            StageConfig.from_dict(document)


def test_from_dict__capacity_boundary_is_exact():
    # 4x4 = 16 cells, 13 agents: at most 3 holes. hole_ratio 0.2 -> round(3.2) = 3 holes (ok);
    # 0.21875 -> 3.5 rounds half up to 4 holes (13 - 1 = 12 free, too few).
    document = good_document()
    document["agents"] = 13
    document["sizes"] = {"4": {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.0}}
    assert StageConfig.from_dict(document).sizes[4].free_cells(4) == 13
    document["sizes"]["4"]["hole_ratio"] = 0.21875
    with pytest.raises(ConfigError) as caught:
        StageConfig.from_dict(document)
    assert caught.value.field == "sizes.4.hole_ratio"


@pytest.mark.parametrize(
    ("hole_ratio", "side", "holes"),
    [(0.0, 5, 0), (0.3, 10, 30), (0.2, 3, 2), (0.5, 3, 5), (0.125, 4, 2), (0.9, 32, 922), (0.03125, 4, 1)],
)
def test_size_spec__hole_count_rounds_half_up_exactly(hole_ratio, side, holes):
    spec = SizeSpec(data_ratio=1.0, hole_ratio=hole_ratio, wait_ratio=0.0)
    assert spec.hole_count(side) == holes
    assert spec.free_cells(side) == side * side - holes


# --- direct construction -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"data_ratio": 1.5}, "data_ratio"),
        ({"hole_ratio": 0.91}, "hole_ratio"),
        ({"wait_ratio": NAN}, "wait_ratio"),
        ({"wait_ratio": "0.5"}, "wait_ratio"),
        ({"data_ratio": True}, "data_ratio"),
        ({"min_makespan": 0}, "min_makespan"),
        ({"max_makespan": 2.0}, "max_makespan"),
        ({"min_makespan": 4, "max_makespan": 3}, "max_makespan"),
    ],
)
def test_size_spec__bad_value_names_bare_field(kwargs, field):
    values = {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3} | kwargs
    with pytest.raises(ConfigError) as caught:
        SizeSpec(**values)
    assert caught.value.field == field


def test_stage_config__direct_construction_validates():
    spec = SizeSpec(1.0, 0.2, 0.3)
    with pytest.raises(ConfigError, match="agents"):
        StageConfig(agents_min=3, agents_max=2, samples=10, sizes={4: spec})
    with pytest.raises(ConfigError) as caught:
        StageConfig(agents_min=2, agents_max=2, samples=10, sizes={"4": spec})
    assert caught.value.field == "sizes.4"
    with pytest.raises(ConfigError) as caught:
        StageConfig(agents_min=2, agents_max=2, samples=10, sizes={4: {"data_ratio": 1.0}})
    assert caught.value.field == "sizes.4"


def test_stage_config__frozen_and_sizes_read_only():
    cfg = default_stage_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.samples = 5
    with pytest.raises(TypeError):
        cfg.sizes[3] = SizeSpec(1.0, 0.0, 0.0)


def test_stage_config__copies_the_sizes_it_is_given():
    sizes = {4: SizeSpec(1.0, 0.2, 0.3)}
    cfg = StageConfig(agents_min=2, agents_max=2, samples=10, sizes=sizes)
    sizes[5] = SizeSpec(0.0, 0.0, 0.0)
    assert list(cfg.sizes) == [4]


def test_stage_config__replace_validates_again():
    cfg = default_stage_config()
    assert dataclasses.replace(cfg, samples=50).samples == 50
    with pytest.raises(ConfigError) as caught:
        dataclasses.replace(cfg, samples=0)
    assert caught.value.field == "samples"


def test_stage_config__hashable_picklable_copyable():
    cfg = default_stage_config()
    assert hash(cfg) == hash(default_stage_config())
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert copy.deepcopy(cfg) == cfg
    assert len({cfg, default_stage_config()}) == 1


def test_stage_config__sizes_iterate_ascending():
    document = good_document()
    document["sizes"] = {"6": document["sizes"]["6"], "4": document["sizes"]["4"]}
    assert list(StageConfig.from_dict(document).sizes) == [4, 6]


def test_stage_config__no_shared_mutable_state():
    first = default_stage_config()
    document = first.to_dict()
    document["sizes"]["3"]["hole_ratio"] = 0.9
    document["agents"] = 9
    assert first.to_dict() != document
    assert default_stage_config() == first
    schema = config_json_schema()
    schema["properties"].clear()
    assert config_json_schema()["properties"]


def test_default_stage_config__two_agents_sizes_3_to_6():
    cfg = default_stage_config()
    assert cfg.agent_counts() == (2,)
    assert list(cfg.sizes) == [3, 4, 5, 6]
    assert sum(cfg.size_counts().values()) == cfg.samples


# --- documents and text --------------------------------------------------------------------------------------
def test_parse_config_text__example_from_the_design_parses():
    cfg = parse_config_text(EXAMPLE_YAML, "yaml")
    assert cfg.agents == 2 and cfg.samples == 4000 and cfg.horizon is None
    assert cfg.sizes[6] == SizeSpec(data_ratio=0.75, hole_ratio=0.3, wait_ratio=0.5)


def test_to_dict__canonical_form():
    document = good_document()
    document["agents"] = [2, 3]
    document["sizes"] = {6: document["sizes"]["6"], 4: document["sizes"]["4"]}
    canonical = StageConfig.from_dict(document).to_dict()
    assert list(canonical) == list(config.TOP_LEVEL_KEYS)
    assert canonical["agents"] == [2, 3]
    assert list(canonical["sizes"]) == ["4", "6"]
    assert list(canonical["sizes"]["4"]) == list(config.REQUIRED_SIZE_KEYS)  # unset makespan bounds are left out
    document["sizes"][4] = dict(document["sizes"][4], max_makespan=5, min_makespan=2)
    assert list(StageConfig.from_dict(document).to_dict()["sizes"]["4"]) == list(config.SIZE_KEYS)
    assert StageConfig.from_dict(dict(document, agents=[3, 3])).to_dict()["agents"] == 3


def test_parse_config_text__yaml_exponent_without_dot_is_a_number():
    text = EXAMPLE_YAML.replace("slip: 0.0", "slip: 1e-3").replace("hole_ratio: 0.2", "hole_ratio: 2E-1")
    cfg = parse_config_text(text, "yaml")
    assert cfg.slip == 0.001 and cfg.sizes[4].hole_ratio == 0.2


@pytest.mark.parametrize(
    ("text", "format", "reason"),
    [
        ("", "yaml", "empty"),
        ("   \n# only a comment\n", "yaml", "empty"),
        ("agents: [2, 3\n", "yaml", "valid YAML"),
        ("- 1\n- 2\n", "yaml", "of type list"),
        ("just a string", "yaml", "of type str"),
        ("agents: 2\nagents: 3\n", "yaml", "duplicate key"),
        ("", "json", "empty"),
        ("{", "json", "valid JSON"),
        ("[1, 2]", "json", "of type list"),
        ('{"agents": 2, "agents": 3}', "json", "duplicate key"),
    ],
)
def test_parse_config_text__corrupt_document_names_source_and_reason(text, format, reason):
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, format, source="stage_3.cfg")
    assert caught.value.field == "stage_3.cfg"
    assert reason in str(caught.value)


def test_parse_config_text__unknown_format_raises():
    with pytest.raises(ConfigError, match="format"):
        parse_config_text("{}", "toml")


@settings(max_examples=60, deadline=None)
@given(cfg=stage_configs(), format=st.sampled_from(["yaml", "json"]))
def test_format_config_text__round_trip_is_exact(cfg, format):
    text = format_config_text(cfg, format)
    loaded = parse_config_text(text, format)
    assert loaded == cfg
    assert float_bits(loaded.to_dict()) == float_bits(cfg.to_dict())


@settings(max_examples=60, deadline=None)
@given(cfg=stage_configs(), string_keys=st.booleans())
def test_from_dict__round_trip_of_to_dict(cfg, string_keys):
    document = cfg.to_dict()
    if not string_keys:
        document["sizes"] = {int(side): spec for side, spec in document["sizes"].items()}
    assert StageConfig.from_dict(document) == cfg


# --- files ---------------------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=stage_configs(), suffix=st.sampled_from([".yaml", ".yml", ".json"]))
def test_save_config__load_round_trip_is_exact(cfg, suffix):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"stage{suffix}"
        save_config(cfg, path)
        loaded = load_config(path)
        assert loaded == cfg
        assert float_bits(loaded.to_dict()) == float_bits(cfg.to_dict())
        assert os.listdir(folder) == [path.name]


def test_save_config__json_file_is_plain_json(tmp_path):
    path = tmp_path / "stage.json"
    save_config(default_stage_config(), path)
    assert json.loads(path.read_text()) == default_stage_config().to_dict()


def test_save_config__replaces_old_file_without_leftovers(tmp_path):
    path = tmp_path / "stage.yaml"
    save_config(default_stage_config(), path)
    newer = dataclasses.replace(default_stage_config(), samples=77)
    save_config(newer, path)
    assert load_config(path) == newer
    assert os.listdir(tmp_path) == ["stage.yaml"]


@pytest.mark.parametrize("failing", ["format_config_text", "fsync", "replace"])
def test_save_config__failure_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch, failing):
    path = tmp_path / "stage.yaml"
    save_config(default_stage_config(), path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("simulated failure")

    if failing == "format_config_text":
        monkeypatch.setattr(config, "format_config_text", boom)
    else:
        monkeypatch.setattr(config.os, failing, boom)
    with pytest.raises(OSError, match="simulated failure"):
        save_config(dataclasses.replace(default_stage_config(), samples=5), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["stage.yaml"]


def test_save_config__new_file_0644_and_replaced_file_keeps_mode(tmp_path):
    path = tmp_path / "stage.json"
    save_config(default_stage_config(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o600)
    save_config(default_stage_config(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_save_config__unknown_suffix_raises_before_writing(tmp_path):
    with pytest.raises(ConfigError):
        save_config(default_stage_config(), tmp_path / "stage.toml")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad.yaml", b"agents: [2,\n", "valid YAML"),
        ("bad.json", b'{"agents": 2,', "valid JSON"),
        ("empty.yaml", b"", "empty"),
        ("empty.json", b"  \n", "empty"),
        ("list.yml", b"- agents\n", "of type list"),
        ("binary.yaml", b"\xff\xfe\x00agents", "UTF-8"),
        ("stage.toml", b"agents = 2", ".yaml, .yml or .json"),
    ],
)
def test_load_config__corrupt_file_names_file_and_reason(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.field == str(path)
    assert str(path) in str(caught.value) and reason in str(caught.value)


def test_load_config__missing_file_raises_config_error(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.field == str(path)


def test_load_config__content_error_keeps_field_and_names_file(tmp_path):
    path = tmp_path / "stage.yaml"
    path.write_text(EXAMPLE_YAML.replace("hole_ratio: 0.3", "hole_ratio: 0.95"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.field == "sizes.6.hole_ratio"
    assert caught.value.value == 0.95
    assert str(caught.value).startswith(f"{path}: sizes.6.hole_ratio")


# --- size_counts ---------------------------------------------------------------------------------------------
def _config_with_ratios(ratios: dict[int, float], samples: int) -> StageConfig:
    return StageConfig(
        agents_min=2,
        agents_max=2,
        samples=samples,
        sizes={side: SizeSpec(ratio, 0.2, 0.3) for side, ratio in ratios.items()},
    )


@pytest.mark.parametrize(
    ("ratios", "samples", "expected"),
    [
        ({4: 0.25, 6: 0.75}, 4000, {4: 1000, 6: 3000}),
        ({4: 0.25, 6: 0.75}, 10, {4: 3, 6: 7}),  # 2.5 / 7.5: equal remainders, smaller side wins
        ({3: 1 / 3, 4: 1 / 3, 5: 1 / 3}, 5, {3: 2, 4: 2, 5: 1}),
        ({3: 1 / 3, 4: 1 / 3, 5: 1 / 3}, 1, {3: 1, 4: 0, 5: 0}),
        ({3: 0.1, 4: 0.2, 5: 0.7}, 3, {3: 0, 4: 1, 5: 2}),  # 0.3 / 0.6 / 2.1: largest remainders 0.6, 0.3
        ({3: 0.0, 4: 1.0}, 7, {3: 0, 4: 7}),
    ],
)
def test_size_counts__largest_remainder_examples(ratios, samples, expected):
    counts = _config_with_ratios(ratios, samples).size_counts()
    assert counts == expected
    assert list(counts) == sorted(ratios)


@settings(max_examples=150, deadline=None)
@given(cfg=stage_configs())
def test_size_counts__sum_to_samples_and_stay_within_one_of_quota(cfg):
    counts = cfg.size_counts()
    assert sum(counts.values()) == cfg.samples
    assert list(counts) == list(cfg.sizes)
    total = sum(Fraction(spec.data_ratio) for spec in cfg.sizes.values())
    for side, spec in cfg.sizes.items():
        quota = cfg.samples * Fraction(spec.data_ratio) / total
        assert math.floor(quota) <= counts[side] <= math.floor(quota) + 1
        if spec.data_ratio == 0:
            assert counts[side] == 0
    assert cfg.size_counts() == counts  # deterministic


# --- diff_configs --------------------------------------------------------------------------------------------
def test_diff_configs__equal_configs_have_no_changes():
    assert diff_configs(default_stage_config(), default_stage_config()) == []


def test_diff_configs__lists_each_change_readably():
    old = parse_config_text(EXAMPLE_YAML, "yaml")
    document = old.to_dict()
    document.update(agents=[2, 3], samples=6000, horizon=32)
    document["sizes"]["6"]["hole_ratio"] = 0.4
    del document["sizes"]["4"]
    document["sizes"]["6"]["data_ratio"] = 0.8
    document["sizes"]["8"] = {"data_ratio": 0.2, "hole_ratio": 0.3, "wait_ratio": 0.5}
    new = StageConfig.from_dict(document)
    assert diff_configs(old, new) == [
        "agents: 2 -> [2, 3]",
        "samples: 4000 -> 6000",
        "horizon: null -> 32",
        "sizes.4: removed (was {data_ratio: 0.25, hole_ratio: 0.2, wait_ratio: 0.3})",
        "sizes.6.data_ratio: 0.75 -> 0.8",
        "sizes.6.hole_ratio: 0.3 -> 0.4",
        "sizes.8: added {data_ratio: 0.2, hole_ratio: 0.3, wait_ratio: 0.5}",
    ]
    assert diff_configs(new, old)[0] == "agents: [2, 3] -> 2"
    document["sizes"]["6"].update(min_makespan=2, max_makespan=None)  # null is the same as absent
    bounded = StageConfig.from_dict(document)
    assert bounded.sizes[6].max_makespan is None and bounded.sizes[6].makespan_bounds() == (2, config.MAX_HORIZON)
    assert diff_configs(new, bounded) == ["sizes.6.min_makespan: null -> 2"]
    assert "min_makespan: 2" in format_config_text(bounded, "yaml") and "max_makespan" not in format_config_text(
        bounded, "yaml")


# --- JSON Schema ---------------------------------------------------------------------------------------------
def _schema_validator():
    schema = config_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_config_json_schema__is_a_valid_2020_12_schema_with_descriptions():
    schema = config_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    for key in config.TOP_LEVEL_KEYS:
        assert schema["properties"][key]["description"]
    size_schema = schema["properties"]["sizes"]["additionalProperties"]
    assert size_schema["additionalProperties"] is False
    for key in config.SIZE_KEYS:
        assert size_schema["properties"][key]["description"]
    _schema_validator()


def test_config_json_schema__accepts_good_documents():
    validator = _schema_validator()
    example = parse_config_text(EXAMPLE_YAML, "yaml").to_dict()
    for document in (good_document(), default_stage_config().to_dict(), example):
        assert list(validator.iter_errors(document)) == []
    minimal = {"agents": [1, 2], "samples": 1, "sizes": {"32": {"data_ratio": 1, "hole_ratio": 0.9, "wait_ratio": 0}}}
    assert list(validator.iter_errors(minimal)) == []


@pytest.mark.parametrize(
    ("mutation", "schema_rejects"),
    [pytest.param(m, rejects, id=name) for name, m, _, rejects in BAD_DOCUMENTS if rejects is not None],
)
def test_config_json_schema__agrees_with_validation_on_bad_documents(mutation, schema_rejects):
    # Rows the schema can express must fail it; rows about rules across fields must pass it (the schema says
    # them only in words), so this table also documents exactly where the schema stops.
    document = good_document()
    mutation(document)
    assert bool(list(_schema_validator().iter_errors(document))) == schema_rejects


def test_config_json_schema__side_pattern_matches_exactly_the_allowed_sides():
    side_pattern = config_json_schema()["properties"]["sizes"]["propertyNames"]["pattern"]
    pattern_schema = {"type": "string", "pattern": side_pattern}
    validator = jsonschema.Draft202012Validator(pattern_schema)
    accepted = {key for key in [str(n) for n in range(0, 100)] + ["03", "4x4", " 4", "4 "] if validator.is_valid(key)}
    assert accepted == {str(side) for side in range(MIN_SIZE, MAX_SIZE + 1)}


@settings(max_examples=100, deadline=None)
@given(cfg=stage_configs())
def test_config_json_schema__every_constructed_config_validates(cfg):
    assert list(_schema_validator().iter_errors(cfg.to_dict())) == []
    assert list(_schema_validator().iter_errors(json.loads(format_config_text(cfg, "json")))) == []


@pytest.mark.parametrize("key", ["010", "07", "1:30", "-010"])
def test_parse_config_text__yaml_1_1_octal_and_base_60_numbers_are_refused_not_misread(key):
    from simulator.config import parse_config_text

    text = f"agents: 2\nsamples: 10\nsizes:\n  {key}: {{data_ratio: 1.0, hole_ratio: 0.1, wait_ratio: 0.3}}\n"
    with pytest.raises(ConfigError, match="octal or base-60"):
        parse_config_text(text, "yaml")
    assert parse_config_text(text.replace(key, "10"), "yaml").used_sizes() == (10,)
    assert parse_config_text("agents: 2\nsamples: 0x0A\nsizes: {4: {data_ratio: 1, hole_ratio: 0, wait_ratio: 0}}",
                             "yaml").samples == 10  # hex is explicit, and stays


@pytest.mark.parametrize("key, value", [("output_dir", 3), ("output_dir", [1]), ("output_dir", True), ("output_dir", ""),
                                        ("output_dir", "runs\nx"), ("warm_start.config", False),
                                        ("warm_start.config", 0), ("warm_start.config", "")])
def test_run_config__output_dir_and_warm_start_config_are_checked_like_every_other_key(key, value):
    """``--set output_dir=3`` passed --print-config and died in pathlib when the run started; ``warm_start.config=false``
    was read as null."""
    from curriculum.config import preset

    with pytest.raises(ConfigError, match=key.split(".")[0]):
        preset("tiny").with_overrides(**{key: value})
