"""Declared fields (simulator.fields): one declaration gives the check, the error, the settings table and the
JSON Schema, and they agree with each other."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curriculum.config import Engineer, RunConfig, Training, Validation, WarmStart, preset, settings_rows
from engineer.engineers import ENGINEERS
from simulator.config import SizeSpec, StageConfig
from simulator.errors import ConfigError
from simulator.fields import ALLOWED, Allowed, check_fields, field_rows, integer, number

DECLARING = [SizeSpec, StageConfig, WarmStart, Training, Validation, Engineer, RunConfig]
ALLOWEDS = [
    Allowed(0, 1), Allowed(1, 1000, integer=True), Allowed(0, 1, low_open=True), Allowed(None, 5),
    Allowed(2, None, integer=True), Allowed(choices=("a", "b")), Allowed(boolean=True),
    Allowed(1, 4096, integer=True, optional=True), Allowed(-100.0, 100.0),
]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                   st.sampled_from(["a", "b", "c", "", "1"]), st.lists(st.integers(), max_size=2))


@pytest.mark.parametrize("cls", DECLARING + [kind.build for kind in ENGINEERS.values()],
                         ids=lambda cls: cls.__name__)
def test_every_declared_default_is_allowed_by_its_own_declaration(cls):
    for field in dataclasses.fields(cls):
        if ALLOWED in field.metadata and field.default is not dataclasses.MISSING:
            assert field.metadata[ALLOWED].admits(field.default), (cls.__name__, field.name)


@pytest.mark.parametrize("allowed", ALLOWEDS, ids=str)
@settings(max_examples=150, deadline=None)
@given(value=VALUES)
def test_the_json_schema_admits_exactly_what_the_check_admits(allowed, value):
    # the schema's integer type takes 1.0 (JSON has one number type); the check does not: compare on the rest
    if allowed.integer and isinstance(value, float) and value.is_integer():
        return
    try:
        jsonschema.validate(value, allowed.schema())
        by_schema = True
    except jsonschema.ValidationError:
        by_schema = False
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        assert not allowed.admits(value)  # JSON has no NaN or infinity: the schema is not asked
        return
    assert by_schema == allowed.admits(value), (allowed, value)


def test_check_fields_names_the_field_the_value_and_the_declared_range():
    @dataclasses.dataclass
    class Part:
        steps: int = integer(60, 1, 100)
        rate: float = number(0.5, 0, 1)

    check_fields(Part(), "training")
    with pytest.raises(ConfigError) as error:
        check_fields(Part(steps=0, rate=7), "training")
    assert (error.value.field, error.value.value, error.value.allowed) == ("training.steps", 0, "an integer in [1, 100]")
    with pytest.raises(ConfigError, match="rate = True"):
        check_fields(Part(rate=True), "")
    assert [row.name for row in field_rows(Part, prefix="x.")] == ["x.steps", "x.rate"]


def test_run_config_checks_read_the_declarations():
    with pytest.raises(ConfigError) as error:
        preset("tiny").with_overrides(**{"training.generations": 1})
    assert error.value.field == "training.generations" and error.value.allowed == "an integer in [2, 1024]"
    with pytest.raises(ConfigError, match="one of grpo, rft"):
        preset("tiny").with_overrides(**{"training.trainer": "ppo"})
    with pytest.raises(ConfigError, match=r"validation.top_p = 0 .*\(0, 1\]"):
        preset("tiny").with_overrides(**{"validation.top_p": 0})


def test_settings_list_every_key_set_takes_and_each_takes_its_listed_default():
    rows = settings_rows()
    names = [row.name for row in rows]
    document = preset("tiny").to_dict()
    flat = [f"{key}.{inner}" if isinstance(value, dict) and key not in ("initial_config",) else key
            for key, value in document.items() for inner in (value if isinstance(value, dict) else [None])]
    flat = [name.removesuffix(".None") for name in flat]
    assert set(names) == set(flat) and len(names) == len(set(names))
    base = preset("tiny")
    for row in rows:
        if "stage config" in row.allowed or row.name in ("name", "validation.config", "initial_config"):
            continue
        value = list(row.default) if isinstance(row.default, tuple) else row.default
        assert base.with_overrides(**{row.name: value}).to_dict() is not None, row.name
    assert all(row.help for row in rows), [row.name for row in rows if not row.help]


def test_train_settings_prints_the_table_within_80_columns():
    out = subprocess.run([sys.executable, "-m", "curriculum.cli", "train", "--settings"], capture_output=True,
                         text=True, env={"COLUMNS": "80", "PATH": ""}, check=True).stdout
    assert "training.steps = 60" in out and "allowed: an integer in [1, 10000000]" in out
    assert max(len(line) for line in out.splitlines()) <= 80
