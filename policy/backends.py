"""Model backends: one interface, looked up by name in :data:`BACKENDS`, made from a spec string.

A spec is ``KIND:TARGET``:

* ``hf:PATH_OR_NAME``: transformers on this machine (CPU, or a GPU when there is one). ``PATH_OR_NAME`` is a
  model folder (e.g. one from :func:`policy.models.init_tiny_model`) or a hub name already in the local cache;
  a hub name not cached is downloaded only when the hub is not switched off (``HF_HUB_OFFLINE=1``).
* ``vllm:PATH_OR_NAME``: an offline vLLM engine in this process (GPU machines; ``pip install
  'mapf-frozenlake[vllm]'``).
* ``openai:MODEL``: any OpenAI-compatible HTTP endpoint (OpenAI, ``vllm serve``, ``trl vllm-serve``'s OpenAI
  front, Gemini's compatibility API, ...). Base URL from ``MAPF_LAKE_OPENAI_BASE_URL`` (default
  ``https://api.openai.com/v1``), key from ``MAPF_LAKE_OPENAI_API_KEY`` or else ``OPENAI_API_KEY``.

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
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import threading
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from simulator.errors import ConfigError

Prompt = str | list[dict]  # raw text, or chat messages [{"role": ..., "content": ...}]

VLLM_INSTALL_HINT = "pip install 'mapf-frozenlake[vllm]' on a GPU machine"


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


def _mixed_seed(seed: int, chunk: int) -> int:
    """A torch seed for chunk ``chunk`` of a call seeded ``seed`` (distinct pairs give unrelated streams)."""
    return (seed * 0x9E3779B97F4A7C15 + chunk * 0xBF58476D1CE4E5B9 + 1) % (2**63)


# ------------------------------------------------------------------------------------------------------------
# hf: transformers


def _hub_downloads_off() -> bool:
    truthy = {"1", "true", "yes", "on"}
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    return any(os.environ.get(name, "").strip().lower() in truthy for name in names)


_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class HFBackend:
    """transformers ``AutoModelForCausalLM`` + ``AutoTokenizer``; batched, left-padded ``generate``.

    On a GPU the weights load in bf16 (``device_map="auto"`` when accelerate is installed); on a CPU in fp32.
    Sampling is seeded per chunk of ``sampling.batch_size`` prompts inside a forked RNG, so the caller's torch
    random stream is left as it was. Loading happens in the constructor: a folder that does not exist, or a hub
    name neither cached nor downloadable, raises ConfigError at once.

    ``cpu_threads``: torch intra-op threads while generating on a CPU (restored afterwards). The default is 1 for
    models under :data:`SMALL_MODEL_PARAMETERS` and torch's own setting otherwise. Measured with the tiny model
    (batch 32 x 64 tokens, 2-core machine): two threads gain about 1.3x while the other core is idle, but lose
    6-20x while another process keeps it busy (the intra-op workers wait for a core every layer), so one thread
    is the predictable default; a run that owns its machine can pass ``cpu_threads``.
    """

    SMALL_MODEL_PARAMETERS = 100_000_000

    def __init__(self, target: str, device: str | None = None, cpu_threads: int | None = None) -> None:
        import torch

        self.spec = f"hf:{target}"
        if cpu_threads is not None and (not isinstance(cpu_threads, int) or cpu_threads < 1):
            raise ConfigError("hf.cpu_threads", cpu_threads, "an integer >= 1, or None for the default")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer, self.model = self._load(target)
        parameters = sum(parameter.numel() for parameter in self.model.parameters())
        if cpu_threads is None and parameters < self.SMALL_MODEL_PARAMETERS:
            cpu_threads = 1
        self.cpu_threads = cpu_threads
        self.tokenizer.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids: list[int] = [eos] if isinstance(eos, int) else list(eos or [])
        if not self.eos_ids:
            raise ConfigError("backend", self.spec, "a model whose tokenizer or generation config names an eos token")
        self.max_positions = getattr(self.model.config, "max_position_embeddings", None)

    def __repr__(self) -> str:
        return f"HFBackend(spec={self.spec!r}, device={self.device!r})"

    def _load(self, target: str) -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        local = Path(target).expanduser()
        if not local.exists() and not _HUB_NAME.match(target):
            raise ConfigError(
                "backend", self.spec, "hf:FOLDER (an existing model folder) or hf:OWNER/NAME (a hub model)",
                detail=f"no folder {local}",
            )
        source = str(local) if local.exists() else target
        on_gpu = self.device.startswith("cuda")
        model_kwargs: dict[str, Any] = {"dtype": torch.bfloat16 if on_gpu else torch.float32}
        if on_gpu and _accelerate_installed():
            model_kwargs["device_map"] = "auto"

        def load(offline: bool) -> tuple[Any, Any]:
            tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
            model = AutoModelForCausalLM.from_pretrained(source, local_files_only=offline, **model_kwargs)
            return tokenizer, model

        try:
            tokenizer, model = load(offline=True)
        except (OSError, ValueError, KeyError) as offline_error:
            if local.exists() or _hub_downloads_off():
                raise ConfigError(
                    "backend", self.spec, "a folder (or cached hub model) with a causal LM and its tokenizer",
                    detail=_first_line(offline_error),
                ) from None
            try:  # a hub name not cached yet: the one place a download may happen, by design (Qwen/Qwen3-4B)
                tokenizer, model = load(offline=False)
            except (OSError, ValueError, KeyError) as online_error:
                raise ConfigError(
                    "backend", self.spec, "a hub model this machine can download, or a local folder",
                    detail=_first_line(online_error),
                ) from None
        if "device_map" not in model_kwargs:
            model = model.to(self.device)
        model.eval()
        return tokenizer, model

    def render(self, prompt: Prompt, sampling: Sampling) -> str:
        """The exact text the model is fed for ``prompt`` (raw text as is; chats through the chat template)."""
        if isinstance(prompt, str):
            return prompt
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(
                "prompts", "chat messages", f"raw text prompts: {self.spec}'s tokenizer has no chat template "
                "(pass a text style: --style compact-nb or --style compact)"
            )
        return self.tokenizer.apply_chat_template(
            prompt, tokenize=False, add_generation_prompt=True, enable_thinking=sampling.enable_thinking
        )

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        return self._generate(prompts, sampling, ignore_eos=False)

    def generate_fixed_length(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        """Like :meth:`generate` but never stops early: every completion is ``max_new_tokens`` long (benchmarks)."""
        return self._generate(prompts, sampling, ignore_eos=True)

    def _generate(self, prompts: list[Prompt], sampling: Sampling, ignore_eos: bool) -> list[Generation]:
        prompts = check_prompts(prompts)
        texts = [self.render(prompt, sampling) for prompt in prompts]
        encoded = [self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        for index, ids in enumerate(encoded):  # all checks before the first generate call
            if not ids:
                raise ConfigError(f"prompts[{index}]", texts[index], "a prompt with at least one token")
            # A tokenizer without an unknown token (the tiny model's 27-token one) drops characters it lacks;
            # a prompt the model would see only in part is refused rather than silently rewritten.
            lost = set(unicodedata.normalize("NFC", texts[index])) - set(self.tokenizer.decode(ids))
            if lost:
                raise ConfigError(
                    f"prompts[{index}]", texts[index], f"characters {self.spec}'s tokenizer can encode",
                    detail=f"it has no token for {''.join(sorted(lost))!r}",
                )
            if self.max_positions and len(ids) + sampling.max_new_tokens > self.max_positions:
                raise ConfigError(
                    f"prompts[{index}]", f"{len(ids)} tokens + max_new_tokens {sampling.max_new_tokens}",
                    f"at most {self.max_positions} positions ({self.spec})",
                )
        out: list[Generation] = []
        for chunk, start in enumerate(range(0, len(texts), sampling.batch_size)):
            stop = start + sampling.batch_size
            out.extend(self._generate_chunk(encoded[start:stop], sampling, chunk, ignore_eos))
        return out

    def _generate_chunk(
        self, encoded: list[list[int]], sampling: Sampling, chunk: int, ignore_eos: bool
    ) -> list[Generation]:
        import torch
        from transformers import GenerationConfig

        batch = self.tokenizer.pad({"input_ids": encoded}, padding=True, return_tensors="pt")
        input_ids = batch["input_ids"].to(self.model.device)
        attention_mask = batch["attention_mask"].to(self.model.device)
        # transformers fills every knob left unset from the model's own generation_config (Qwen3 ships do_sample,
        # temperature 0.6, top_k 20, top_p 0.95), so each knob that changes the result is set here: what the
        # caller's Sampling says, and neutral values for the rest.
        options: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": not sampling.greedy,
            "num_beams": 1,
            "num_return_sequences": 1,
            "repetition_penalty": 1.0,
            "no_repeat_ngram_size": 0,
            "eos_token_id": self.eos_ids,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if not sampling.greedy:
            options.update(
                temperature=float(sampling.temperature), top_p=float(sampling.top_p), top_k=sampling.top_k,
                typical_p=1.0,
            )
        if ignore_eos:
            options["min_new_tokens"] = sampling.max_new_tokens
        generation_config = GenerationConfig(**options)
        on_cpu = self.model.device.type == "cpu"
        devices = [] if on_cpu else [self.model.device]
        threads_before = torch.get_num_threads()
        if on_cpu and self.cpu_threads:
            torch.set_num_threads(self.cpu_threads)
        try:
            with torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(_mixed_seed(sampling.seed, chunk))
                sequences = self.model.generate(
                    input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config
                )
        finally:
            torch.set_num_threads(threads_before)
        completions = sequences[:, input_ids.shape[1] :].tolist()
        prompt_lengths = attention_mask.sum(dim=1).tolist()
        eos = set(self.eos_ids)
        results = []
        for ids, prompt_length in zip(completions, prompt_lengths):
            # Everything after the first stop token is padding from generate; the stop token itself counts.
            length = next((at + 1 for at, token in enumerate(ids) if token in eos), len(ids))
            text = self.tokenizer.decode(ids[:length], skip_special_tokens=True)
            results.append(Generation(text=text, prompt_tokens=int(prompt_length), completion_tokens=length))
        return results


def _accelerate_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("accelerate") is not None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


# ------------------------------------------------------------------------------------------------------------
# vllm: offline engine


def release_vllm(llm: Any) -> None:
    """Shut a ``vllm.LLM`` engine down and return its GPU memory (its own engine core process, the distributed
    state it set up, torch's cached blocks), so another engine or a trainer can take the GPU in this process."""
    import gc

    if llm is None:
        return
    engine = getattr(llm, "llm_engine", None)
    shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
    if callable(shutdown):
        shutdown()
    del llm, engine
    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
    except ImportError:
        pass
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class VLLMBackend:
    """An offline vLLM ``LLM`` engine in this process (imported only here; GPU machines).

    Raw prompts go through ``LLM.generate``, chats through ``LLM.chat`` with
    ``chat_template_kwargs={"enable_thinking": ...}``. Each request gets its own ``SamplingParams`` seeded
    ``seed + index``. ``engine_options`` go to ``vllm.LLM`` as they are (e.g. ``gpu_memory_utilization=0.5``).
    """

    def __init__(self, target: str, **engine_options: Any) -> None:
        self.spec = f"vllm:{target}"
        try:
            import vllm
        except ImportError as error:
            raise ConfigError(
                "backend", self.spec, f"vLLM installed: {VLLM_INSTALL_HINT} (or use hf:{target})",
                detail=_first_line(error),
            ) from None
        self._vllm = vllm
        options = {"model": target, "seed": 0, "dtype": "auto", **engine_options}
        self.llm = vllm.LLM(**options)

    def __repr__(self) -> str:
        return f"VLLMBackend(spec={self.spec!r})"

    def close(self) -> None:
        """Shut the engine down and give its GPU memory back (a run builds one per validated checkpoint)."""
        llm, self.llm = getattr(self, "llm", None), None
        release_vllm(llm)

    def _params(self, sampling: Sampling, index: int) -> Any:
        options: dict[str, Any] = {
            "n": 1,
            "max_tokens": sampling.max_new_tokens,
            "temperature": float(sampling.temperature),
            "top_p": float(sampling.top_p),
            "seed": (sampling.seed + index) % (2**63),
        }
        if sampling.top_k:
            options["top_k"] = sampling.top_k
        return self._vllm.SamplingParams(**options)

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        prompts = check_prompts(prompts)
        raw = [index for index, prompt in enumerate(prompts) if isinstance(prompt, str)]
        chats = [index for index, prompt in enumerate(prompts) if not isinstance(prompt, str)]
        results: list[Generation | None] = [None] * len(prompts)
        batches = []
        if raw:
            outputs = self.llm.generate(
                [prompts[i] for i in raw], [self._params(sampling, i) for i in raw], use_tqdm=False
            )
            batches.append((raw, outputs))
        if chats:
            outputs = self.llm.chat(
                [prompts[i] for i in chats],
                [self._params(sampling, i) for i in chats],
                use_tqdm=False,
                add_generation_prompt=True,
                chat_template_kwargs={"enable_thinking": sampling.enable_thinking},
            )
            batches.append((chats, outputs))
        for indices, outputs in batches:
            for index, output in zip(indices, outputs):
                completion = output.outputs[0]
                results[index] = Generation(
                    text=completion.text,
                    prompt_tokens=len(output.prompt_token_ids or []),
                    completion_tokens=len(completion.token_ids),
                )
        return [result for result in results if result is not None]


# ------------------------------------------------------------------------------------------------------------
# openai: any OpenAI-compatible HTTP endpoint, standard library only

ENV_BASE_URL = "MAPF_LAKE_OPENAI_BASE_URL"
ENV_API_KEY = "MAPF_LAKE_OPENAI_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
HIDDEN = "<hidden>"

# A 400/422 answer that names one of these request fields means the endpoint does not take it. The fix is applied
# to that request and to every later one of this backend: OpenAI's reasoning models want max_completion_tokens;
# only vLLM/SGLang know chat_template_kwargs and top_k; a few gateways refuse seed.
_FIELD_FIXES: dict[str, Callable[[dict], dict]] = {
    "max_tokens": lambda body: {
        **{k: v for k, v in body.items() if k != "max_tokens"}, "max_completion_tokens": body["max_tokens"]
    },
    "chat_template_kwargs": lambda body: {k: v for k, v in body.items() if k != "chat_template_kwargs"},
    "top_k": lambda body: {k: v for k, v in body.items() if k != "top_k"},
    "seed": lambda body: {k: v for k, v in body.items() if k != "seed"},
}
_RETRY_STATUSES = frozenset({408, 409, 425, 429})  # plus every 5xx
# Things shaped like credentials that a server may echo back (OpenAI-style sk-..., Google AIza..., bearer tokens).
_KEY_CHARACTERS = re.compile(r"[\x21-\x7e]+")  # what an Authorization header can carry unmangled
_KEY_SHAPES = re.compile(r"(Bearer\s+)\S+|\bsk-[-_A-Za-z0-9]{12,}|\bAIza[-_A-Za-z0-9]{20,}")


class _TransportError(Exception):
    """No HTTP answer at all: connection refused or reset, DNS failure, timeout."""


@dataclass(frozen=True)
class _Answer:
    status: int
    payload: Any  # parsed JSON, or the text when the body is not JSON
    retry_after_s: float | None


class OpenAIBackend:
    """Chat completions for chats, completions for raw text, over any OpenAI-compatible endpoint.

    Requests run ``concurrency`` at a time in a thread pool and keep their order in the result. A request that
    times out, cannot connect, or gets 408/409/425/429/5xx is retried up to ``max_retries`` times, waiting
    ``backoff_s * 2**attempt`` (with a little jitter, or the server's ``Retry-After``, at most 60 s). 401/403
    raise ConfigError naming the key variable. :meth:`check` (``GET {base}/models``, short timeout) runs before
    any generation: a missing key, an unreachable endpoint or an unknown model fails before work starts.

    The key lives only in this object's private attribute and the Authorization header; every message that
    leaves this class is scrubbed of it (and of anything shaped like a bearer token or an API key).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str,
        timeout_s: float = 120.0,
        check_timeout_s: float = 10.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        concurrency: int = 8,
    ) -> None:
        self.spec = f"openai:{model}"
        self._api_key = api_key
        self.model = model
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            allowed = f"an http:// or https:// URL such as {DEFAULT_BASE_URL}"
            raise ConfigError(ENV_BASE_URL, self._scrub(base_url), allowed)
        if not api_key:
            raise ConfigError(
                ENV_API_KEY, "<unset>",
                f"an API key in {ENV_API_KEY} (or {ENV_API_KEY_FALLBACK}); for a server that needs none, any value",
            )
        if not isinstance(api_key, str) or not _KEY_CHARACTERS.fullmatch(api_key):
            # never the value itself: say what is wrong with it (an HTTP header would print the whole key)
            flaw = ("a line break" if any(c in api_key for c in "\r\n") else "a space" if any(c.isspace() for c in api_key)
                    else "a character outside printable ASCII") if isinstance(api_key, str) else type(api_key).__name__
            raise ConfigError(ENV_API_KEY, f"{HIDDEN} (a key that contains {flaw})",
                              "printable ASCII without spaces or line breaks (check the variable for a pasted "
                              "newline)")
        for name, value, low in (("timeout_s", timeout_s, 0), ("check_timeout_s", check_timeout_s, 0),
                                 ("backoff_s", backoff_s, -1e-12)):
            if not isinstance(value, (int, float)) or value <= low:
                raise ConfigError(f"openai.{name}", value, "a positive number of seconds")
        for name, value, low in (("max_retries", max_retries, 0), ("concurrency", concurrency, 1)):
            if not isinstance(value, int) or value < low:
                raise ConfigError(f"openai.{name}", value, f"an integer >= {low}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.check_timeout_s = float(check_timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.concurrency = concurrency
        self._checked = False
        self._fixes: list[str] = []  # field names of _FIELD_FIXES this endpoint needed, in the order learnt
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, model: str) -> "OpenAIBackend":
        """The backend for ``model`` configured from the environment (see the module docstring)."""
        base_url = os.environ.get(ENV_BASE_URL, "").strip() or DEFAULT_BASE_URL
        api_key = os.environ.get(ENV_API_KEY, "").strip() or os.environ.get(ENV_API_KEY_FALLBACK, "").strip()
        return cls(model, base_url=base_url, api_key=api_key)

    def __repr__(self) -> str:
        return f"OpenAIBackend(spec={self.spec!r}, base_url={self._scrub(self.base_url)!r}, api_key={HIDDEN!r})"

    def __reduce__(self) -> Any:  # a pickled backend would carry the key into a file: refuse
        raise TypeError("OpenAIBackend holds an API key and cannot be pickled; make it again from the environment")

    def _scrub(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, HIDDEN)
        return _KEY_SHAPES.sub(lambda match: (match.group(1) or "") + HIDDEN, text)

    # --- HTTP ------------------------------------------------------------------------------------------------

    def _send(self, method: str, path: str, body: dict | None, timeout_s: float) -> _Answer:
        request = urllib.request.Request(
            self.base_url + path,
            data=None if body is None else json.dumps(body).encode("utf-8"),
            method=method,
            headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": "mapf-lake",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return _Answer(response.status, _parse_body(response.read()), None)
        except urllib.error.HTTPError as error:
            retry_after = _retry_after_s(error.headers.get("Retry-After") if error.headers else None)
            try:
                raw = error.read()
            except OSError:
                raw = b""
            finally:
                error.close()
            return _Answer(error.code, _parse_body(raw), retry_after)
        except (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise _TransportError(f"{type(reason).__name__}: {reason}") from None

    def _call(self, method: str, path: str, body: dict | None, timeout_s: float, max_retries: int) -> _Answer:
        """One request with retries; returns the last answer (any status) or raises _TransportError."""
        attempt = 0
        while True:
            try:
                answer = self._send(method, path, body, timeout_s)
            except _TransportError:
                if attempt >= max_retries:
                    raise
                wait_s = None
            else:
                if not (answer.status in _RETRY_STATUSES or answer.status >= 500) or attempt >= max_retries:
                    return answer
                wait_s = answer.retry_after_s
            if wait_s is None:
                wait_s = self.backoff_s * 2**attempt * (1 + 0.25 * random.random())
            time.sleep(min(wait_s, 60.0))
            attempt += 1

    def check(self) -> None:
        """Fail now, with a clear ConfigError, if the endpoint is unreachable, refuses the key, or lacks the model."""
        url = self._scrub(self.base_url)
        try:
            answer = self._call("GET", "/models", None, self.check_timeout_s, max_retries=1)
        except _TransportError as error:
            raise ConfigError(
                ENV_BASE_URL, url,
                "a reachable OpenAI-compatible endpoint (e.g. https://api.openai.com/v1, http://HOST:8000/v1)",
                detail=self._scrub(str(error)),
            ) from None
        if answer.status in (401, 403):
            raise self._key_refused(answer, "GET /models")
        if answer.status == 404:
            raise ConfigError(ENV_BASE_URL, url, "the API root that serves GET /models (it usually ends in /v1)")
        if not 200 <= answer.status < 300:
            raise ConfigError(
                ENV_BASE_URL, url, "an endpoint that answers GET /models",
                detail=self._scrub(f"HTTP {answer.status}: {_error_message(answer.payload)}"),
            )
        data = answer.payload.get("data") if isinstance(answer.payload, dict) else None
        listed = [str(item["id"]) for item in data or [] if isinstance(item, dict) and "id" in item]
        # Some gateways list ids with a prefix ("models/gemini-2.0-flash"); accept a match after the last "/".
        if listed and self.model not in listed and not any(name.endswith("/" + self.model) for name in listed):
            shown = ", ".join(sorted(listed)[:8]) + (", ..." if len(listed) > 8 else "")
            raise ConfigError("backend", self.spec, f"a model this endpoint serves: {shown}")
        self._checked = True

    def _key_refused(self, answer: _Answer, what: str) -> ConfigError:
        return ConfigError(
            ENV_API_KEY, HIDDEN, f"a key that {self._scrub(self.base_url)} accepts",
            detail=self._scrub(f"HTTP {answer.status} on {what}: {_error_message(answer.payload)}"),
        )

    # --- generation ------------------------------------------------------------------------------------------

    def _request_body(self, prompt: Prompt, sampling: Sampling, index: int) -> tuple[str, dict]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": sampling.max_new_tokens,
            "temperature": float(sampling.temperature),
            "top_p": float(sampling.top_p),
            "seed": (sampling.seed + index) % (2**63),
            "n": 1,
        }
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if isinstance(prompt, str):
            return "/completions", {**body, "prompt": prompt}
        body = {**body, "messages": prompt, "chat_template_kwargs": {"enable_thinking": sampling.enable_thinking}}
        return "/chat/completions", body

    def _one(self, prompt: Prompt, sampling: Sampling, index: int) -> Generation:
        path, body = self._request_body(prompt, sampling, index)
        with self._lock:
            learnt = list(self._fixes)
        for field in learnt:
            if field in body:
                body = _FIELD_FIXES[field](body)
        tried: set[str] = set()
        while True:
            try:
                answer = self._call("POST", path, body, self.timeout_s, self.max_retries)
            except _TransportError as error:
                raise BackendError(
                    self._scrub(f"{self.spec}: POST {self.base_url}{path} failed after {self.max_retries + 1} "
                                f"attempts: {error}")
                ) from None
            if 200 <= answer.status < 300:
                return self._parse_generation(answer.payload, path)
            if answer.status in (401, 403):
                raise self._key_refused(answer, f"POST {path}")
            message = _error_message(answer.payload)
            field = _refused_field(answer.status, message, body, tried)
            if field is None:
                raise BackendError(
                    self._scrub(f"{self.spec}: HTTP {answer.status} on POST {self.base_url}{path}: {message}")
                )
            tried.add(field)
            body = _FIELD_FIXES[field](body)
            with self._lock:
                if field not in self._fixes:
                    self._fixes.append(field)

    def _parse_generation(self, payload: Any, path: str) -> Generation:
        try:
            choice = payload["choices"][0]
            if path == "/completions":
                text = choice.get("text") or ""
            else:
                message = choice["message"]
                text = message.get("content") or ""
                # Servers with a reasoning parser return the thinking apart; put it back in Qwen3's tags so the
                # completion reads the same as from the other backends.
                reasoning = message.get("reasoning_content") or message.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    text = f"<think>\n{reasoning}\n</think>\n\n{text}"
            usage = payload.get("usage") or {}
            return Generation(
                text=str(text),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            shown = self._scrub(json.dumps(payload)[:300] if not isinstance(payload, str) else payload[:300])
            raise BackendError(f"{self.spec}: unexpected answer shape from {path}: {shown}") from None

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        """See the module contract; ``completion_tokens``/``prompt_tokens`` are the server's ``usage`` (0 if none)."""
        prompts = check_prompts(prompts)
        if not self._checked:
            self.check()
        if not prompts:
            return []
        workers = min(self.concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mapf-lake-openai") as pool:
            futures = [pool.submit(self._one, prompt, sampling, index) for index, prompt in enumerate(prompts)]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:  # stop queued requests; running ones finish on their own
                    future.cancel()
                raise


def _parse_body(raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _error_message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:500]
        if isinstance(error, list) and error:  # some gateways wrap the error object in a list
            return _error_message(error[0])
        return str(error)[:500]
    return str(payload)[:500]


def _refused_field(status: int, message: str, body: dict, tried: set[str]) -> str | None:
    """The request field a 400/422 ``message`` says the endpoint does not take, if we know a fix for it."""
    if status not in (400, 422):
        return None
    for field in _FIELD_FIXES:
        if field in body and field not in tried and re.search(rf"(?<![\w]){re.escape(field)}(?![\w])", message):
            return field
    return None


# ------------------------------------------------------------------------------------------------------------
# the registry

BACKENDS: dict[str, Callable[[str], Backend]] = {
    "hf": HFBackend,
    "vllm": VLLMBackend,
    "openai": OpenAIBackend.from_env,
}
SPEC_FORMS = "hf:PATH_OR_NAME, vllm:PATH_OR_NAME or openai:MODEL"


def parse_spec(spec: str) -> tuple[str, str]:
    """``"KIND:TARGET"`` -> ``(kind, target)``; ConfigError naming the value and the allowed forms otherwise."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError("backend", spec, SPEC_FORMS)
    kind, target = spec.split(":", 1)  # split once: a Windows path keeps its drive colon
    if kind not in BACKENDS or not target.strip():
        raise ConfigError("backend", spec, SPEC_FORMS)
    return kind, target.strip()


def make_backend(spec: str, check: bool = True) -> Backend:
    """The backend for ``spec`` (see the module docstring), ready to use.

    With ``check`` (the default) a backend that can verify its endpoint does so now (``openai``: ``GET /models``),
    so a missing key or a dead endpoint fails here, before any work; ``hf`` and ``vllm`` load their model here.
    """
    kind, target = parse_spec(spec)
    backend = BACKENDS[kind](target)
    if check and callable(getattr(backend, "check", None)):
        backend.check()
    return backend
