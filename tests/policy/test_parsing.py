"""Completion parsing: table-driven with real-looking answers; hypothesis: any text gives a ParseResult."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapf_strategies import instances
from policy.parsing import MAX_COMPLETION_CHARS, PARSE_ERRORS, parse_plan
from policy.prompts import (PROMPT_STYLES, compact_answer, compact_nb_prompt, compact_prompt, compact_xy_prompt, get_style,
                            natural_answer, natural_messages, xy_answer_for)
from simulator import constants as C
from simulator.judge import judge_plan
from simulator.types import Instance, JointPlan

U, D, L, R, W = C.UP, C.DOWN, C.LEFT, C.RIGHT, C.WAIT

GOOD = [
    ("answer block", "<answer>\nagent 0: R R D\nagent 1: L U\n</answer>", [[R, R, D], [L, U]]),
    ("thinking first", "<think>agent 0: should I jump? A1 maybe</think>\n<answer>\nagent 0: R\nagent 1: W U\n</answer>",
     [[R], [W, U]]),
    ("closing tag only (template opened it)", "first go right...</think>\nAgent 0: R\nAgent 1: D", [[R], [D]]),
    ("code fence", "Here is my plan:\n```\nAgent 0: up, up, left\nAgent 1: down\n```\nGood luck!",
     [[U, U, L], [D]]),
    ("words and commas", "<answer>agent 0: right, right, down.\nagent 1: left, wait, up</answer>",
     [[R, R, D], [L, W, U]]),
    ("compact style", "A0 UUL\nA1 DR\n", [[U, U, L], [D, R]]),
    ("compact-xy cells after the letters", "A0 U22R23\nA1 D10W10R11\n", [[U, R], [D, W, R]]),
    ("compact-xy cells of wide maps", "A0 R0312\nA1 W1010\n", [[R], [W]]),
    ("arrows and brackets", "Agent 0: [R -> R -> D]\nAgent 1: (L → U)", [[R, R, D], [L, U]]),
    ("markdown bold labels", "**Agent 0**: R R\n**Agent 1**: D", [[R, R], [D]]),
    ("dash label and lowercase", "agent 0 - r d\nagent 1 - w", [[R, D], [W]]),
    ("empty sequence stays", "<answer>\nagent 0:\nagent 1: R\n</answer>", [[], [R]]),
    ("last answer block wins", "<answer>agent 0: U\nagent 1: U</answer> no wait <answer>agent 0: R\nagent 1: L</answer>",
     [[R], [L]]),
    ("prose lines inside the block ignored", "<answer>\nMy plan:\nagent 0: R\nagent 1: L\n</answer>", [[R], [L]]),
    # forms people and models write, which a reader takes as plans
    ("arrow after the label", "Agent 0 -> R R D\nAgent 1 -> L", [[R, R, D], [L]]),
    ("numbered list", "1. Agent 0: R R\n2. Agent 1: L", [[R, R], [L]]),
    ("trailing comments", "agent 0: R R (reaches goal)\nagent 1: L (stays)", [[R, R], [L]]),
    ("none, as format_plan writes it", "agent 0: none\nagent 1: L", [[], [L]]),
    ("JSON object on one line", '{"agent 0": "R R", "agent 1": "L"}', [[R, R], [L]]),
    ("JSON-style lines", '"agent 0": ["R", "R"],\n"agent 1": ["L"]', [[R, R], [L]]),
    ("arrows as the moves", "agent 0: → →\nagent 1: ↑ ←", [[R, R], [U, L]]),
    ("a map drawn in a block after the plan", "agent 0: R R\nagent 1: L\n```\nA0 . .\nA1 . .\n```", [[R, R], [L]]),
    ("a parenthesised sequence is not a comment", "agent 0: R R (U U)\nagent 1: L", [[R, R, U, U], [L]]),
]


@pytest.mark.parametrize("name, text, expected", GOOD)
def test_parse_plan__accepts_what_models_write(name, text, expected):
    result = parse_plan(text, 2, horizon=10)
    assert result.error is None, name
    assert result.plan == JointPlan.from_sequences(expected), name


BAD = [
    ("empty", "", "empty"),
    ("whitespace", "  \n ", "empty"),
    ("no agents", "I think the agents should go right.", "no_agents"),
    ("missing agent", "agent 0: R", "missing_agent"),
    ("duplicate", "agent 0: R\nagent 0: L\nagent 1: U", "duplicate_agent"),
    ("unknown agent", "agent 0: R\nagent 1: L\nagent 2: U", "unknown_agent"),
    ("unknown action", "agent 0: R jump\nagent 1: L", "unknown_action"),
    ("digits as actions", "agent 0: 4 4\nagent 1: 3", "unknown_action"),
    ("a count is not a cell", "agent 0: R2\nagent 1: L", "unknown_action"),
    ("a cell before its letter", "A0 22U23\nA1 L", "unknown_action"),
    ("unfinished thinking", "<think>agent 0: R\nagent 1: L", "unfinished_thinking"),
    ("over the horizon", "agent 0: " + "R " * 11 + "\nagent 1: L", "too_many_steps"),
    ("megabytes", "agent 0: R\n" * (MAX_COMPLETION_CHARS // 5), "too_long"),
]


@pytest.mark.parametrize("name, text, reason", BAD)
def test_parse_plan__rejects_with_a_reason(name, text, reason):
    result = parse_plan(text, 2, horizon=10)
    assert result.plan is None, name
    assert result.error.startswith(PARSE_ERRORS[reason]), (name, result.error)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300), st.integers(1, 5), st.integers(0, 50))
def test_parse_plan__any_text_gives_a_result_never_an_exception(text, agents, horizon):
    result = parse_plan(text, agents, horizon)
    assert (result.plan is None) != (result.error is None)
    if result.plan is not None:
        assert result.plan.n_agents == agents and result.plan.horizon <= max(horizon, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="UDLRWudlrw ,.:agent0123456789AG<>/\n`*", max_size=40), max_size=6))
def test_parse_plan__near_miss_texts_never_raise(lines):
    parse_plan("\n".join(lines), 3, 20)


@pytest.mark.parametrize("style", sorted(PROMPT_STYLES))
def test_prompt_styles__the_style_answer_parses_back(style):
    inst = Instance(grid=[[0, 0, 1], [0, 0, 0]], starts=[[0, 0], [1, 2]], goals=[[1, 0], [0, 1]])
    plan = JointPlan.from_sequences([[D], [U, L]])
    chosen = get_style(style)
    assert parse_plan(chosen.write_answer(inst, plan), 2).plan == plan
    prompt = chosen.prompt(inst)
    assert isinstance(prompt, list) == chosen.chat


def test_compact_xy__holes_and_cells_and_the_trace_answer():
    inst = Instance(grid=[[0, 0, 1, 0], [0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0]], starts=[[3, 2], [0, 0]],
                    goals=[[2, 3], [1, 1]])
    text = compact_xy_prompt(inst)
    assert text == "n=4\nH02 13 21\nA0 32>23\nA1 00>11\n?\n"
    answer = xy_answer_for(inst, JointPlan.from_sequences([[U, R], [D, W, R]]))
    assert answer == "A0 U22R23\nA1 D10W10R11\n"
    assert set(text + answer) <= set("0123456789.Hn=A,>?UDLRW \n")
    assert compact_xy_prompt(Instance(grid=[[0, 0], [0, 0]], starts=[[0, 0]], goals=[[1, 1]])) == "n=2\nH\nA0 00>11\n?\n"


def test_compact_xy__wide_maps_write_two_digits_per_coordinate():
    grid = [[0] * 12 for _ in range(11)]
    grid[10][11] = 1
    inst = Instance(grid=grid, starts=[[0, 0]], goals=[[10, 3]])
    assert compact_xy_prompt(inst) == "n=11,12\nH1011\nA0 0000>1003\n?\n"
    assert xy_answer_for(inst, JointPlan.from_sequences([[D, R, U, L]])) == "A0 D0100R0101U0001L0000\n"


def test_compact_xy__a_move_off_the_map_has_no_cell_and_still_parses():
    inst = Instance(grid=[[0, 0], [0, 0]], starts=[[0, 0]], goals=[[1, 1]])
    answer = xy_answer_for(inst, JointPlan.from_sequences([[U, D, R]]))
    assert answer == "A0 UD00R01\n"  # the cells follow the arithmetic of the moves as written
    assert parse_plan(answer, 1).plan == JointPlan.from_sequences([[U, D, R]])


@settings(max_examples=200, deadline=None)
@given(instances(max_agents=3), st.data())
def test_compact_xy__any_plan_round_trips_through_the_trace(inst, data):
    seqs = [data.draw(st.lists(st.sampled_from([U, D, L, R, W]), max_size=8)) for _ in range(inst.n_agents)]
    plan = JointPlan.from_sequences(seqs)
    assert parse_plan(xy_answer_for(inst, plan), inst.n_agents).plan == plan


def test_compact_prompt__alphabet_and_layout():
    inst = Instance(grid=[[0, 0, 1, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]], starts=[[3, 2], [0, 0]],
                    goals=[[2, 3], [1, 1]])
    text = compact_prompt(inst)
    assert text == "n=4\n..H.\n....\n.H..\n....\nA0 3,2>2,3\nA1 0,0>1,1\n?\n"
    assert set(text + compact_answer(JointPlan.from_sequences([[U], [R, D, W, L]]))) <= set("0123456789.Hn=A,>?UDLRW \n")


def test_compact_nb_prompt__adds_each_agents_start_neighbours():
    inst = Instance(grid=[[0, 0, 1, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]], starts=[[3, 2], [0, 0]],
                    goals=[[2, 3], [1, 1]])
    text = compact_nb_prompt(inst)
    assert text == "n=4\n..H.\n....\n.H..\n....\nA0 3,2>2,3 U.DHL.R.\nA1 0,0>1,1 UHD.LHR.\n?\n"
    assert text.replace(" U.DHL.R.", "").replace(" UHD.LHR.", "") == compact_prompt(inst)
    assert set(text) <= set("0123456789.Hn=A,>?UDLRW \n")
    assert get_style("compact-nb").answer is compact_answer


@settings(max_examples=150, deadline=None)
@given(instances(max_side=6, max_agents=3))
def test_compact_nb_prompt__a_move_is_marked_blocked_exactly_when_the_judge_fails_it(inst):
    """Reference: the plan judge, on the agent alone making that one move."""
    lines = [line for line in compact_nb_prompt(inst).splitlines() if line.startswith("A")]
    for k, line in enumerate(lines):
        start, goal = inst.starts[k].tolist(), inst.goals[k].tolist()
        if start == goal:  # an agent on its goal ignores its moves: nothing to compare
            continue
        marks = line.rsplit(" ", 1)[1]
        alone = Instance(grid=inst.grid, starts=[start], goals=[goal])
        for i, action in enumerate((C.UP, C.DOWN, C.LEFT, C.RIGHT)):
            failure = judge_plan(alone, JointPlan.from_sequences([[action]])).failure
            assert marks[2 * i] == C.ACTION_LETTERS[action]
            assert (marks[2 * i + 1] == "H") == (failure in (C.ILLEGAL_MOVE, C.FELL_IN_HOLE)), (line, action, failure)


def test_natural_prompt__states_rules_map_agents_and_format():
    inst = Instance(grid=[[0, 1], [0, 0]], starts=[[0, 0]], goals=[[1, 1]])
    system, user = natural_messages(inst)
    assert "hole" in system["content"] and "swap" in system["content"]
    assert "A0 H" in user["content"] and "agent 0: start (0,0) -> goal (1,1)" in user["content"]
    assert "<answer>" in user["content"] and natural_answer(JointPlan.from_sequences([[D, R]])).startswith("<answer>")


def test_compact_prompt__non_square_maps_stay_in_the_alphabet():
    inst = Instance(grid=[[0, 0, 0, 1, 0]] * 3, starts=[[0, 0]], goals=[[2, 4]])
    text = compact_prompt(inst)
    assert text.startswith("n=3,5\n") and set(text) <= set("0123456789.Hn=A,>?UDLRW \n")


@pytest.mark.parametrize("unit", ["<think>", "<answer>", "</think>", "<THINK>x", "<answer></answer>", "```\n", "```x",
                                  "<think></think>", "A0 R\n"])
def test_parse_plan__megabyte_worst_cases_stay_linear(unit):
    # Quadratic scanning took ~6 s for 56 kB of "<think>"; linear parsing reads 1 MB in well under a second
    # (the bound is 20x that, so only a return to quadratic work can fail it).
    import time

    text = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    start = time.perf_counter()
    result = parse_plan(text, 2)
    assert time.perf_counter() - start < 5
    assert result.plan is None or result.plan.n_agents == 2


def test_compact_nb_rev__agents_last_first_and_each_line_a_fixed_distance_above_its_answer():
    inst = Instance(grid=[[0, 0, 0], [0, 0, 0], [0, 0, 0]], starts=[[0, 0], [1, 1], [2, 2]], goals=[[0, 2], [1, 0], [2, 0]])
    lines = get_style("compact-nb-rev").prompt(inst).splitlines()
    assert [line.split()[0] for line in lines[4:7]] == ["A2", "A1", "A0"] and lines[7] == "?"
    answer = get_style("compact-nb-rev").write_answer(inst, JointPlan.from_sequences([[R, R], [L], [L, L]]))
    for shown in (inst, Instance(grid=inst.grid, starts=inst.starts[:2], goals=inst.goals[:2])):
        text = (get_style("compact-nb-rev").prompt(shown) + answer).splitlines()
        for k in range(shown.n_agents):  # agent k's prompt line: 2k + 2 lines above its answer line, any count
            answer_line = text.index(f"A{k} " + answer.splitlines()[k].split()[1])
            assert text[answer_line - 2 * k - 2].startswith(f"A{k} ")


def test_compact_nb_shuf__the_agents_lines_in_a_content_drawn_order_and_answers_in_agent_order():
    style = get_style("compact-nb-shuf")
    orders = set()
    for shift in range(12):
        inst = Instance(grid=np.zeros((4, 4), np.int8), starts=[[0, shift % 4], [1, 1], [3, 3]],
                        goals=[[2, 0], [3, (shift // 4) % 4], [0, 3]])
        lines = style.prompt(inst).splitlines()
        plain = compact_nb_prompt(inst).splitlines()
        assert lines[:5] == plain[:5] and lines[-1] == "?"  # only the agents' lines move
        assert sorted(lines[5:8]) == plain[5:8]
        order = [int(line.split()[0][1:]) for line in lines[5:8]]
        assert style.prompt(inst) == style.prompt(Instance(grid=inst.grid.copy(), starts=inst.starts.copy(),
                                                           goals=inst.goals.copy()))  # drawn from content alone
        orders.add(tuple(order))
    assert len(orders) > 2  # not one fixed order: no line sits at one distance from its answer on every board
    assert style.write_answer(inst, JointPlan.from_sequences([[R], [], [U]])) == "A0 R\nA1 \nA2 U\n"


def test_compact_nb_copy__each_answer_line_copies_its_prompt_line_and_parses_to_the_plan():
    inst = Instance(grid=[[0, 0, 1], [0, 0, 0]], starts=[[0, 0], [1, 2]], goals=[[1, 0], [1, 2]])
    style = get_style("compact-nb-copy")
    answer = style.write_answer(inst, JointPlan.from_sequences([[D], []]))
    prompt_lines = style.prompt(inst).splitlines()[3:5]
    assert answer == f"{prompt_lines[0]} D\n{prompt_lines[1]}\n"  # an agent on its goal: the copy alone
    assert parse_plan(answer, 2).plan == JointPlan.from_sequences([[D], []])
    # a copy that is not a prompt line's shape is not skipped: its words are read as actions and refused
    assert not parse_plan("A0 0,0>1,0 UHDXL.R. D\nA1 R\n", 2).ok


@settings(max_examples=60, deadline=None)
@given(inst=instances(max_side=6, max_agents=4), data=st.data())
def test_compact_nb_copy_and_rev__answers_parse_back_for_any_board(inst, data):
    sequences = [data.draw(st.lists(st.sampled_from([U, D, L, R, W]), max_size=6)) for _ in range(inst.n_agents)]
    plan = JointPlan.from_sequences(sequences)
    for name in ("compact-nb-copy", "compact-nb-rev", "compact-nb-shuf"):
        assert parse_plan(get_style(name).write_answer(inst, plan), inst.n_agents).plan == plan
