"""Rewards: table-driven per component, TRL's calling convention, garbage earns zero."""

from __future__ import annotations

import pytest

from policy.rewards import REWARDS, reward_breakdown, reward_columns
from simulator.types import Instance

INST = Instance(grid=[[0, 0, 0], [0, 1, 0], [0, 0, 0]], starts=[[0, 0], [2, 2]], goals=[[0, 2], [2, 0]])
COLUMNS = reward_columns(INST, optimal_makespan=2, horizon=12)

# (name, completion, format, valid, optimal, progress, default)
TABLE = [
    ("optimal", "<answer>\nagent 0: R R\nagent 1: L L\n</answer>", 1, 1, 1, 1.0, 1.6),
    ("valid, not optimal", "agent 0: W R R\nagent 1: L L", 1, 1, 0, 1.0, 1.1),
    ("into the hole (agent 1 still arrives)", "agent 0: D R\nagent 1: L L", 1, 0, 0, 0.5, 0.1),
    ("swap", "agent 0: R R\nagent 1: U U L L", 1, 0, 0, 0.0, 0.1),
    ("one arrives, other short", "agent 0: R R\nagent 1: L", 1, 0, 0, 0.5, 0.1),
    ("garbage", "I cannot solve this.", 0, 0, 0, 0.0, 0.0),
    ("empty", "", 0, 0, 0, 0.0, 0.0),
    ("wrong agent count", "agent 0: R R", 0, 0, 0, 0.0, 0.0),
]


@pytest.mark.parametrize("name, completion, fmt, valid, optimal, progress, default", TABLE)
def test_rewards__component_table(name, completion, fmt, valid, optimal, progress, default):
    columns = {key: [value] for key, value in COLUMNS.items()}
    got = {key: REWARDS[key](prompts=["p"], completions=[completion], **columns)[0]
           for key in ("format", "valid", "optimal", "progress", "default")}
    assert got == pytest.approx({"format": fmt, "valid": valid, "optimal": optimal, "progress": progress,
                                 "default": default}), name


def test_rewards__conversational_completions_and_extra_columns():
    columns = {key: [value, value] for key, value in COLUMNS.items()}
    completions = [[{"role": "assistant", "content": "agent 0: R R\nagent 1: L L"}], [{"role": "assistant", "content": "x"}]]
    assert REWARDS["default"](prompts=["a", "b"], completions=completions, size=[3, 3], **columns) == pytest.approx([1.6, 0.0])


def test_reward_breakdown__parse_error_reasons_recorded():
    breakdown = reward_breakdown(["nope"], [COLUMNS["instance"]], [2], [12])
    assert breakdown["parse_error"][0].startswith("no line of the answer names an agent")
