"""The LLM engineer: any policy backend (``policy.backends.BACKENDS``) reads the context and writes the config.

``make_engineer("llm:hf:runs/x/checkpoint")`` (the current checkpoint), ``"llm:hf:Qwen/Qwen3-4B"`` (the base
model) or ``"llm:openai:gpt-4o"`` (an external model). The backend is loaded on the first :meth:`propose`, not
at construction, so that a backend that cannot load is a recorded fallback, not a crashed run; a ready backend
(e.g. the curriculum's model already in memory) can be passed as ``backend=``.

Small models: with ``fit_prompt`` (the default) and a backend that exposes its ``tokenizer`` (``hf:``), the
characters that tokenizer cannot encode are removed from the prompt; when the model's window (``max_positions``)
cannot hold ``max_new_tokens`` plus a prompt, the answer gets at most half the window; and a text prompt longer
than what is left keeps its tail (the current config and the request are at the end). Each step that acts is
recorded in ``details["prompt_fit"]``. Real models (Qwen3's byte-level tokenizer, 40k
positions) are never touched by this; it lets the tiny CPU model (a 25-character alphabet, 1024 positions)
answer at all, instead of every stage falling back on a refused prompt.

Failure handling: loading and generation run in a worker thread bounded by ``timeout_s``. A backend that
raises, or does not answer in time, gives the fallback decision (previous config kept) with the reason
recorded; a timed-out worker cannot be killed from Python, so it is left to finish in the background (a daemon
thread: it never holds the process open) and its answer is discarded.
"""

from __future__ import annotations

import threading
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

from engineer.context import EngineerContext
from engineer.decision import EngineerDecision, make_decision
from engineer.options import python_object
from engineer.prompt import build_messages, build_text_prompt
from engineer.proposal import decide_from_answer
from simulator.config import StageConfig
from simulator.errors import ConfigError

PROMPT_FORMS = ("auto", "chat", "text")
DEFAULT_MAX_NEW_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.7
DEFAULT_TIMEOUT_S = 900.0  # a 4B model writing 1024 tokens with thinking on a slow GPU stays well inside


class BackendTimeout(RuntimeError):
    """The backend did not finish within the engineer's ``timeout_s``."""


def call_with_timeout(work: Callable[[], Any], timeout_s: float) -> Any:
    """``work()`` in a daemon thread; its result, its exception re-raised, or :class:`BackendTimeout`."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # carried to the caller's thread, re-raised there
            outcome["error"] = error

    worker = threading.Thread(target=run, name="mapf-lake-engineer", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise BackendTimeout(f"no answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@dataclass
class LLMEngineer:
    """An engineer that asks a language model. Options are fields (``make_engineer("llm:..", timeout_s=60)``)."""

    backend_spec: str
    """A policy backend spec: ``hf:PATH``, ``vllm:PATH`` or ``openai:MODEL`` (see :mod:`policy.backends`)."""
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    """Most tokens the model writes for one answer."""
    temperature: float = DEFAULT_TEMPERATURE
    """Sampling temperature (0: greedy)."""
    top_p: float = 0.95
    """Nucleus sampling's probability mass."""
    enable_thinking: bool = False
    """Let a model with a thinking mode think before it answers (its chat template's ``enable_thinking``)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Bound on loading plus generating, in seconds; beyond it the fallback is taken."""
    show_schema: bool = True
    """Show the config's JSON Schema in the prompt (off only for models with a tiny context window)."""
    prompt_form: str = "auto"
    """``chat`` messages, raw ``text``, or ``auto``: text for a backend whose tokenizer has no chat template."""
    fit_prompt: bool = True
    """Fit the prompt to a small model's tokenizer and window (module docstring); recorded when it acts."""
    backend: Any = python_object()
    """A ready backend to use instead of loading ``backend_spec``."""
    name: str = field(init=False)

    def __post_init__(self) -> None:
        from policy.backend_base import Sampling
        from policy.backends import parse_spec

        parse_spec(self.backend_spec)  # a malformed spec is bad input: fail now, not at the first stage
        self.name = f"llm:{self.backend_spec}"
        if self.prompt_form not in PROMPT_FORMS:
            raise ConfigError("llm.prompt_form", self.prompt_form, f"one of {', '.join(PROMPT_FORMS)}")
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise ConfigError("llm.timeout_s", self.timeout_s, "a number of seconds > 0")
        self._sampling_class = Sampling
        self.sampling(0)  # validates max_new_tokens, temperature, top_p, enable_thinking now
        self._lock = threading.Lock()

    def sampling(self, seed: int, max_new_tokens: int | None = None) -> Any:
        """The backend ``Sampling`` of a call seeded ``seed`` (``max_new_tokens`` overrides the option)."""
        return self._sampling_class(
            max_new_tokens=max_new_tokens or self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
            seed=seed % (2**63), enable_thinking=self.enable_thinking, batch_size=1,
        )

    def _load(self) -> Any:
        with self._lock:
            if self.backend is None:
                from policy.backends import make_backend

                self.backend = make_backend(self.backend_spec)
            return self.backend

    def prompt(self, backend: Any, context: EngineerContext, config: StageConfig) -> str | list[dict]:
        """The prompt in the form ``backend`` takes (see ``prompt_form``)."""
        form = self.prompt_form
        if form == "auto":
            tokenizer = getattr(backend, "tokenizer", None)
            form = "text" if tokenizer is not None and not getattr(tokenizer, "chat_template", None) else "chat"
        if form == "text":
            return build_text_prompt(context, config, self.show_schema)
        return build_messages(context, config, self.show_schema)

    def fit(self, backend: Any, prompt: str | list[dict]) -> tuple[str | list[dict], int, dict]:
        """``prompt`` and ``max_new_tokens`` fitted to ``backend``'s tokenizer and window (module docstring), and
        a record of what was done (empty when nothing was)."""
        tokenizer = getattr(backend, "tokenizer", None)
        max_new_tokens = self.max_new_tokens
        if not self.fit_prompt or tokenizer is None:
            return prompt, max_new_tokens, {}
        texts = [prompt] if isinstance(prompt, str) else [message["content"] for message in prompt]
        texts = [unicodedata.normalize("NFC", text) for text in texts]
        alphabet = "".join(sorted(set("".join(texts))))
        encodable = set(tokenizer.decode(tokenizer(alphabet, add_special_tokens=False)["input_ids"]))
        lost = "".join(char for char in alphabet if char not in encodable)
        done: dict[str, Any] = {}
        if lost:
            dropped = sum(text.count(char) for text in texts for char in lost)
            texts = [text.translate({ord(char): None for char in lost}) for text in texts]
            done.update(dropped_chars=lost, dropped_count=dropped)
        window = getattr(backend, "max_positions", None)
        if isinstance(window, int) and window > 1 and max_new_tokens > window // 2:
            max_new_tokens = window // 2
            done.update(max_new_tokens=max_new_tokens)
        if isinstance(prompt, str):
            ids = tokenizer(texts[0], add_special_tokens=False)["input_ids"]
            # A few tokens of margin: re-encoding a decoded slice of a BPE text may merge differently.
            budget = window - max_new_tokens - 8 if isinstance(window, int) else None
            if budget is not None and 0 < budget < len(ids):
                texts[0] = tokenizer.decode(ids[-budget:])
                done.update(cut_tokens=len(ids) - budget)
            return texts[0], max_new_tokens, done
        return [{**message, "content": text} for message, text in zip(prompt, texts)], max_new_tokens, done

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Ask the model; parse, repair and validate its answer; fall back on any failure (reason recorded)."""
        started = time.perf_counter()
        details: dict[str, Any] = {"backend": self.backend_spec, "timeout_s": self.timeout_s}

        def work() -> Any:
            backend = self._load()
            prompt, max_new_tokens, fitted = self.fit(backend, self.prompt(backend, context, config))
            details["prompt_form"] = "text" if isinstance(prompt, str) else "chat"
            if fitted:
                details["prompt_fit"] = fitted
            return backend.generate([prompt], self.sampling(seed, max_new_tokens))

        try:
            generations = call_with_timeout(work, self.timeout_s)
            generation = generations[0]
            text = generation.text
        except BackendTimeout as error:
            return self._fallback(config, context, f"the backend timed out: {error}", started, details)
        except Exception as error:  # any backend failure (load, prompt too long, HTTP, CUDA) is a recorded fallback
            message = " ".join(str(error).split())[:500]
            return self._fallback(config, context, f"the backend failed: {type(error).__name__}: {message}", started,
                                  details)
        details.update(
            prompt_tokens=int(getattr(generation, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(generation, "completion_tokens", 0) or 0),
        )
        return decide_from_answer(self.name, text, config, context.text, started, details)

    def _fallback(
        self, config: StageConfig, context: EngineerContext, why: str, started: float, details: dict
    ) -> EngineerDecision:
        return make_decision(
            self.name, config, None, f"rejected: {why}", context_text=context.text,
            seconds=time.perf_counter() - started, details=details,
        )


__all__ = ["BackendTimeout", "LLMEngineer", "PROMPT_FORMS", "call_with_timeout"]
