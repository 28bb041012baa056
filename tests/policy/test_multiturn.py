"""The multi-turn mode: one joint action per turn through the step-by-step env, its outcome equal to the
single-turn reward of the played plan, and TRL's GRPOTrainer training the tiny model through ``rollout_func``."""

from __future__ import annotations

import os

import numpy as np
import pytest

from policy.multiturn import EPISODE_REWARDS, TURN_STYLES, MultiTurnRollout, TextGame, get_turn_style, parse_joint_action
from policy.rewards import reward_breakdown, reward_columns
from policy.scripted import make_scripted
from simulator import constants as C
from simulator.config import StageConfig
from simulator.env import default_horizon
from simulator.errors import ConfigError
from simulator.generator import generate

CONFIG = StageConfig.from_dict({"agents": [2, 3], "samples": 24, "seed": 11, "sizes": {
    3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
    4: {"data_ratio": 0.5, "hole_ratio": 0.25, "wait_ratio": 0.5}}})


@pytest.mark.parametrize("text, agents, expected", [
    ("UD", 2, [C.UP, C.DOWN]),
    ("U D\n", 2, [C.UP, C.DOWN]),
    ("up, wait, left", 3, [C.UP, C.WAIT, C.LEFT]),
    ("<think>maybe UU</think><answer>R W</answer>", 2, [C.RIGHT, C.WAIT]),
    ("A0 L\nA1 R", 2, [C.LEFT, C.RIGHT]),
    ("agent 1: D\nagent 0: U", 2, [C.UP, C.DOWN]),
    ("UDL", 2, None),
    ("U", 2, None),
    ("UX", 2, None),
    ("", 2, None),
    ("<think>never closed U D", 2, None),
    ("A0 U\nA1", 2, None),  # a turn moves every agent: a missing move is not a wait
    ("A0\nA1", 2, None),
    ("dull", 4, None),  # a word is not four moves
    ("Up, Wait", 2, [C.UP, C.WAIT]),
])
def test_parse_joint_action__table(text, agents, expected):
    actions, error = parse_joint_action(text, agents)
    if expected is None:
        assert actions is None and error
    else:
        assert error is None and actions.tolist() == expected


def _letters(plan, t):
    return "".join(C.ACTION_LETTERS[a] for a in plan.actions[:, t])


def _play(item, plan, style="compact"):
    """Play ``plan`` one joint action per turn; an unfinished episode after the plan is cut (goal not reached)."""
    game = TextGame(item.instance, style, optimal_makespan=item.optimal_makespan)
    game.reset()
    for t in range(plan.actions.shape[1]):
        if game.done:
            break
        game.step(_letters(plan, t))
    return game.outcome() if game.done else game.truncate()


def test_text_game__episode_outcome_equals_the_single_turn_reward_of_the_played_plan(items):
    style = get_turn_style("compact")
    greedy = make_scripted("greedy").plans(items, seed=1)
    noise = make_scripted("random").plans(items, seed=2)
    answers, outcomes, rows = [], [], []
    for item, g, r in zip(items, greedy, noise):
        for plan in (item.plan, g, r):
            outcomes.append(_play(item, plan))
            answers.append("\n".join(f"A{k} " + "".join(C.ACTION_LETTERS[a] for a in plan.actions[k])
                                     for k in range(plan.actions.shape[0])))
            rows.append(reward_columns(item.instance, item.optimal_makespan, default_horizon(item.instance)))
    parts = reward_breakdown(answers, [r["instance"] for r in rows], [r["optimal_makespan"] for r in rows],
                             [r["horizon"] for r in rows])
    for name in ("format", "valid", "optimal", "progress", "default"):
        assert [o[name] for o in outcomes] == pytest.approx(parts[name].tolist()), name
    assert [o["category"] for o in outcomes] == [C.FAILURE_NAMES[f] for f in parts["failure"]]
    assert all(o["optimal"] == 1.0 and o["makespan"] == item.optimal_makespan for o, item in zip(outcomes[::3], items))
    assert {o["category"] for o in outcomes} - {"none"}, "the random plans must fail somewhere"
    assert style.observation(items[0].instance, items[0].instance.starts, 0).startswith("=")


def test_text_game__observations_follow_the_env_and_bad_answers_end_the_episode(items):
    item = next(i for i in items if i.optimal_makespan >= 2)
    game = TextGame(item.instance, "compact-nb", optimal_makespan=item.optimal_makespan)
    first = game.reset()
    assert first.startswith("n=") and first.endswith("?\n" + first.split("?\n")[-1]) and "=" in first.split("?\n")[-1]
    result = game.step(_letters(item.plan, 0))
    assert not result.done and result.reward == 0.0 and result.info["parse_error"] is None
    moved = game.env.state.pos
    assert result.observation == get_turn_style("compact-nb").observation(item.instance, moved, 1)
    result = game.step("this is not a move")
    assert result.done and result.reward == 0.0 and result.info["outcome"]["category"] == "parse_error"
    assert result.info["outcome"]["turns"] == 2 and result.info["outcome"]["progress"] == 0.0
    with pytest.raises(ConfigError, match="game.step"):
        game.step("UU")
    natural = TextGame(item.instance, "natural").reset()
    assert [m["role"] for m in natural] == ["system", "user"] and "After 0 steps" in natural[1]["content"]
    with pytest.raises(ConfigError, match="prompt_style"):
        TextGame(item.instance, "verbose")


def test_rollout__bad_arguments_and_unknown_prompts_are_refused(items):
    with pytest.raises(ConfigError, match="max_turns"):
        MultiTurnRollout(items, "compact", max_turns=0)
    with pytest.raises(ConfigError, match="rewards"):
        MultiTurnRollout(items, "compact").reward_funcs({"speed": 1.0})
    with pytest.raises(ValueError, match="rollout_func"):
        EPISODE_REWARDS["default"](completions=["a"], episode=[])
    with pytest.raises(ConfigError, match=r"prompts\[0\]"):
        MultiTurnRollout(items[:2], "compact").play(["n=3\n?\n"], None, None)


def _allowed_only(tokenizer, letters):
    """Token ids to suppress so that the tiny model writes only action letters (every turn then parses)."""
    keep = {tokenizer.convert_tokens_to_ids(letter) for letter in letters}
    return [i for i in range(len(tokenizer)) if i not in keep]


def test_grpo_rollout_func__tiny_model_trains_multi_turn_and_rewards_are_the_episode_outcomes(tmp_path, items):
    """Two GRPO steps of the embedded tiny model, each completion a whole episode played turn by turn."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from tests.model_fixtures import tiny_model_dir

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    easy = generate(StageConfig.from_dict({"agents": 2, "samples": 16, "seed": 4, "sizes": {
        3: {"data_ratio": 1.0, "hole_ratio": 0.0, "wait_ratio": 0.0}}})).instances
    two_agents = sorted(easy, key=lambda item: item.optimal_makespan)[:4]  # short ones: random play reaches goals
    folder = tiny_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    before = [p.detach().clone() for p in model.parameters()]

    class Recording(MultiTurnRollout):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.outputs = []

        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            self.outputs.append((list(prompts), out))
            return out

    rollout = Recording(two_agents, "compact", max_turns=4, turn_tokens=2, seed=1)
    args = GRPOConfig(output_dir=str(tmp_path / "trainer"), max_steps=2, per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=48, reward_weights=[1.0, 1.0], learning_rate=1e-3, beta=0.0, logging_steps=1,
                      save_strategy="no", report_to=[], use_cpu=True, seed=0, disable_tqdm=True,
                      dataloader_num_workers=0, temperature=1.0,
                      generation_kwargs={"suppress_tokens": _allowed_only(tokenizer, "UDLRW")})
    trainer = GRPOTrainer(model=model, args=args, train_dataset=rollout.dataset(), processing_class=tokenizer,
                          reward_funcs=rollout.reward_funcs({"default": 1.0, "progress": 1.0}), rollout_func=rollout)
    trainer.train()

    assert len(rollout.outputs) == 2
    by_prompt = {get_turn_style("compact").prompt(item.instance): item for item in two_agents}
    for prompts, out in rollout.outputs:
        assert len(prompts) == 8 and len(set(prompts[:4])) == 1 and len(set(prompts[4:])) == 1  # one per generation
        assert {len(out[key]) for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "episode")} == {8}
        for prompt, ids, mask, logps, outcome in zip(prompts, out["completion_ids"], out["env_mask"], out["logprobs"],
                                                     out["episode"]):
            assert len(ids) == len(mask) == len(logps) and ids[-1] == tokenizer.eos_token_id and mask[-1] == 0
            assert all(lp <= 0.0 for lp in logps) and all(lp == 0.0 for lp, m in zip(logps, mask) if m == 0)
            model_turns = [tokenizer.decode([t for t, m in zip(ids, mask) if m][n:n + 2])
                           for n in range(0, sum(mask), 2)]
            assert all(len(turn) == 2 and set(turn) <= set("UDLRW") for turn in model_turns)
            assert 1 <= len(model_turns) == outcome["turns"] <= 4
            item = by_prompt[prompt]  # replay the model's turns in a fresh game: the same outcome
            game = TextGame(item.instance, "compact", optimal_makespan=item.optimal_makespan, max_turns=4)
            game.reset()
            for turn in model_turns:
                result = game.step(turn)
            assert result.done and result.info["outcome"] == outcome
            text = tokenizer.decode(ids, skip_special_tokens=True)
            assert text.count("\n=") + text.startswith("=") >= len(model_turns)  # a board after every turn
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    assert rewards == pytest.approx([np.mean([o["default"] + o["progress"] for o in out["episode"]])
                                     for _, out in rollout.outputs])
    categories = {o["category"] for _, out in rollout.outputs for o in out["episode"]}
    assert categories <= set(C.FAILURE_NAMES) - {"parse_error"}  # every turn parsed: only the env decides
    spread = any(len({o["default"] + o["progress"] for o in out["episode"][g:g + 4]}) > 1
                 for _, out in rollout.outputs for g in (0, 4))
    changed = any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert spread and changed  # groups with different outcomes: advantages, and the weights move


def test_rollout_play__chat_turns_are_user_messages_between_the_models_answers():
    """The natural (chat) style on a tiny Qwen3 model with the real Qwen3 tokenizer and chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.model_fixtures import tiny_qwen3_dir

    torch.manual_seed(0)
    items = generate(StageConfig.from_dict({"agents": 2, "samples": 2, "seed": 3, "sizes": {
        3: {"data_ratio": 1.0, "hole_ratio": 0.0, "wait_ratio": 0.0}}})).instances
    folder = tiny_qwen3_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    letters = [tokenizer.encode(text, add_special_tokens=False)[0] for text in ("U", " D", " W")]
    suppress = [i for i in range(model.config.vocab_size) if i not in letters]  # two tokens a turn: two actions
    rollout = MultiTurnRollout(items, "natural", max_turns=3, turn_tokens=2)
    prompt = rollout.dataset()[0]["prompt"]
    out = rollout.play([prompt, prompt], model, tokenizer, max_completion_length=400,
                       generation_kwargs={"do_sample": True, "temperature": 1.0, "suppress_tokens": suppress},
                       chat_template_kwargs={"enable_thinking": False})
    first = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    for ids, mask, prompt_ids, outcome in zip(out["completion_ids"], out["env_mask"], out["prompt_ids"], out["episode"]):
        assert tokenizer.decode(prompt_ids) == first and first.endswith("<think>\n\n</think>\n\n")
        assert sum(mask) == 2 * outcome["turns"] and outcome["category"] != "parse_error"
        text = tokenizer.decode(ids)
        assert text.count("<|im_start|>user\nAfter ") == outcome["turns"] - 1  # one board after each turn but the last
        assert text.count("<|im_start|>assistant\n<think>\n\n</think>\n\n") == outcome["turns"] - 1
        assert text.endswith("<|im_end|>") and mask[-1] == 0
        env_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
        assert env_text.startswith("<|im_end|>\n<|im_start|>user\nAfter 1 step:") or outcome["turns"] == 1
    assert any(outcome["turns"] > 1 for outcome in out["episode"])


def test_turn_styles__one_per_prompt_style_and_compact_xy_writes_cells_as_its_prompt_does(items):
    from policy.prompts import PROMPT_STYLES

    assert set(TURN_STYLES) == set(PROMPT_STYLES)  # a new prompt style needs its turn style
    item = next(i for i in items if i.optimal_makespan >= 2)
    game = TextGame(item.instance, "compact-xy", optimal_makespan=item.optimal_makespan)
    first = game.reset()
    (r0, c0), (r1, c1) = item.instance.starts.tolist()[:2]
    assert first.startswith("n=") and f"A0 {r0}{c0}>" in first  # sides 3-9: one digit per coordinate
    assert first.split("?\n")[-1].startswith(f"={r0}{c0} {r1}{c1}")
    result = game.step(_letters(item.plan, 0))
    assert not result.done and result.info["parse_error"] is None
    moved = game.env.state.pos.tolist()
    assert result.observation == "=" + " ".join(f"{r}{c}" for r, c in moved) + "\n"
