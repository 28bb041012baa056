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

Answers held to a schema (``answer_mode``): ``constrained`` asks the backend's ``generate_json`` for one JSON object
``{"rationale", "config"}`` that :func:`engineer.answer_schema.answer_json_schema` admits (map sides from
``sides`` and the current config, the rationale at most ``rationale_chars`` long, every declared range), and the
prompt asks for that object; ``free`` asks for prose and a fenced YAML block (the repair path reads either);
``auto`` (the default) is ``constrained`` when the backend can (:func:`policy.backend_base.why_no_json_schema`:
``hf:`` with the grammar library installed and a tokenizer that can write JSON, ``vllm:``, ``openai:``) and
thinking is off, and ``free`` otherwise, with the reason recorded in ``details["constrained_unavailable"]`` (a
thinking model, such as the ``qwen3-4b`` preset's engineer, writes its ``<think>`` block first, which a grammar
holding the answer from its first token would forbid). ``details["answer_mode"]``
says which answered. An explicit ``constrained`` on a backend that cannot is a recorded fallback naming what is
missing (for the grammar library, its pip command). Rules across fields stay with the repair path
(:mod:`engineer.proposal`), which records each repair. An answer that stops at ``max_new_tokens`` without a
usable document is rejected with a reason that says so (``details["cut_at_max_new_tokens"]``).

Failure handling: loading and generation run in a worker thread bounded by ``timeout_s``. A backend that
raises, or does not answer in time, gives the fallback decision (previous config kept) with the reason
recorded. A timed-out worker cannot be killed from Python; its generation is asked to stop at its next token
(:func:`policy.backend_base.stop_generation_in`: ``hf:`` stops, so an abandoned answer does not keep a core, or a
model being trained, busy; a remote request finishes), the thread is a daemon (it never holds the process open) and
its answer is discarded.
"""

from __future__ import annotations

import threading
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable

from engineer.answer_schema import RATIONALE_CHARS, answer_json_schema, answer_sides, check_sides
from engineer.context import EngineerContext
from engineer.decision import EngineerDecision, make_decision
from engineer.options import python_object
from engineer.prompt import JsonAnswer, build_messages, build_text_prompt
from engineer.proposal import MAX_RATIONALE_CHARS, decide_from_answer
from policy.backend_base import stop_generation_in, why_no_json_schema
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.fields import check_fields, choice, integer

PROMPT_FORMS = ("auto", "chat", "text")
ANSWER_MODES = ("auto", "constrained", "free")
THINKING_IS_ON = ("enable_thinking is on: a grammar holds the answer from its first token, leaving no room to think "
                  "(answer_mode=constrained forces it)")
DEFAULT_MAX_NEW_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.7
DEFAULT_TIMEOUT_S = 900.0  # a 4B model writing 1024 tokens with thinking on a slow GPU stays well inside


class BackendTimeout(RuntimeError):
    """The backend did not finish within the engineer's ``timeout_s``."""


class ConstrainedUnavailable(RuntimeError):
    """``answer_mode="constrained"`` on a backend that cannot hold its answer to a schema (the message says why)."""


def call_with_timeout(work: Callable[[], Any], timeout_s: float) -> Any:
    """``work()`` in a daemon thread; its result, its exception re-raised, or :class:`BackendTimeout` (the thread's
    generation then asked to stop: module docstring)."""
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
        stop_generation_in(worker)  # its answer is discarded: the generation stops at its next token (hf:)
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
    answer_mode: str = choice("auto", ANSWER_MODES)
    """``constrained``: the answer is held to the answer's JSON Schema; ``free``: prose and a YAML block, repaired;
    ``auto``: constrained when the backend can, else free (the reason recorded)."""
    sides: tuple[int, ...] | None = None
    """Map sides a constrained answer may list, besides the current config's own; None: the benchmark's 3..10."""
    rationale_chars: int = integer(RATIONALE_CHARS, 20, MAX_RATIONALE_CHARS)
    """Most characters of a constrained answer's rationale."""
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
        check_fields(self, "llm")  # the declared options (answer_mode, rationale_chars)
        if self.sides is not None:
            self.sides = check_sides(self.sides)
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

    def prompt(self, backend: Any, context: EngineerContext, config: StageConfig,
               json_answer: JsonAnswer | None = None) -> str | list[dict]:
        """The prompt in the form ``backend`` takes (see ``prompt_form``), asking for ``json_answer``'s JSON
        object when given (a constrained answer), else for prose and a YAML block."""
        form = self.prompt_form
        if form == "auto":
            tokenizer = getattr(backend, "tokenizer", None)
            form = "text" if tokenizer is not None and not getattr(tokenizer, "chat_template", None) else "chat"
        if form == "text":
            return build_text_prompt(context, config, self.show_schema, json_answer)
        return build_messages(context, config, self.show_schema, json_answer)

    def mode(self, backend: Any) -> tuple[str, str | None]:
        """``(mode, why_not_constrained)``: the answer mode for ``backend`` (``constrained`` or ``free``) and, when
        ``auto`` chose ``free``, why (module docstring). ConstrainedUnavailable for an explicit ``constrained``
        that ``backend`` cannot serve."""
        if self.answer_mode == "free":
            return "free", None
        if self.answer_mode == "auto" and self.enable_thinking:
            return "free", THINKING_IS_ON
        why = why_no_json_schema(backend)
        if why is None:
            return "constrained", None
        if self.answer_mode == "constrained":
            raise ConstrainedUnavailable(why)
        return "free", why

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
            mode, why_free = self.mode(backend)
            details["answer_mode"] = mode
            if why_free is not None:
                details["constrained_unavailable"] = why_free
            json_answer = None
            if mode == "constrained":
                json_answer = JsonAnswer(answer_sides(config, self.sides), self.rationale_chars)
                details["answer_sides"] = list(json_answer.sides)
            prompt, max_new_tokens, fitted = self.fit(backend, self.prompt(backend, context, config, json_answer))
            details["prompt_form"] = "text" if isinstance(prompt, str) else "chat"
            details["max_new_tokens"] = max_new_tokens
            if fitted:
                details["prompt_fit"] = fitted
            sampling = self.sampling(seed, max_new_tokens)
            if json_answer is None:
                return backend.generate([prompt], sampling)
            schema = answer_json_schema(config, self.sides, self.rationale_chars)
            generations = backend.generate_json([prompt], sampling, schema)
            relaxed = getattr(backend, "schema_relaxed", None)
            if relaxed:
                details["constrained_relaxed"] = relaxed
            return generations

        try:
            generations = call_with_timeout(work, self.timeout_s)
            generation = generations[0]
            text = generation.text
        except BackendTimeout as error:
            return self._fallback(config, context, f"the backend timed out: {error}", started, details)
        except ConstrainedUnavailable as error:
            details["answer_mode"] = "constrained"
            return self._fallback(config, context, f"answer_mode constrained is not available: {error}", started,
                                  details)
        except Exception as error:  # any backend failure (load, prompt too long, HTTP, CUDA) is a recorded fallback
            message = " ".join(str(error).split())[:500]
            return self._fallback(config, context, f"the backend failed: {type(error).__name__}: {message}", started,
                                  details)
        completion_tokens = int(getattr(generation, "completion_tokens", 0) or 0)
        details.update(prompt_tokens=int(getattr(generation, "prompt_tokens", 0) or 0),
                       completion_tokens=completion_tokens)
        budget = details["max_new_tokens"]  # set by work() before it generated
        cut = completion_tokens >= budget
        if cut:
            details["cut_at_max_new_tokens"] = True
        decision = decide_from_answer(self.name, text, config, context.text, started, details)
        if cut and not decision.accepted:  # say the likely cause first: the answer ran out of tokens
            decision.reason = (f"rejected: the answer reached max_new_tokens ({budget}) before it ended (raise "
                               f"max_new_tokens); {decision.reason.removeprefix('rejected: ')}")
        return decision

    def _fallback(
        self, config: StageConfig, context: EngineerContext, why: str, started: float, details: dict
    ) -> EngineerDecision:
        return make_decision(
            self.name, config, None, f"rejected: {why}", context_text=context.text,
            seconds=time.perf_counter() - started, details=details,
        )


__all__ = ["ANSWER_MODES", "BackendTimeout", "ConstrainedUnavailable", "LLMEngineer", "PROMPT_FORMS", "call_with_timeout"]
