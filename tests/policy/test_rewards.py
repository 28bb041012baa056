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


# --- StageReward: one weighted reward and the per-size training signal ------------------------------------------
BIG = Instance(grid=[[0] * 4 for _ in range(4)], starts=[[0, 0], [3, 3]], goals=[[0, 3], [3, 0]])
BIG_COLUMNS = reward_columns(BIG, optimal_makespan=3, horizon=16)
ANSWERS = {"optimal": TABLE[0][1], "valid": TABLE[1][1], "hole": TABLE[2][1], "garbage": TABLE[5][1]}


def _batch(groups):
    """TRL's layout: each group's completions consecutive, the instance columns repeated per completion."""
    completions, columns = [], {key: [] for key in COLUMNS}
    for cols, answers in groups:
        for answer in answers:
            completions.append(answer)
            for key in columns:
                columns[key].append(cols[key])
    return completions, columns


def _trl_advantages(rewards, generations, scale):
    """The advantages TRL's GRPOTrainer computes (sum_then_normalize), with TRL's own nanstd."""
    import torch
    from trl.trainer.utils import nanstd

    r = torch.tensor(rewards, dtype=torch.float64)
    mean = r.view(-1, generations).mean(dim=1).repeat_interleave(generations)
    std = nanstd(r.view(-1, generations), dim=1).repeat_interleave(generations) if scale != "batch" else nanstd(r)
    return ((r - mean) / (std + 1e-4) if scale != "none" else r - mean).abs().tolist()


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_stage_reward__sums_components_and_tallies_trl_s_advantages_per_size(scale):
    from policy.rewards import StageReward

    weights = {"default": 1.0, "progress": 0.5}
    groups = [(COLUMNS, ["optimal", "valid", "hole", "garbage"]), (COLUMNS, ["garbage"] * 4),
              (BIG_COLUMNS, ["garbage"] * 4), (COLUMNS, ["optimal", "optimal", "valid", "valid"])]
    completions, columns = _batch([(cols, [ANSWERS[a] for a in answers]) for cols, answers in groups])
    reward = StageReward(weights, generations=4, scale_rewards=scale)
    got = reward(prompts=["p"] * 16, completions=completions, **columns)
    separate = [sum(w * REWARDS[name](prompts=["p"] * 16, completions=completions, **columns)[i]
                    for name, w in weights.items()) for i in range(16)]
    assert got == pytest.approx(separate)
    advantages = _trl_advantages(got, 4, scale)
    signal = reward.signal()
    three, four = signal.by_size[3], signal.by_size[4]
    assert three.groups == 3 and four.groups == 1 and signal.by_agents_size[(2, 3)] == three
    assert three.zero_variance_share == pytest.approx(1 / 3) and four.zero_variance_share == 1.0
    assert three.valid_rate == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert three.reward_mean == pytest.approx((sum(got[0:4]) + sum(got[4:8]) + sum(got[12:16])) / 12)
    per_group = [sum(advantages[i:i + 4]) / 4 for i in range(0, 16, 4)]
    assert three.abs_advantage_mean == pytest.approx((per_group[0] + per_group[1] + per_group[3]) / 3)
    assert four.abs_advantage_mean == pytest.approx(per_group[2])
    again = StageReward(weights, generations=4, scale_rewards=scale)
    again.load_state(reward.state())  # what a resumed stage reloads from its checkpoint
    assert again.signal() == signal


def test_stage_reward__a_batch_not_in_groups_scores_but_records_nothing():
    from policy.rewards import StageReward

    reward = StageReward({"valid": 1.0}, generations=4)
    completions, columns = _batch([(COLUMNS, [ANSWERS["optimal"], ANSWERS["garbage"]]), (BIG_COLUMNS, ["x", "y"])])
    assert reward(completions=completions, **columns) == [1.0, 0.0, 0.0, 0.0]
    assert reward.signal().to_dict() == {"by_size": {}, "by_agents_size": {}}
    with pytest.raises(ValueError, match="names among"):
        StageReward({"nope": 1.0}, generations=4)


def test_stage_reward__record_groups_tallies_what_trl_s_reward_call_tallies():
    # The rejection-sampling rounds record their groups directly (they sample without TRL's reward call): the
    # same groups given by key must give the same signal as through the call, and a layout that is not groups of
    # `generations` is refused by name.
    from policy.rewards import StageReward

    groups = [(COLUMNS, ["optimal", "valid", "hole", "garbage"]), (BIG_COLUMNS, ["garbage"] * 4),
              (COLUMNS, ["valid"] * 4)]
    completions, columns = _batch([(cols, [ANSWERS[a] for a in answers]) for cols, answers in groups])
    through_call = StageReward({"valid": 1.0}, generations=4)
    rewards = through_call(completions=completions, **columns)
    direct = StageReward({"valid": 1.0}, generations=4)
    direct.record_groups([(2, 3), (2, 4), (2, 3)], rewards, rewards)
    assert direct.signal() == through_call.signal() and direct.signal().by_size[3].groups == 2
    with pytest.raises(ValueError, match="3 groups of 4 need 12 samples, got 11"):
        direct.record_groups([(2, 3)] * 3, rewards[:11], rewards[:11])


@pytest.mark.parametrize("name", ["qwen3-4b", "qwen3-4b-nothink"])
def test_bench_tokens__the_paper_preset_s_prompts_fit_its_budgets_with_the_real_qwen3_tokenizer(name):
    from curriculum.config import preset
    from curriculum.benches.tokens import AGENTS, SIDES, format_token_bench, run_token_bench

    figures = run_token_bench(quick=True, preset_name=name)
    assert figures["thinking"] == preset(name).training.enable_thinking
    assert figures["engineer_new_tokens"] == preset(name).engineer.options.get("max_new_tokens", 1024)
    table = figures["policy_prompt_tokens"]
    assert set(table) == {f"{a}x{s}" for a in AGENTS for s in SIDES}
    # more agents and bigger maps never make a shorter prompt; the rules alone are a few hundred tokens
    for agents in AGENTS:
        row = [table[f"{agents}x{side}"] for side in SIDES]
        assert row == sorted(row) and row[0] > 200
    assert figures["engineer_prompt_tokens"] > figures["policy_prompt_max"]
    assert all(figures["fits"].values()), figures["fits"]
    text = format_token_bench(figures)
    assert "engineer prompt after three stages" in text and max(len(line) for line in text.splitlines()) <= 80


def test_validation_rewards__come_from_the_episodes_verdicts_and_equal_the_grpo_reward():
    """Validation judges each answer once; its rewards equal the GRPO reward's on the same completions."""
    import numpy as np

    from policy.evaluation import attach_rewards
    from policy.policies import Answers, _parse_all
    from policy.rewards import reward_columns
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from simulator.config import StageConfig
    from simulator.env import default_horizon
    from simulator.generator import generate
    from simulator.text import format_plan

    items = generate(StageConfig.from_dict({"agents": [2, 3], "samples": 60, "seed": 5, "sizes": {
        4: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.3},
        6: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3}}})).instances
    random_plans, greedy_plans = make_scripted("random").plans(items, seed=3), make_scripted("greedy").plans(items)
    texts = []
    for i, item in enumerate(items):
        if i % 4 == 0:
            texts.append(format_plan(item.plan.sequences()))  # optimal
        elif i % 4 == 1:
            texts.append("no plan here")  # a parse error
        else:
            texts.append(format_plan((random_plans if i % 4 == 2 else greedy_plans)[i].sequences()))
    plans, errors = _parse_all(items, texts)
    answers = Answers(plans, errors, texts, [""] * len(items), [0] * len(items), [0] * len(items))
    episodes = judge_episodes(items, plans, errors, texts)
    attach_rewards(episodes, items, answers)
    columns = [reward_columns(it.instance, it.optimal_makespan, default_horizon(it.instance)) for it in items]
    expected = reward_breakdown(texts, [c["instance"] for c in columns], [c["optimal_makespan"] for c in columns],
                                [c["horizon"] for c in columns])
    assert np.allclose([ep.reward for ep in episodes], expected["default"])
    for name in ("format", "valid", "optimal", "progress"):
        assert np.allclose([ep.reward_components[name] for ep in episodes], expected[name]), name
    assert 0 < expected["valid"].sum() < len(items) and expected["format"].sum() < len(items)


# --- failure_spans: the moves a failed answer is blamed for (GRPO's failure credit) --------------------------------
@pytest.mark.parametrize("completion, expected", [
    ("agent 0: D R\nagent 1: L L", [(11, 12)]),  # agent 0's second move steps into the hole at (1, 1)
    ("A0 DR\nA1 LL", [(4, 5)]),  # the same plan as runs of letters: one span per letter
    ("agent 0: U R R\nagent 1: L L", [(9, 10)]),  # off the grid at step 1
    ("agent 0: R R\nagent 1: U U L L", [(11, 12), (24, 25)]),  # vertex conflict at step 2: both moves of step 2
    ("<think>agent 0: R R</think>\nagent 0: D R\nagent 1: L L", [(39, 40)]),  # the answer's line, after thinking
    ("agent 0: D R (into the hole)\nagent 1: L L", None),  # parses, but the line is not a plain action list
    ("agent 0: R R\nagent 1: L", None),  # agent 1 ends off its goal: no one move is at fault
    ("agent 0: R R\nagent 1: L L", None),  # valid
    ("I cannot solve this.", None),  # did not parse
])
def test_failure_spans__blame_the_moves_of_the_failing_step(completion, expected):
    from policy.rewards import failure_spans

    spans = failure_spans([completion], [COLUMNS["instance"]], [2], [12])[0]
    assert spans == expected
    for start, end in spans or ():
        assert completion[start:end] in {"U", "D", "L", "R"}
