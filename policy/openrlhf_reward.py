"""OpenRLHF's custom reward function for MAPF-FrozenLake exports (``mapf-lake export --layout openrlhf``).

Pass this file to OpenRLHF's trainer as ``--remote_rm_url policy/openrlhf_reward.py --label_key label`` (with
``--input_key prompt``): OpenRLHF calls :func:`reward_func` with the full texts (prompt + response), the prompts
and the labels (each row's record as JSON). The response is the text after its prompt, found inside the query
also when a chat template wraps it (``<|im_start|>user ... <|im_end|><|im_start|>assistant``); it is scored by
``policy.score.score_batch``, the same parse and judge as the GRPO reward.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from policy.score import score_batch
from simulator.errors import ConfigError

# Turn markers a chat template puts between the prompt and the response (Qwen/ChatML, Llama 3, Gemma, Mistral,
# Phi): dropped from the response's start, so the parser sees the answer as the model wrote it.
_TURN_MARKERS = re.compile(
    r"\A(?:\s+|<\|im_end\|>|<\|im_start\|>assistant|<\|eot_id\|>|<\|start_header_id\|>assistant<\|end_header_id\|>"
    r"|<end_of_turn>|<start_of_turn>model|\[/INST\]|</s>|<\|end\|>|<\|assistant\|>)+"
)


def _prompt_text(prompt: Any, index: int) -> str:
    """The text of the prompt's last turn: the prompt string, or the content of its last chat message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence) and prompt and isinstance(prompt[-1], Mapping) and isinstance(
        prompt[-1].get("content"), str
    ):
        content: str = prompt[-1]["content"]  # checked above
        return content
    raise ConfigError(f"prompts[{index}]", prompt, "a string or chat messages [{role, content}]")


def _response(query: Any, prompt: Any, index: int) -> str:
    if not isinstance(query, str):
        raise ConfigError(f"queries[{index}]", type(query).__name__, "a string: the prompt followed by the response")
    text = _prompt_text(prompt, index)
    if query.startswith(text):
        return query[len(text):]
    # A chat template wraps the prompt: the response follows the prompt's text inside the query. Scoring the whole
    # query instead parsed the prompt's own example answer (an empty response scored 0.1, a right one 0).
    needle = text.strip()
    at = query.find(needle) if needle else -1
    if at < 0:
        raise ConfigError(f"queries[{index}]", query, "a text holding its prompt followed by the response "
                          "(the prompt's text was not found in it, so the response cannot be told apart)")
    return _TURN_MARKERS.sub("", query[at + len(needle):])


def responses(queries: Sequence[str], prompts: Sequence[Any]) -> list[str]:
    """Each query's text after its prompt, the chat template's turn markers dropped.

    Raises:
        ConfigError: a query that does not hold its prompt, or lists of different lengths.
    """
    if len(queries) != len(prompts):
        raise ConfigError("prompts", len(prompts), f"one per query ({len(queries)})")
    return [_response(query, prompt, index) for index, (query, prompt) in enumerate(zip(queries, prompts))]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str],
                **_kwargs: Any) -> dict[str, Any]:
    """``{"rewards", "scores", "extra_logs"}`` as OpenRLHF expects: rewards are the default GRPO reward, scores
    (used by its dynamic filtering) the 0/1 valid verdict, extra logs the valid and optimal rates per sample."""
    import torch

    verdicts = score_batch(list(labels), responses(queries, prompts))
    rewards = torch.tensor([v["reward"] for v in verdicts], dtype=torch.float32)
    valid = torch.tensor([float(v["valid"]) for v in verdicts], dtype=torch.float32)
    optimal = torch.tensor([float(v["optimal"]) for v in verdicts], dtype=torch.float32)
    return {"rewards": rewards, "scores": valid, "extra_logs": {"valid": valid, "optimal": optimal}}
