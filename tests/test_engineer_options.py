"""Engineer options declared once: the declaration checks the value, names it in the error, and lists it."""

import dataclasses
import math
import os
import subprocess
import sys

import pytest

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
def test_side_table_state__round_trips_and_a_bad_document_names_the_engineer_and_the_shape(name):
    first = make_engineer(name)
    tables = [field.name for field in dataclasses.fields(first) if field.metadata.get("side_table")]
    first.load_state({table: {"5": 2, "3": 1} for table in tables})
    assert [list(table) for table in first.state().values()] == [["3", "5"]] * len(tables)  # sides ascending
    assert first.state() == {table: {"3": 1, "5": 2} for table in tables}
    again = make_engineer(name)
    again.load_state(first.state())
    assert again.state() == first.state() and make_engineer(name).state() == {table: {} for table in tables}
    for bad in ({tables[0]: {"x": 1.0}}, {tables[0]: ["3"]}, {tables[0]: {"3": "high"}}, {tables[0]: {"3": math.nan}}):
        with pytest.raises(ConfigError) as caught:
            make_engineer(name).load_state(bad)
        assert f"{name} state" in str(caught.value) and f"{tables[0]}: {{side: " in str(caught.value)
    with pytest.raises(ConfigError, match="target state"):
        make_engineer("target").load_state({"targets": {"4": 0.5}})  # a target below makespan 1
