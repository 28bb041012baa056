"""Token budgets of the paper's setting (``mapf-lake bench tokens``), counted with the real Qwen3 tokenizer.

The tokenizer is built offline (``policy.models.init_qwen3_tokenizer``: ids equal to ``Qwen/Qwen3-4B``'s) and
every prompt goes through its chat template as the trainer and the backends send it (``add_generation_prompt``,
thinking as the preset sets it). Two tables:

* **policy prompts** (``natural`` style), per (agents x side) over 3x3..10x10 with 2..5 agents: the largest
  prompt of a few generated instances at hole ratio 0.2 and wait ratio 0.5, the paper's suite's mix;
* **engineer prompt** after three stages: the ``llm:self`` engineer's messages (system text with the schema,
  then behavior, failures, env_stats with the generator's report and training signal, and history) built from
  the greedy scripted policy's judged episodes on a preset-sized validation set.

Each is checked against the preset: a policy prompt plus ``training.max_completion_length`` (and plus
``validation.max_new_tokens``) must fit the model's window (40,960 for Qwen3-4B), and so must the engineer's
prompt plus its answer budget (``engineer.llm.DEFAULT_MAX_NEW_TOKENS``).
"""

from __future__ import annotations

import tempfile
from typing import Any

QWEN3_WINDOW = 40_960  # Qwen3-4B's max_position_embeddings
SIDES = (3, 4, 5, 6, 8, 10)
AGENTS = (2, 3, 4, 5)


def _tokenizer():
    from transformers import AutoTokenizer

    from policy.models import init_qwen3_tokenizer

    folder = tempfile.mkdtemp(prefix="qwen3-tokenizer-")
    init_qwen3_tokenizer(folder)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def _chat_tokens(tokenizer, messages: list[dict], thinking: bool) -> int:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        enable_thinking=thinking)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    return len(ids)


def policy_prompt_tokens(tokenizer, thinking: bool, per_cell: int = 4) -> dict[str, int]:
    """``{"AxS": tokens}``: the largest natural-style prompt of ``per_cell`` instances per cell."""
    from policy.prompts import natural_messages
    from simulator.config import StageConfig
    from simulator.generator import generate

    out = {}
    for agents in AGENTS:
        for side in SIDES:
            config = StageConfig.from_dict({"agents": agents, "samples": per_cell, "seed": 7, "sizes": {
                side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.5}}})
            items = generate(config).instances
            out[f"{agents}x{side}"] = max(_chat_tokens(tokenizer, natural_messages(item.instance), thinking)
                                          for item in items)
    return out


def engineer_inputs(preset_name: str):
    """The ``llm:self`` engineer's context after three stages of the preset, and the stage config it edits: the
    greedy scripted policy's judged episodes on a preset-sized validation set, the generator's report of the first
    stage config, a training signal per size, three stages of history."""
    from dataclasses import replace

    from curriculum.config import preset
    from engineer import HistoryEntry, build_context, summarize_episodes
    from engineer.evidence import StageScores
    from policy.signal import SignalFigures, TrainingSignal
    from policy.rollout import judge_episodes
    from policy.scripted import make_scripted
    from simulator.generator import generate

    run = preset(preset_name)
    config = run.stage_one
    validation = replace(run.evidence_config, samples=min(run.validation.samples, 400))
    items = generate(validation).instances
    episodes = judge_episodes(items, make_scripted("greedy").plans(items, seed=1))
    generated = generate(replace(config, samples=min(config.samples, 400)))
    summary = replace(
        summarize_episodes(episodes),
        generation=dict(generated.reports),
        training_signal=TrainingSignal(by_size={
            side: SignalFigures(groups=100, reward_mean=0.5, valid_rate=0.4, zero_variance_share=0.3,
                                     abs_advantage_mean=0.6) for side in config.sizes}))
    history = [HistoryEntry(stage, config, StageScores(valid_rate=0.4, optimal_rate=0.3, zero_variance_share=0.3))
               for stage in (1, 2, 3)]
    return build_context(summary, config, history, sections=tuple(run.engineer.context)), config


def engineer_prompt_tokens(tokenizer, preset_name: str, thinking: bool) -> dict[str, Any]:
    """The ``llm:self`` engineer's prompt after three stages of the preset (see the module docstring)."""
    from engineer.prompt import build_messages

    context, config = engineer_inputs(preset_name)
    messages = build_messages(context, config)
    return {"tokens": _chat_tokens(tokenizer, messages, thinking), "characters": sum(len(m["content"]) for m in messages)}


def run_token_bench(quick: bool = False, preset_name: str = "qwen3-4b") -> dict[str, Any]:
    from curriculum.config import preset
    from engineer.llm import DEFAULT_MAX_NEW_TOKENS

    run = preset(preset_name)
    thinking = bool(run.training.enable_thinking)
    tokenizer = _tokenizer()
    policy = policy_prompt_tokens(tokenizer, thinking, per_cell=1 if quick else 4)
    engineer = engineer_prompt_tokens(tokenizer, preset_name, thinking)
    largest = max(policy.values())
    engineer_budget = int(run.engineer.options.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
    return {
        "preset": preset_name, "thinking": thinking, "window": QWEN3_WINDOW,
        "policy_prompt_tokens": policy, "policy_prompt_max": largest,
        "training_completion_tokens": run.training.max_completion_length,
        "validation_new_tokens": run.validation.max_new_tokens,
        "engineer_prompt_tokens": engineer["tokens"], "engineer_prompt_characters": engineer["characters"],
        "engineer_new_tokens": engineer_budget,
        "fits": {
            "training": largest + run.training.max_completion_length <= QWEN3_WINDOW,
            "validation": largest + run.validation.max_new_tokens <= QWEN3_WINDOW,
            "engineer": engineer["tokens"] + engineer_budget <= QWEN3_WINDOW,
        },
    }


def format_token_bench(figures: dict[str, Any]) -> str:
    lines = [f"Qwen3 token budgets of the {figures['preset']} preset (thinking {'on' if figures['thinking'] else 'off'}, "
             f"window {figures['window']:,})", "policy prompt tokens (natural style, chat template), agents x side:"]
    table = figures["policy_prompt_tokens"]
    lines.append("agents " + "".join(f"{f'{side}x{side}':>8}" for side in SIDES))
    for agents in AGENTS:
        lines.append(f"{agents:>6} " + "".join(f"{table[f'{agents}x{side}']:>8}" for side in SIDES))
    lines.append(f"largest prompt {figures['policy_prompt_max']} + training completion "
                 f"{figures['training_completion_tokens']} / validation answer {figures['validation_new_tokens']}")
    lines.append(f"engineer prompt after three stages: {figures['engineer_prompt_tokens']} tokens "
                 f"({figures['engineer_prompt_characters']:,} chars) + answer {figures['engineer_new_tokens']}")
    lines.append("fits the window: " + ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in figures["fits"].items()))
    return "\n".join(lines)
