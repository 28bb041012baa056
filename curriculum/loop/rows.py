"""The trainer rows of a certified instance, built once for every trainer: ``mapf-lake train``'s stage datasets
(:mod:`curriculum.training`), the public curriculum's rows (:meth:`Curriculum.training_row`) and the TRL
plug-in's streams (:mod:`curriculum.plugins.trl_hooks`)."""

from __future__ import annotations

from typing import Any

from policy.prompts import PromptStyle
from simulator.generator import LabelledInstance


def grpo_row(item: LabelledInstance, style: PromptStyle) -> dict[str, Any]:
    """A prompt row with the columns the project's reward reads (``policy.rewards.reward_columns``:
    ``instance``, ``optimal_makespan``, ``horizon``)."""
    from policy.rewards import reward_columns
    from simulator.env import default_horizon

    return {"prompt": style.prompt(item.instance),
            **reward_columns(item.instance, item.optimal_makespan, default_horizon(item.instance))}


def sft_row(item: LabelledInstance, style: PromptStyle) -> dict[str, Any]:
    """A prompt-completion row: the instance's prompt and its plan (the solver's optimal one, or a policy's own kept
    one) written in the style; a chat style's completion is one assistant message."""
    answer = style.write_answer(item.instance, item.plan)
    completion: Any = [{"role": "assistant", "content": answer}] if style.chat else answer
    return {"prompt": style.prompt(item.instance), "completion": completion}
