"""Engineer options declared once: the declaration checks the value, names it in the error, and lists it."""

import dataclasses
import functools
import math
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engineer.engineers import ENGINEERS, engineer_summary, make_engineer
from engineer.options import ALLOWED, Allowed, check_options, field_docs, number, option_names, option_table
from simulator.errors import ConfigError

NAMES = list(ENGINEERS)


def _declared(name):
    """(field, Allowed) of every option of ``name`` that declares its values."""
    return [(field, field.metadata[ALLOWED]) for field in dataclasses.fields(ENGINEERS[name].build)
            if ALLOWED in field.metadata]


def _build(name, **options):
    kind = ENGINEERS[name]
    return make_engineer(f"{name}:hf:unused" if kind.takes_target else name, **options)


@pytest.mark.parametrize("name", NAMES)
def test_option_table__every_option_has_help_and_every_declared_default_is_allowed(name):
    rows = option_table(ENGINEERS[name].build)
    assert [row.name for row in rows if not row.help] == []
    assert {row.name for row in rows} <= set(option_names(ENGINEERS[name].build))
    for field, allowed in _declared(name):
        assert allowed.admits(field.default), (name, field.name)
    assert engineer_summary(name)[0].isupper() and engineer_summary(name).endswith(".")


@pytest.mark.parametrize("name", [name for name in NAMES if _declared(name)])
def test_check_options__a_value_outside_each_declaration_names_engineer_option_value_and_range(name):
    for field, allowed in _declared(name):
        bad = "no-such-choice" if allowed.choices else (allowed.low - 1 if allowed.low is not None else "x")
        with pytest.raises(ConfigError) as caught:
            _build(name, **{field.name: bad})
        text = str(caught.value)
        assert f"{name}.{field.name}" in text and str(allowed) in text, text


def test_allowed__bools_nan_and_wrong_types_are_refused_bounds_are_inclusive():
    unit = Allowed(0, 1)
    assert unit.admits(0) and unit.admits(1) and unit.admits(0.5)
    assert not any(unit.admits(value) for value in (True, math.nan, "0.5", None, 1.0001, -0.0001))
    whole = Allowed(1, None, integer=True)
    assert whole.admits(10**12) and not whole.admits(1.0) and not whole.admits(0) and not whole.admits(False)
    assert str(whole) == "an integer >= 1" and str(Allowed(0, 9, integer=True)) == "an integer in [0, 9]"
    assert str(Allowed(choices=("a", "b"))) == "one of a, b" and str(unit) == "a number in [0, 1]"


def test_check_options__checks_fields_in_declaration_order_with_the_owners_name():
    @dataclasses.dataclass
    class Toy:
        first: float = number(0.5, 0, 1)
        """The first."""
        second: float = number(0.5, 0, 1)
        name: str = "toy"

    check_options(Toy())
    with pytest.raises(ConfigError, match=r"toy\.first"):
        check_options(Toy(first=2, second=2))
    with pytest.raises(ConfigError, match=r"toy\.second"):
        check_options(Toy(second=-1))
    assert field_docs(Toy) == {"first": "The first."}


def test_option_table__state_fields_and_python_objects_are_not_rows():
    assert "targets" in option_names(ENGINEERS["target"].build)  # a decision's state continues through it
    assert "targets" not in [row.name for row in option_table(ENGINEERS["target"].build)]
    assert "backend" not in [row.name for row in option_table(ENGINEERS["llm"].build)]
    assert [row.name for row in option_table(ENGINEERS["fixed"].build)] == []


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "curriculum.cli", "engineers", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "80"})


def test_engineers_command__lists_every_engineer_and_one_engineers_options_in_80_columns():
    listing = _cli()
    assert listing.returncode == 0, listing.stderr
    assert all(f"  {name}" in listing.stdout for name in NAMES)
    window = _cli("window")
    assert window.returncode == 0, window.stderr
    for row in option_table(ENGINEERS["window"].build):
        assert f"  {row.name} " in window.stdout and row.allowed in window.stdout
    assert "threshold       0.9" in window.stdout and "valid_rate" in window.stdout
    assert max(len(line) for text in (listing.stdout, window.stdout) for line in text.splitlines()) <= 80


def test_engineers_command__an_unknown_name_is_one_line_listing_the_names():
    result = _cli("nope")
    assert result.returncode == 2 and result.stdout == ""
    assert "'nope'" in result.stderr and "window" in result.stderr and "Traceback" not in result.stderr


def test_allowed__one_sided_and_unbounded_numbers_say_so_and_refuse_infinities():
    assert str(Allowed(1.0)) == "a number >= 1.0" and str(Allowed(high=5, integer=True)) == "an integer <= 5"
    assert str(Allowed()) == "a number" and Allowed().admits(-1e300)
    assert not Allowed().admits(math.inf) and not Allowed(1.0).admits(math.nan) and Allowed(1.0).admits(10**6)


@pytest.mark.parametrize("name", ["bandit", "progress", "target"])
def test_side_table_state__round_trips_and_a_bad_document_names_the_engineer_the_table_and_the_side(name):
    first = make_engineer(name)
    tables = [field.name for field in dataclasses.fields(first) if field.metadata.get("side_table")]
    first.load_state({table: {"5": 1, "3": 1} for table in tables})
    assert [list(table) for table in first.state().values()] == [["3", "5"]] * len(tables)  # sides ascending
    assert first.state() == {table: {"3": 1, "5": 1} for table in tables}
    again = make_engineer(name)
    again.load_state(first.state())
    assert again.state() == first.state() and make_engineer(name).state() == {table: {} for table in tables}
    table = tables[0]
    for bad, field in (({table: {"x": 1.0}}, f"{table}.x"), ({table: ["3"]}, table), ({table: {"3": "high"}}, f"{table}.3"),
                       ({table: {"3": math.nan}}, f"{table}.3"), ({table: {"99": 1.0}}, f"{table}.99"),
                       ({table: {"-3": 1.0}}, f"{table}.-3"), ([1], "")):
        with pytest.raises(ConfigError) as caught:
            make_engineer(name).load_state(bad)
        assert str(caught.value).startswith(f"{name} state{'.' + field if field else ''} = "), str(caught.value)
    with pytest.raises(ConfigError, match=r"target state\.targets\.4 = 0\.5"):
        make_engineer("target").load_state({"targets": {"4": 0.5}})  # a target below makespan 1


# Every stateful engineer's state keys and what each takes (a side table's per-side values, the gap's ratios).
STATE_KEYS = {
    "bandit": {"values": Allowed(0.0), "counts": Allowed(0, 10**15, integer=True)},
    "progress": {"values": Allowed(0.0), "rates": Allowed(0.0, 1.0)},
    "target": {"targets": Allowed(1.0, 4096.0)},
    "gap": {"lesson": Allowed(0.0, 0.9, optional=True), "start.hole_ratio": Allowed(0.0, 0.9),
            "start.wait_ratio": Allowed(0.0, 1.0)},
    "replay": {"buffer.seen": Allowed(0, 1000, integer=True)},
}


@functools.lru_cache(maxsize=1)
def _one_instance() -> dict:
    from simulator.generator import generate
    from tests.engineer.test_engineer_engineers import CONFIG

    return generate(dataclasses.replace(CONFIG, samples=1)).instances[0].to_dict()


def _state_with(name: str, key: str, value):
    """A state document of ``name`` that is valid but for ``value`` at ``key`` (and the field its error names)."""
    if name == "gap":
        if key == "lesson":
            return {"start": {}, "lesson": value}, "gap state.lesson"
        ratios = {"hole_ratio": 0.2, "wait_ratio": 0.3, key.split(".")[1]: value}
        return {"start": {"6": ratios}, "lesson": None}, f"gap state.start.6.{key.split('.')[1]}"
    if name == "replay":
        return {"buffer": [{"instance": _one_instance(), "seen": value}]}, "replay state.buffer[0].seen"
    return {key: {"6": value}}, f"{name} state.{key}.6"


def test_state_keys__cover_every_stateful_engineer_in_the_registry():
    stateful = {name for name, kind in ENGINEERS.items() if hasattr(kind.build, "load_state")}
    assert stateful == set(STATE_KEYS)


@pytest.mark.parametrize("name, key", [(name, key) for name, keys in STATE_KEYS.items() for key in keys])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30), st.booleans(),
                       st.none(), st.text(max_size=3), st.sampled_from([math.nan, -math.inf, 5, 0.95, -1, 1e309])))
def test_load_state__takes_exactly_what_the_declared_range_admits_and_names_the_key(name, key, value):
    allowed = STATE_KEYS[name][key]
    document, field = _state_with(name, key, value)
    engineer = make_engineer(name)
    if allowed.admits(value):
        engineer.load_state(document)
        written = engineer.state()
        again = make_engineer(name)
        again.load_state(written)  # what it writes on, it reads back
        assert again.state() == written
    else:
        with pytest.raises(ConfigError) as caught:
            engineer.load_state(document)
        message = str(caught.value)
        assert message.startswith(f"{field} = ") and "\n" not in message, message
