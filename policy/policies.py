"""Policies by spec: a scripted name (``policy.scripted.SCRIPTED_POLICIES``: ``greedy``, ...) or a model backend
spec (``policy.backends.BACKENDS``: ``hf:PATH``, ``openai:MODEL``, ...). Every policy answers in a prompt style's
text and every answer goes through the same parser, so scripted and model policies are judged the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from policy.parsing import parse_plan
from policy.prompts import PromptStyle, checkpoint_style, get_style, prompt_text
from policy.scripted import SCRIPTED_POLICIES, make_scripted
from simulator.env import default_horizon
from simulator.errors import ConfigError
from simulator.generator import LabelledInstance
from simulator.types import JointPlan

if TYPE_CHECKING:
    from policy.backend_base import Backend, Sampling


@dataclass
class Answers:
    """What a policy answered for a batch of instances (lists aligned with the instances)."""

    plans: list[JointPlan | None]
    parse_errors: list[str | None]
    completions: list[str]
    prompts: list[str]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    seconds_per_answer: float = 0.0


class Policy(Protocol):
    """What evaluation asks of a policy: a descriptor recorded in replay headers, and answers to a batch."""

    @property
    def descriptor(self) -> dict[str, Any]: ...

    def answer(self, items: Sequence[LabelledInstance], seed: int = 0) -> Answers: ...


def _parse_all(items: Sequence[LabelledInstance],
               texts: Sequence[str]) -> tuple[list[JointPlan | None], list[str | None]]:
    results = [parse_plan(text, it.instance.n_agents, default_horizon(it.instance)) for it, text in zip(items, texts)]
    return [r.plan for r in results], [r.error for r in results]


@dataclass
class ScriptedTextPolicy:
    """A scripted policy whose plans are written as answers in ``style`` and parsed back."""

    name: str
    style: PromptStyle

    @property
    def descriptor(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.name, "kind": "scripted", "prompt_style": self.style.name}

    def answer(self, items: Sequence[LabelledInstance], seed: int = 0) -> Answers:
        start = time.perf_counter()
        plans = make_scripted(self.name).plans(items, seed=seed)
        texts = [self.style.write_answer(it.instance, plan) for it, plan in zip(items, plans)]
        parsed, errors = _parse_all(items, texts)
        elapsed = (time.perf_counter() - start) / max(len(items), 1)
        prompts = [prompt_text(self.style.prompt(it.instance)) for it in items]
        return Answers(parsed, errors, texts, prompts, [0] * len(items), [0] * len(items), elapsed)


@dataclass
class ModelPolicy:
    """A language model behind a backend spec, prompted in ``style`` and sampled with ``sampling``."""

    spec: str
    style: PromptStyle
    sampling: Sampling
    backend: Backend | None = None  # None: made from ``spec`` on construction

    def __post_init__(self) -> None:
        if self.backend is None:
            from policy.backends import make_backend

            self.backend = make_backend(self.spec)

    @property
    def descriptor(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"name": self.spec.split(":", 1)[0], "spec": self.spec, "kind": "model",
                "prompt_style": self.style.name, "sampling": asdict(self.sampling)}

    def answer(self, items: Sequence[LabelledInstance], seed: int = 0) -> Answers:
        prompts = [self.style.prompt(it.instance) for it in items]
        assert self.backend is not None  # __post_init__ made it
        start = time.perf_counter()
        generations = self.backend.generate(prompts, self.sampling)
        elapsed = (time.perf_counter() - start) / max(len(items), 1)
        texts = [g.text for g in generations]
        parsed, errors = _parse_all(items, texts)
        return Answers(parsed, errors, texts, [prompt_text(p) for p in prompts],
                       [g.prompt_tokens for g in generations], [g.completion_tokens for g in generations], elapsed)


def make_policy(spec: str, style: str | None = None,
                sampling: Sampling | None = None) -> ScriptedTextPolicy | ModelPolicy:
    """``random`` / ``greedy`` / ``oracle``, or ``hf:`` / ``vllm:`` / ``openai:`` backend specs.

    ``style`` defaults to the one recorded in a run's checkpoint folder (``policy.prompts.checkpoint_style``),
    else ``natural``.
    """
    chosen = get_style(style or checkpoint_style(spec) or "natural")
    if spec in SCRIPTED_POLICIES:
        return ScriptedTextPolicy(spec, chosen)
    if ":" not in spec:
        raise ConfigError("policy", spec, f"one of {sorted(SCRIPTED_POLICIES)} or a backend spec like hf:PATH, "
                                          "vllm:PATH, openai:MODEL")
    if sampling is None:
        from policy.backend_base import Sampling

        sampling = Sampling()
    return ModelPolicy(spec, chosen, sampling)
