"""What every model backend shares: the :data:`Prompt` type, :class:`Sampling`, :class:`Generation`, the
:class:`Backend` protocol, :class:`BackendError` and the prompt checks.

Contract of every backend's ``generate(prompts, sampling)``:

* ``prompts`` is a list of :data:`Prompt`: a ``str`` is raw text, sent as is (no chat template, no added special
  tokens); a ``list`` of ``{"role", "content"}`` dicts is a chat, rendered with the model's chat template and a
  generation prompt (``sampling.enable_thinking`` is passed to the template, which Qwen3's honours).
* It returns one :class:`Generation` per prompt, in order: the completion text (special tokens removed; Qwen3's
  ``<think>`` tags are not special, so they stay for the parser), the prompt's token count and the completion's
  token count (including the stop token when the model produced one).
* The same prompts, sampling and seed give the same completions on the same machine and software (the OpenAI
  backend passes ``seed + index`` per request; whether the server honours it is up to the server). Repeated
  prompts in one call get independent samples.
* Bad input (spec, prompts, sampling, environment variables, a key the endpoint refuses, an endpoint that cannot
  be reached) raises :class:`~simulator.errors.ConfigError` before any generation starts; a failure in the middle
  of the work (an endpoint that keeps failing after its retries) raises :class:`BackendError`.
* No API key ever appears in an error message, a repr or a log line.

Answers held to a JSON Schema: a backend that can constrain generation to a schema also has
``generate_json(prompts, sampling, schema)``, with the same contract plus this one: every completion that ends
before ``max_new_tokens`` is a JSON document the schema admits (the grammar decides each token; no free
whitespace). It may have ``json_schema_unavailable()``, which says why it cannot right now (a grammar library
not installed, a tokenizer that cannot write JSON), or None. :func:`why_no_json_schema` asks both.

Stopping: :func:`stop_generation_in` asks the generation running (or about to run) in a thread to stop at its next
token; a caller that gave up on the thread (the engineer's ``timeout_s``) uses it so the abandoned work does not
keep a core, or the model, busy. ``hf:`` honours it (:func:`generation_stopped`, checked each token); the others
finish their request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from typing import Any, Callable, Protocol, Sequence

from simulator.errors import ConfigError

Prompt = str | list[dict[str, Any]]  # raw text, or chat messages [{"role": ..., "content": ...}]


_STOPPED: set[threading.Thread] = set()  # threads whose generation stops at its next token
_STOPPED_LOCK = threading.Lock()


def stop_generation_in(thread: threading.Thread) -> None:
    """Stop the generation that runs, or will run, in ``thread`` at its next token (module docstring)."""
    with _STOPPED_LOCK:
        _STOPPED.difference_update([old for old in _STOPPED if not old.is_alive()])  # finished threads: forgotten
        _STOPPED.add(thread)


def generation_stopped() -> bool:
    """Whether the calling thread's generation was asked to stop (:func:`stop_generation_in`)."""
    return threading.current_thread() in _STOPPED


class BackendError(RuntimeError):
    """A backend failed in the middle of its work (not bad input): the message says what and where."""


@dataclass(frozen=True)
class Sampling:
    """How to sample completions; validated on construction (a bad field raises ConfigError naming it)."""

    max_new_tokens: int = 256
    """Most tokens per completion (>= 1)."""
    temperature: float = 1.0
    """Softmax temperature (>= 0); 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass in (0, 1]; 1 keeps every token."""
    seed: int = 0
    """Seed of the call: same seed, same completions."""
    enable_thinking: bool = False
    """Qwen3's chat-template switch: False renders an empty ``<think></think>`` block so the model answers at once."""
    batch_size: int = 32
    """hf only: prompts per ``generate`` call (bounds memory; vLLM and HTTP schedule on their own)."""
    top_k: int = 0
    """Keep only the k most likely tokens (>= 0); 0 turns the cut off (Qwen3's card suggests 20 for thinking)."""

    def __post_init__(self) -> None:
        checks: dict[str, tuple[Callable[[Any], bool], str]] = {
            "max_new_tokens": (lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
            "temperature": (lambda v: isinstance(v, (int, float)) and 0 <= v < float("inf"), "a number >= 0"),
            "top_p": (lambda v: isinstance(v, (int, float)) and 0 < v <= 1, "a number in (0, 1]"),
            "seed": (lambda v: isinstance(v, int) and 0 <= v < 2**63, "an integer in [0, 2**63)"),
            "enable_thinking": (lambda v: isinstance(v, bool), "True or False"),
            "batch_size": (lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
            "top_k": (lambda v: isinstance(v, int) and v >= 0, "an integer >= 0 (0 = no cut)"),
        }
        for field in fields(self):
            valid, allowed = checks[field.name]
            value = getattr(self, field.name)
            is_flag_as_number = isinstance(value, bool) and field.name != "enable_thinking"  # True is an int too
            if is_flag_as_number or not valid(value):
                raise ConfigError(f"sampling.{field.name}", value, allowed)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Generation:
    """One completion: its text and token counts (see the module contract)."""

    text: str
    prompt_tokens: int
    completion_tokens: int


class Backend(Protocol):
    spec: str

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]: ...


def why_no_json_schema(backend: Any) -> str | None:
    """None when ``backend`` can hold generation to a JSON Schema now (it has ``generate_json`` and its
    ``json_schema_unavailable()``, if any, says nothing); else why not, in one line."""
    if not callable(getattr(backend, "generate_json", None)):
        return f"{getattr(backend, 'spec', type(backend).__name__)} cannot hold generation to a JSON schema"
    unavailable = getattr(backend, "json_schema_unavailable", None)
    return unavailable() if callable(unavailable) else None


def check_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    """``prompts`` as a list after checking each is a string or a list of role/content dicts (else ConfigError)."""
    if isinstance(prompts, (str, dict)) or not isinstance(prompts, Sequence):
        raise ConfigError("prompts", prompts, "a list of prompts (strings or chat message lists)")
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            continue
        if not isinstance(prompt, list) or not prompt:
            raise ConfigError(f"prompts[{index}]", prompt, "a string or a non-empty list of chat messages")
        for turn, message in enumerate(prompt):
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                raise ConfigError(
                    f"prompts[{index}][{turn}]", message, 'a dict {"role": str, "content": str}'
                )
    return list(prompts)


def first_line(error: BaseException) -> str:
    """``"ErrorType: first line of its message"`` (at most 300 characters), for a ConfigError's detail."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]
