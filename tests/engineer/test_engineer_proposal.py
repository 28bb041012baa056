"""Proposal parsing: table-driven answers -> the documented repair or the fallback; hypothesis: any text -> valid."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engineer.proposal import MAX_ANSWER_CHARS, decide_from_answer, extract_proposal
from simulator.config import StageConfig
from tests.documents import DELETE, set_at

PREVIOUS = StageConfig.from_dict({
    "agents": 2,
    "samples": 1000,
    "seed": 7,
    "sizes": {4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3},
              6: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.3}},
})

GOOD = {
    "agents": 2,
    "samples": 1000,
    "seed": 7,
    "slip": 0.0,
    "horizon": None,
    "sizes": {"4": {"data_ratio": 0.4, "hole_ratio": 0.2, "wait_ratio": 0.3},
              "6": {"data_ratio": 0.6, "hole_ratio": 0.35, "wait_ratio": 0.4}},
}
GOOD_JSON = json.dumps(GOOD)
GOOD_YAML = yaml.safe_dump(GOOD, sort_keys=False)


def _doc(**changes) -> dict:
    doc = json.loads(GOOD_JSON)
    for path, value in changes.items():
        set_at(doc, path.split("__"), value)
    return doc


def _sized(**sides) -> dict:
    doc = json.loads(GOOD_JSON)
    doc["sizes"] = sides
    return doc


def _check_invariants(decision) -> None:
    config = decision.config
    assert isinstance(config, StageConfig)
    assert StageConfig.from_dict(config.to_dict()) == config  # valid, and round-trips
    if not decision.accepted:
        assert config == PREVIOUS and decision.diff == []
    json.dumps(decision.to_dict(), allow_nan=False)  # the record is strict JSON


# (answer, accepted, text expected in the reason or a repair, check on the final config)
CASES = {
    "good_json": (GOOD_JSON, True, "accepted", lambda c: c.sizes[6].data_ratio == 0.6),
    "good_yaml": (GOOD_YAML, True, "accepted", lambda c: c.sizes[6].hole_ratio == 0.35),
    "fenced_yaml_with_prose": (
        "Size 6 is mid-range, so it gets more weight.\n```yaml\n" + GOOD_YAML + "```\nHope this helps!",
        True, "fenced block", lambda c: c.sizes[4].data_ratio == 0.4,
    ),
    "fenced_json": ("```json\n" + GOOD_JSON + "\n```", True, "fenced block", lambda c: c.sizes[6].wait_ratio == 0.4),
    "json_in_prose": ("My proposal: " + GOOD_JSON + " -- that is all.", True, "JSON object",
                      lambda c: c.sizes[6].data_ratio == 0.6),
    "yaml_after_prose": ("Here is the config.\n\n" + GOOD_YAML, True, "YAML lines", lambda c: c.sizes[4].data_ratio == 0.4),
    "thinking_then_answer": (
        "<think>Maybe sizes: {broken ```yaml\nagents: 16\n``` no.</think>\nFinal:\n```yaml\n" + GOOD_YAML + "```",
        True, "accepted", lambda c: c.agents_max == 2,
    ),
    "closing_think_only": ("so I decide.\n</think>\n" + GOOD_JSON, True, "accepted", lambda c: c.sizes[6].data_ratio == 0.6),
    # answers whose meaning must not be lost (decided as a careful reader would)
    "partial_answer_merged": ("```yaml\nsizes:\n  6: {data_ratio: 0.3, hole_ratio: 0.3, wait_ratio: 0.3}\n```", True,
                              "a partial answer", lambda c: c.sizes[6].data_ratio == 0.3 and c.sizes[4].data_ratio == 0.7),
    "whole_distribution_drops_the_rest": ("```yaml\nsizes:\n  6: {data_ratio: 1.0, hole_ratio: 0.3, wait_ratio: 0.3}\n```",
                                          True, "accepted", lambda c: c.used_sizes() == (6,)),
    "cut_off_inside_the_block": ("```yaml\nagents: 2\nsizes:\n  4:\n    data_ratio: 0.5\n    hole_ratio: 0.2\n"
                                 "    wait_ratio: 0.3\n  6:\n    data_ratio: 0.5\n", False, "cut off", None),
    # cut at a line boundary after a whole size: it read as a partial answer and was accepted without a word
    "cut_off_after_a_whole_size": ("```yaml\nagents: 2\nsizes:\n  4:\n    data_ratio: 0.5\n    hole_ratio: 0.2\n"
                                   "    wait_ratio: 0.3\n", False, "after size 4: its data ratios sum to 0.5", None),
    "unclosed_block_with_a_whole_distribution": ("```yaml\n" + GOOD_YAML, True, "never closed",
                                                 lambda c: c.sizes[6].data_ratio == 0.6),
    "new_config_then_the_old_for_reference": (
        "New config:\n```yaml\n" + GOOD_YAML + "```\nFor reference, the old config was:\n```json\n"
        + json.dumps(PREVIOUS.to_dict()) + "\n```", True, "accepted", lambda c: c.sizes[6].hole_ratio == 0.35),
    "thousands_separator": ('```yaml\nsamples: "6,000"\n```', True, "as the integer 6000", lambda c: c.samples == 6000),
    "thousands_separator_plain": ("```yaml\nsamples: 6,000\n```", True, "6000", lambda c: c.samples == 6000),
    "size_listed_twice": ("```yaml\nsizes:\n  4: {data_ratio: 0.5, hole_ratio: 0.2, wait_ratio: 0.3}\n"
                          "  4: {data_ratio: 0.5, hole_ratio: 0.3, wait_ratio: 0.3}\n```", False, "listed twice", None),
    # the real reason, when the block that looked like a config said why it is not one
    "tab_indentation": ("```yaml\nsizes:\n\t4: {data_ratio: 1.0, hole_ratio: 0.2, wait_ratio: 0.3}\n```", False,
                        "a tab in the indentation", None),
    "json_with_comments": ('```json\n{"sizes": {"4": {"data_ratio": 1}} // more holes\n}\n```', False,
                           "a // comment", None),
    "two_documents": ("```yaml\nsamples: 5\n---\nsamples: 6\n```", False, "two YAML documents", None),
    "number_too_long": ("```yaml\nsamples: " + "9" * 5000 + "\n```", False, "a number too long", None),
    "unclosed_thinking": ("<think>I should raise holes " * 20, False, "never closed", None),
    "truncated_json": (GOOD_JSON[: len(GOOD_JSON) // 2], False, "no JSON or YAML", None),
    "truncated_fence": ("```yaml\nagents: 2\nsizes:\n  '4': {data_ratio: 0.5, hole_r", False, "no JSON or YAML", None),
    "nan_ratio": (GOOD_JSON.replace('"hole_ratio": 0.35', '"hole_ratio": NaN'), False, "sizes.6.hole_ratio", None),
    "infinite_ratio": (GOOD_JSON.replace('"wait_ratio": 0.4', '"wait_ratio": Infinity'), False, "sizes.6.wait_ratio", None),
    "huge_ratio": (GOOD_JSON.replace('"hole_ratio": 0.35', '"hole_ratio": 1e308'), False, "sizes.6.hole_ratio", None),
    "huge_data_ratios_overflow": (
        json.dumps(_doc(sizes__4__data_ratio=1e308, sizes__6__data_ratio=1e308)), False, "data_ratio", None,
    ),
    "huge_samples_kept_previous": (json.dumps(_doc(samples=1e308)), True, "kept the previous 1000",
                                   lambda c: c.samples == 1000),
    "huge_integer_hole_ratio": (GOOD_JSON.replace('"hole_ratio": 0.35', '"hole_ratio": ' + "9" * 400), False,
                                "hole_ratio", None),
    "negative_size": (json.dumps(_sized(**{"-4": GOOD["sizes"]["4"], "6": GOOD["sizes"]["6"]})), False, "sizes.-4", None),
    "size_out_of_range": (json.dumps(_sized(**{"40": {"data_ratio": 1, "hole_ratio": 0.1, "wait_ratio": 0}})), False,
                          "sizes.40", None),
    "unknown_keys": (
        json.dumps({**_doc(), "temperature": 3, "sizes": {
            "4": {**GOOD["sizes"]["4"], "difficulty": "hard"}, "6": GOOD["sizes"]["6"]}}),
        True, "dropped unknown key 'temperature'", lambda c: c.sizes[4].data_ratio == 0.4,
    ),
    "ratios_sum_to_3": (
        json.dumps(_sized(**{"4": {"data_ratio": 1, "hole_ratio": 0.2, "wait_ratio": 0.3},
                             "5": {"data_ratio": 1, "hole_ratio": 0.2, "wait_ratio": 0.3},
                             "6": {"data_ratio": 1, "hole_ratio": 0.2, "wait_ratio": 0.3}})),
        True, "summed to 3", lambda c: all(abs(spec.data_ratio - 1 / 3) < 1e-12 for spec in c.sizes.values()),
    ),
    "percent_ratios_sum_to_100": (
        json.dumps(_sized(**{"4": {"data_ratio": 25, "hole_ratio": 0.2, "wait_ratio": 0.3},
                             "6": {"data_ratio": 75, "hole_ratio": 0.2, "wait_ratio": 0.3}})),
        True, "summed to 100", lambda c: c.sizes[6].data_ratio == 0.75,
    ),
    "negative_data_ratio": (json.dumps(_doc(sizes__4__data_ratio=-0.4, sizes__6__data_ratio=1.4)), False, "data_ratio",
                            None),
    "empty_answer": ("", False, "empty", None),
    "whitespace_answer": ("  \n\t ", False, "empty", None),
    "prose_only": ("I would make the maps bigger and add more holes.", False, "no JSON or YAML", None),
    "not_a_mapping": ("[1, 2, 3]", False, "no JSON or YAML", None),
    "mapping_without_config_keys": ('{"answer": 42}', False, "no JSON or YAML", None),
    "wrapped_with_rationale": (json.dumps({"rationale": "size 6 is mid-range", "config": GOOD}), True, "'config' key",
                               lambda c: c.sizes[6].data_ratio == 0.6),
    "percent_strings": (json.dumps(_doc(sizes__6__hole_ratio="25%", sizes__6__wait_ratio="0.5")), True, "'25%'",
                        lambda c: c.sizes[6].hole_ratio == 0.25 and c.sizes[6].wait_ratio == 0.5),
    "partial_only_sizes": (json.dumps({"sizes": GOOD["sizes"]}), True, "agents: missing; kept the previous 2",
                           lambda c: c.samples == 1000 and c.seed == 7 and c.sizes[6].data_ratio == 0.6),
    "missing_key_of_listed_side": (json.dumps(_doc(sizes__6__wait_ratio=DELETE)), True,
                                   "sizes.6.wait_ratio: missing; kept the previous 0.3",
                                   lambda c: c.sizes[6].wait_ratio == 0.3),
    "missing_key_of_new_side": (
        json.dumps(_sized(**{"4": GOOD["sizes"]["4"], "8": {"data_ratio": 0.6, "hole_ratio": 0.2}})), False,
        "sizes.8.wait_ratio", None,
    ),
    "sizes_as_list": (
        json.dumps({"agents": 2, "sizes": [{"size": 4, "data_ratio": 0.3, "hole_ratio": 0.2, "wait_ratio": 0.3},
                                           {"size": 6, "data_ratio": 0.7, "hole_ratio": 0.2, "wait_ratio": 0.3}]}),
        True, "list of entries", lambda c: c.sizes[6].data_ratio == 0.7,
    ),
    "sizes_list_with_odd_side": ('{"sizes": [{"size": []}, {"size": {"a": 1}}]}', False, "sizes", None),
    "square_keys": ("agents: 2\nsizes:\n  4x4: {data_ratio: 0.5, hole_ratio: 0.1, wait_ratio: 0.2}\n"
                    "  6x6: {data_ratio: 0.5, hole_ratio: 0.1, wait_ratio: 0.2}\n", True, "read as side 4",
                    lambda c: set(c.sizes) == {4, 6}),
    "non_square_key": ("agents: 2\nsizes:\n  4x6: {data_ratio: 1, hole_ratio: 0.1, wait_ratio: 0.2}\n", False,
                       "sizes.4x6", None),
    "integral_float_agents": (json.dumps(_doc(agents=3.0)), True, "read as the integer 3", lambda c: c.agents_max == 3),
    "agents_out_of_range": (json.dumps(_doc(agents=40)), False, "agents", None),
    "wait_with_one_agent": (json.dumps(_doc(agents=1)), False, "wait_ratio", None),
    "capacity_broken": (json.dumps(_sized(**{"3": {"data_ratio": 1, "hole_ratio": 0.9, "wait_ratio": 0.3}})), False,
                        "sizes.3.hole_ratio", None),
    "python_tag_not_evaluated": ("agents: !!python/object/apply:os.system ['echo pwned']\nsizes: {}\n", False,
                                 "no JSON or YAML", None),
    "duplicate_side_spellings": ("agents: 2\nsizes:\n  4: {data_ratio: 0.5, hole_ratio: 0.1, wait_ratio: 0.2}\n"
                                 "  4x4: {data_ratio: 0.5, hole_ratio: 0.1, wait_ratio: 0.2}\n", False, "sizes", None),
    "boolean_ratio": (json.dumps(_doc(sizes__4__hole_ratio=True)), False, "sizes.4.hole_ratio", None),
    "makespan_bounds_as_text": (json.dumps(_doc(sizes__4__min_makespan="3", sizes__4__max_makespan=5.0)), True,
                                "5.0 read as the integer 5",
                                lambda c: c.sizes[4].makespan_bounds() == (3, 5) and c.sizes[6].max_makespan is None),
    "makespan_bound_null": (json.dumps(_doc(sizes__4__max_makespan=None)), True, "accepted",
                            lambda c: c.sizes[4].max_makespan is None),
    "makespan_band_reversed": (json.dumps(_doc(sizes__4__min_makespan=5, sizes__4__max_makespan=2)), False,
                               "sizes.4.max_makespan", None),
    "makespan_bound_zero": (json.dumps(_doc(sizes__6__max_makespan=0)), False, "sizes.6.max_makespan", None),
    "yaml_date_value": ("agents: 2\nsamples: 2024-01-01\nsizes:\n  4: {data_ratio: 1, hole_ratio: 0.1, wait_ratio: 0.2}\n",
                        True, "samples", lambda c: c.samples == 1000),
}


@pytest.mark.parametrize("name", list(CASES))
def test_decide_from_answer__table(name):
    answer, accepted, expected, check = CASES[name]
    decision = decide_from_answer("test", answer, PREVIOUS)
    _check_invariants(decision)
    assert decision.accepted == accepted, decision.reason
    recorded = " | ".join([decision.reason, *decision.repairs])
    assert expected in recorded, recorded
    if check is not None:
        assert check(decision.config)
    if accepted:
        assert decision.proposal is not None


def test_decide_from_answer__makespan_bounds_left_out_are_kept_from_the_current_config():
    bounded = StageConfig.from_dict({**PREVIOUS.to_dict(), "sizes": {
        "4": {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3, "min_makespan": 2, "max_makespan": 4},
        "6": {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.3, "max_makespan": 6}}})
    whole = decide_from_answer("test", GOOD_JSON, bounded)
    assert whole.accepted and whole.config.sizes[4].makespan_bounds()[0] == 2 and whole.config.sizes[6].max_makespan == 6
    assert "sizes.4.min_makespan: missing; kept the previous 2" in whole.repairs
    assert not any("sizes.6.min_makespan" in repair for repair in whole.repairs)  # unset before: nothing to keep
    partial = decide_from_answer("test", json.dumps({"sizes": {"4": {"data_ratio": 0.3, "hole_ratio": 0.2,
                                                                      "wait_ratio": 0.3}}}), bounded)
    assert partial.accepted and partial.config.sizes[6].max_makespan == 6  # a size left out keeps its bounds


def test_decide_from_answer__rationale_is_the_prose_around_the_document():
    decision = decide_from_answer("test", "Size 6 is mid-range.\n```yaml\n" + GOOD_YAML + "```\nDone.", PREVIOUS)
    assert decision.rationale == "Size 6 is mid-range. Done."
    assert decision.diff == [
        "sizes.4.data_ratio: 0.5 -> 0.4",
        "sizes.6.data_ratio: 0.5 -> 0.6",
        "sizes.6.hole_ratio: 0.3 -> 0.35",
        "sizes.6.wait_ratio: 0.3 -> 0.4",
    ]


def test_decide_from_answer__huge_answer_is_cut_at_the_documented_limit():
    tail_document = "x" * (3 * MAX_ANSWER_CHARS) + "\n```yaml\n" + GOOD_YAML + "```"
    decision = decide_from_answer("test", tail_document, PREVIOUS)
    _check_invariants(decision)
    assert not decision.accepted  # the document lies beyond the limit, so it is never read
    assert len(decision.raw_answer) == MAX_ANSWER_CHARS
    assert decision.details["answer_chars"] == len(tail_document)
    assert any("cut" in note for note in decision.repairs)
    head_document = "```yaml\n" + GOOD_YAML + "```\n" + "y" * (3 * MAX_ANSWER_CHARS)
    assert decide_from_answer("test", head_document, PREVIOUS).accepted


def test_extract_proposal__yaml_aliases_are_refused_quickly():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20)
    ) + "agents: *u\n"
    started = time.perf_counter()
    parsed = extract_proposal(bomb)
    assert parsed.document is None
    assert time.perf_counter() - started < 2.0


def test_extract_proposal__hostile_nesting_is_bounded():
    started = time.perf_counter()
    for text in ("{" * 20_000, '{"a":' * 10_000, "[" * 20_000 + "agents: 2", "- " * 10_000):
        decision = decide_from_answer("test", text, PREVIOUS)
        _check_invariants(decision)
        assert not decision.accepted
    assert time.perf_counter() - started < 10.0


def test_decision_record__holds_raw_answer_proposal_repairs_and_diff():
    answer = json.dumps(_doc(samples="2000", sizes__6__hole_ratio=float("nan")))
    record = decide_from_answer("test", answer, PREVIOUS).to_dict()
    assert record["accepted"] is False and record["raw_answer"] == answer
    assert record["proposal"]["sizes"]["6"]["hole_ratio"] == "nan"  # strict JSON: NaN recorded as text
    assert record["config"] == PREVIOUS.to_dict() == record["previous"]
    assert record["diff"] == []
    assert any("'2000'" in repair for repair in record["repairs"])


# --- hypothesis: any text in, a valid config out --------------------------------------------------------------
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.sampled_from(["25%", "0.3", "1e-3", "4x4", "NaN"]),
)
_keys = st.one_of(
    st.sampled_from(["agents", "samples", "seed", "slip", "horizon", "sizes", "data_ratio", "hole_ratio",
                     "wait_ratio", "config", "rationale", "3", "4", "6", "-4", "10x10", "size"]),
    st.text(max_size=6),
)
_values = st.recursive(
    _scalars, lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=5)),
    max_leaves=25,
)


@st.composite
def near_configs(draw) -> dict:
    """Documents close to a config: the right keys with arbitrary values (hits the repair paths often)."""
    spec = st.fixed_dictionaries({}, optional={
        "data_ratio": st.one_of(st.floats(0, 1), _scalars), "hole_ratio": st.one_of(st.floats(0, 0.9), _scalars),
        "wait_ratio": st.one_of(st.floats(0, 1), _scalars), "junk": _scalars,
    })
    sides = st.one_of(st.integers(0, 40), st.sampled_from(["3", "4", "5x5", "-3", "06", "x"]))
    return draw(st.fixed_dictionaries({}, optional={
        "agents": st.one_of(st.integers(0, 20), st.lists(st.integers(0, 20), max_size=3), _scalars),
        "samples": st.one_of(st.integers(-5, 2_000_000), _scalars),
        "seed": st.one_of(st.integers(-5, 2**64), _scalars),
        "slip": st.one_of(st.floats(0, 1), _scalars),
        "horizon": st.one_of(st.none(), st.integers(0, 5000), _scalars),
        "sizes": st.one_of(st.dictionaries(sides, spec, max_size=4), _values),
        "rationale": st.text(max_size=20),
        "extra": _values,
    }))


def _as_text(document: dict, form: str) -> str:
    if form == "json":
        return json.dumps(document, default=str)
    if form == "yaml":
        return yaml.safe_dump(document, default_flow_style=None)
    return "<think>hmm</think>\nHere:\n```yaml\n" + yaml.safe_dump(document) + "```\nbecause."


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_decide_from_answer__any_text_gives_a_valid_config(text):
    _check_invariants(decide_from_answer("hypothesis", text, PREVIOUS))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_configs(), st.sampled_from(["json", "yaml", "fenced"]))
def test_decide_from_answer__any_near_config_gives_a_valid_config(document, form):
    try:
        text = _as_text(document, form)
    except (ValueError, OverflowError, yaml.YAMLError):
        return  # not every drawn structure can be written out; the text strategy covers arbitrary strings
    decision = decide_from_answer("hypothesis", text, PREVIOUS)
    _check_invariants(decision)


@settings(max_examples=200, deadline=None)
@given(_values)
def test_decide_from_answer__any_json_value_gives_a_valid_config(value):
    _check_invariants(decide_from_answer("hypothesis", json.dumps(value, default=str), PREVIOUS))


def test_decide_from_answer__a_long_thinking_block_before_a_good_config_is_read():
    """A thinking model writes 10k+ tokens before its config: the cut must not keep only the thinking."""
    thinking = "<think>" + "Let me weigh the sizes again. " * 1400 + "</think>\n"  # ~42k characters
    assert len(thinking) > MAX_ANSWER_CHARS
    decision = decide_from_answer("test", thinking + "```yaml\n" + GOOD_YAML + "```", PREVIOUS)
    _check_invariants(decision)
    assert decision.accepted and decision.config.sizes[6].hole_ratio == 0.35
    assert decision.details["thinking_chars"] == len(thinking) - 1 and "```yaml" in decision.raw_answer
    assert any("characters of thinking" in note for note in decision.repairs)
    started = time.perf_counter()
    huge = "<think>" + "x" * 2_000_000 + "</think>" + GOOD_JSON
    assert decide_from_answer("test", huge, PREVIOUS).accepted and time.perf_counter() - started < 2.0
