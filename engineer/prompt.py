"""The LLM engineer's prompt: its role, the paper's lessons, the config schema, the evidence, the current config.

Two forms of one prompt: :func:`build_messages` (a chat: system + user message, for models with a chat template
and for OpenAI-compatible endpoints) and :func:`build_text_prompt` (the same words as one raw text, for models
without a chat template). The answer asked for is a short rationale and the whole next config as one YAML or
JSON document in a fenced block; :mod:`engineer.proposal` reads it, tolerant of what models really write. When
the backend holds the answer to :func:`engineer.answer_schema.answer_json_schema` (``json_answer``), the prompt
asks for that one JSON object instead, naming the sides it may list and the rationale's bound, so the words and
the grammar agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from engineer.context import EngineerContext
from simulator.config import StageConfig, config_json_schema, format_config_text

ROLE = (
    "You are the environment engineer of a reinforcement-learning curriculum. A language model (the policy) is "
    "trained in stages to solve MAPF-FrozenLake: several agents on a square frozen lake, each must reach its own "
    "goal without falling into a hole, moving off the grid, or colliding with another agent (two agents in one "
    "cell, or two agents swapping cells). The policy answers with a joint plan: every agent's whole sequence of "
    "moves (up, down, left, right, wait). After each stage you read evidence of how the policy behaved on the "
    "stage's validation instances and write the configuration of the next stage: the sampling distribution of "
    "its training instances (agents per instance, number of instances, and for each map size its share of the "
    "data, its share of holes and its share of instances that need an agent to wait)."
)

GUIDELINES = (
    "How to decide:",
    "- Failure evidence matters most: read which failures happen, on which map sizes, and why.",
    "- Keep what already works: change only what the evidence asks for, in small steps.",
    "- Do not simply maximise difficulty. When almost every instance fails, or almost every one succeeds, the "
    "training signal collapses. Put weight on map sizes where success is mid-range, and move weight away from "
    "sizes that are solved or hopeless.",
    "- Raise hole or wait ratios only where the policy copes with the current ones.",
)

ANSWER_FORMAT = (
    "Answer with a short rationale (at most three sentences), then the complete next config as one YAML "
    "document in a fenced code block (```yaml ... ```). Write every field. The data_ratio values must sum to 1. "
    "The document must follow this JSON Schema:"
)


@dataclass(frozen=True)
class JsonAnswer:
    """The answer a constrained backend is held to: ``{"rationale", "config"}`` with these sides and bound."""

    sides: Sequence[int]
    """The map sides the config may list."""
    rationale_chars: int
    """Most characters of the rationale."""

    def format_text(self) -> str:
        return (
            'Answer with one JSON object and nothing else: {"rationale": "<why, in at most '
            f'{self.rationale_chars} characters>", "config": <the complete next config>}}. The config\'s map sides '
            f"may be {', '.join(map(str, self.sides))}, each at most once. The data_ratio values must sum to 1. "
            "The config must follow this JSON Schema:"
        )


def system_text(show_schema: bool = True, json_answer: JsonAnswer | None = None) -> str:
    """The role, the guidelines, the answer format (a fenced YAML block, or ``json_answer``'s JSON object) and
    (unless ``show_schema`` is False) the config's JSON Schema."""
    parts = [ROLE, "\n".join(GUIDELINES)]
    answer_format = ANSWER_FORMAT if json_answer is None else json_answer.format_text()
    if show_schema:
        parts.append(answer_format + "\n" + json.dumps(config_json_schema(), separators=(",", ":")))
    else:
        parts.append(answer_format.rsplit(" The ", 1)[0])
    return "\n\n".join(parts)


def user_text(context: EngineerContext, config: StageConfig) -> str:
    """The evidence and the current config, and the request."""
    return (
        "Evidence from the stage just trained:\n\n"
        f"{context.text.rstrip()}\n\n"
        "Current config:\n```yaml\n"
        f"{format_config_text(config, 'yaml').rstrip()}\n```\n\n"
        "Write the next stage's config."
    )


def build_messages(context: EngineerContext, config: StageConfig, show_schema: bool = True,
                   json_answer: JsonAnswer | None = None) -> list[dict]:
    """The prompt as chat messages ``[{"role": "system", ...}, {"role": "user", ...}]``."""
    return [
        {"role": "system", "content": system_text(show_schema, json_answer)},
        {"role": "user", "content": user_text(context, config)},
    ]


def build_text_prompt(context: EngineerContext, config: StageConfig, show_schema: bool = True,
                      json_answer: JsonAnswer | None = None) -> str:
    """The prompt as one raw text (for models without a chat template), ending where the answer begins."""
    return f"{system_text(show_schema, json_answer)}\n\n{user_text(context, config)}\n\nAnswer:\n"


__all__ = ["JsonAnswer", "build_messages", "build_text_prompt", "system_text", "user_text"]
