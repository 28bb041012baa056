"""OpenRLHF's custom reward function for MAPF-FrozenLake exports (``mapf-lake export --layout openrlhf``).

Pass this file to OpenRLHF's trainer as ``--remote_rm_url policy/openrlhf_reward.py --label_key label`` (with
``--input_key prompt``): OpenRLHF calls :func:`reward_func` with the full texts (prompt + response), the prompts
and the labels (each row's record as JSON). The response is the text after its prompt; it is scored by
``policy.score.score_batch``, the same parse and judge as the GRPO reward.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy.score import score_batch


def responses(queries: Sequence[str], prompts: Sequence[str]) -> list[str]:
    """Each query's text after its prompt (the whole query when it does not start with the prompt)."""
    return [query[len(prompt):] if query.startswith(prompt) else query for query, prompt in zip(queries, prompts)]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **_kwargs) -> dict:
    """``{"rewards", "scores", "extra_logs"}`` as OpenRLHF expects: rewards are the default GRPO reward, scores
    (used by its dynamic filtering) the 0/1 valid verdict, extra logs the valid and optimal rates per sample."""
    import torch

    verdicts = score_batch(list(labels), responses(queries, prompts))
    rewards = torch.tensor([v["reward"] for v in verdicts], dtype=torch.float32)
    valid = torch.tensor([float(v["valid"]) for v in verdicts], dtype=torch.float32)
    optimal = torch.tensor([float(v["optimal"]) for v in verdicts], dtype=torch.float32)
    return {"rewards": rewards, "scores": valid, "extra_logs": {"valid": valid, "optimal": optimal}}
