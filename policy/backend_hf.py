"""``hf:PATH_OR_NAME``: transformers on this machine (CPU, or a GPU when there is one).

``PATH_OR_NAME`` is a model folder (e.g. one from :func:`policy.models.init_tiny_model`) or a hub name already in
the local cache; a hub name not cached is downloaded only when the hub is not switched off
(``HF_HUB_OFFLINE=1``). The CPU-thread policy (:func:`default_cpu_threads`) is shared with the trainers.

Answers held to a JSON Schema (:meth:`HFBackend.generate_json`) use llguidance (:data:`GRAMMAR_PACKAGE`) through
:class:`GrammarProcessor`, a transformers ``LogitsProcessor``: the schema is compiled once per schema, without free
whitespace (with it a 135M model wrote blank lines until its token limit), and each step masks the tokens the
grammar does not allow before temperature and top-p. Measured against xgrammar on SmolLM2-135M with the real engineer
prompt (``docs/results/constrained-answers``), both held 3/3 answers to the schema at under 0.6 ms per token (a
decoding step of the model is ~100 ms on a CPU). llguidance was chosen for what it costs to install: a 3 MB wheel
with no dependencies, where xgrammar requires triton on Linux x86-64 (~1 GB installed, unused on a CPU). vLLM holds
its answers with its own structured-output backends (xgrammar by default, llguidance as ``guidance``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import unicodedata
from collections import OrderedDict
from pathlib import Path
from typing import Any

from policy.backend_base import Generation, Prompt, Sampling, check_prompts, first_line, generation_stopped
from simulator.errors import ConfigError

SMALL_MODEL_PARAMETERS = 100_000_000  # below this a model runs on one CPU thread by default (see default_cpu_threads)
GRAMMAR_PACKAGE = "llguidance"
GRAMMAR_INSTALL = "pip install llguidance (or pip install 'mapf-frozenlake[train]', which has it)"
JSON_CHARACTERS = '{}[]":,.-0123456789abcdefghijklmnopqrstuvwxyz_'
"""What an answer document needs a tokenizer to write: brackets, quotes, digits, keys, true/false/null."""
_GRAMMAR_CACHE_SIZE = 8  # compiled schemas kept per backend (an engineer's schema changes with the config's sides)


class GrammarProcessor:
    """A transformers ``LogitsProcessor`` holding one ``generate`` call to an llguidance grammar: one matcher per
    row, fed the row's last token each step; the tokens its grammar does not allow get ``-inf``. A row whose
    document is complete allows only its stop token (so the model cannot go on writing past the document)."""

    def __init__(self, tokenizer: Any, grammar: str) -> None:
        self.tokenizer, self.grammar = tokenizer, grammar
        self.matchers: list[Any] | None = None
        self.mask: Any = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import llguidance
        import llguidance.numpy as llnp
        import torch

        if self.matchers is None:
            self.matchers = [llguidance.LLMatcher(self.tokenizer, self.grammar) for _ in range(input_ids.shape[0])]
            self.mask = llnp.allocate_token_bitmask(input_ids.shape[0], scores.shape[1])
        else:
            for row, matcher in enumerate(self.matchers):
                if not matcher.is_stopped() and not matcher.is_error():
                    matcher.consume_token(int(input_ids[row, -1]))
        for row, matcher in enumerate(self.matchers):
            llnp.fill_next_token_bitmask(matcher, self.mask, row)
        view = scores.detach().float().cpu().numpy()
        llnp.apply_token_bitmask_inplace(view, self.mask)
        return torch.from_numpy(view).to(device=scores.device, dtype=scores.dtype)


def default_cpu_threads(model: Any, cpu_threads: int | None) -> int | None:
    """Torch intra-op threads for ``model`` on a CPU: ``cpu_threads`` when given; else 1 for models under
    :data:`SMALL_MODEL_PARAMETERS` and None (torch's own setting) for larger ones.

    Measured with the tiny model (batch 32 x 64 tokens, 2-core machine): two threads gain about 1.3x while the
    other core is idle, but lose 6-20x while another process keeps it busy (the intra-op workers wait for a core
    every layer), so one thread is the predictable default; a run that owns its machine can pass ``cpu_threads``
    (training on a 2-core machine gains ~1.4x from two: ``mapf-lake bench grpo`` figures in docs/results/limits.md).
    """
    if cpu_threads is None and sum(parameter.numel() for parameter in model.parameters()) < SMALL_MODEL_PARAMETERS:
        return 1
    return cpu_threads


def set_cpu_threads(model: Any, cpu_threads: int | None) -> None:
    """Set torch's intra-op threads for training ``model`` on a CPU (:func:`default_cpu_threads`); on a machine
    with a GPU, leave them as they are."""
    import torch

    if torch.cuda.is_available():
        return
    threads = default_cpu_threads(model, cpu_threads)
    if threads is not None:
        torch.set_num_threads(threads)


def _mixed_seed(seed: int, chunk: int) -> int:
    """A torch seed for chunk ``chunk`` of a call seeded ``seed`` (distinct pairs give unrelated streams)."""
    return (seed * 0x9E3779B97F4A7C15 + chunk * 0xBF58476D1CE4E5B9 + 1) % (2**63)


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

    ``cpu_threads``: torch intra-op threads while generating on a CPU (restored afterwards); the default is
    :func:`default_cpu_threads`'s (1 for models under :data:`SMALL_MODEL_PARAMETERS`, torch's own otherwise).
    """

    SMALL_MODEL_PARAMETERS = SMALL_MODEL_PARAMETERS

    def __init__(self, target: str, device: str | None = None, cpu_threads: int | None = None) -> None:
        import torch

        self.spec = f"hf:{target}"
        if cpu_threads is not None and (not isinstance(cpu_threads, int) or cpu_threads < 1):
            raise ConfigError("hf.cpu_threads", cpu_threads, "an integer >= 1, or None for the default")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._ready(*self._load(target), cpu_threads)

    @classmethod
    def loaded(cls, model: Any, tokenizer: Any, name: str = "trainer-model",
               cpu_threads: int | None = None) -> "HFBackend":
        """A backend over a model already in memory (a trainer's own, mid-training): nothing is loaded or copied
        but the tokenizer (its padding side is set for generation here, and a trainer may want its own). The
        caller puts the model in eval mode while it generates (``model.eval()``) and back afterwards."""
        import copy

        if cpu_threads is not None and (not isinstance(cpu_threads, int) or cpu_threads < 1):
            raise ConfigError("hf.cpu_threads", cpu_threads, "an integer >= 1, or None for the default")
        backend = cls.__new__(cls)
        backend.spec = f"hf:{name}"
        backend.device = str(model.device)
        backend._ready(copy.deepcopy(tokenizer), model, cpu_threads)
        return backend

    def _ready(self, tokenizer: Any, model: Any, cpu_threads: int | None) -> None:
        self.tokenizer, self.model = tokenizer, model
        self.cpu_threads = default_cpu_threads(self.model, cpu_threads)
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
        self._grammar_lock = threading.Lock()
        self._grammar_compiler: Any = None
        self._grammars: OrderedDict[str, Any] = OrderedDict()

    def __repr__(self) -> str:
        return f"HFBackend(spec={self.spec!r}, device={self.device!r})"

    def _load(self, target: str) -> tuple[Any, Any]:
        import torch
        from transformers import AutoTokenizer

        from policy.models import load_causal_lm

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
            model = load_causal_lm(source, local_files_only=offline, **model_kwargs)
            return tokenizer, model

        try:
            tokenizer, model = load(offline=True)
        except ConfigError:  # the folder's weights refused by load_causal_lm: its own line names the folder
            raise
        except (OSError, ValueError, KeyError) as offline_error:
            if local.exists() or _hub_downloads_off():
                raise ConfigError(
                    "backend", self.spec, "a folder (or cached hub model) with a causal LM and its tokenizer",
                    detail=first_line(offline_error),
                ) from None
            try:  # a hub name not cached yet: the one place a download may happen, by design (Qwen/Qwen3-4B)
                tokenizer, model = load(offline=False)
            except (OSError, ValueError, KeyError) as online_error:
                raise ConfigError(
                    "backend", self.spec, "a hub model this machine can download, or a local folder",
                    detail=first_line(online_error),
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
        text: str = self.tokenizer.apply_chat_template(  # tokenize=False: the rendered text
            prompt, tokenize=False, add_generation_prompt=True, enable_thinking=sampling.enable_thinking
        )
        return text

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        return self._generate(prompts, sampling, ignore_eos=False)

    def json_schema_unavailable(self) -> str | None:
        """Why :meth:`generate_json` cannot run here (the grammar library missing, a tokenizer that cannot write
        JSON, such as the tiny model's 27-token one), or None."""
        if importlib.util.find_spec(GRAMMAR_PACKAGE) is None:
            return f"the grammar library {GRAMMAR_PACKAGE} is not installed: {GRAMMAR_INSTALL}"
        ids = self.tokenizer(JSON_CHARACTERS, add_special_tokens=False)["input_ids"]
        lost = set(JSON_CHARACTERS) - set(self.tokenizer.decode(ids))
        if lost:
            return f"{self.spec}'s tokenizer cannot write JSON: it has no token for {''.join(sorted(lost))!r}"
        return None

    def generate_json(self, prompts: list[Prompt], sampling: Sampling, schema: dict[str, Any]) -> list[Generation]:
        """Like :meth:`generate`, each completion held to the JSON Schema ``schema`` (module docstring): one that
        ends before ``max_new_tokens`` is a document the schema admits. ConfigError when
        :meth:`json_schema_unavailable` says why it cannot, or the schema does not compile."""
        why = self.json_schema_unavailable()
        if why is not None:
            raise ConfigError("backend", self.spec, "a backend that can hold generation to a JSON schema", detail=why)
        return self._generate(prompts, sampling, ignore_eos=False, grammar=self._compiled(schema))

    def _grammar_processor(self, grammar: Any) -> Any:
        """A fresh transformers ``LogitsProcessor`` that holds one ``generate`` call to ``grammar``."""
        return GrammarProcessor(self._grammar_tokenizer(), grammar)

    def _grammar_tokenizer(self) -> Any:
        """llguidance's view of this tokenizer (made once): the model's output size and its stop tokens."""
        with self._grammar_lock:
            if self._grammar_compiler is None:
                import llguidance.hf

                output = self.model.get_output_embeddings()
                vocab_size = int(output.weight.shape[0]) if output is not None else len(self.tokenizer)
                self._grammar_compiler = llguidance.hf.from_tokenizer(self.tokenizer, n_vocab=vocab_size,
                                                                      eos_token=self.eos_ids[0])
            return self._grammar_compiler

    def _compiled(self, schema: dict[str, Any]) -> Any:
        """llguidance's grammar of ``schema`` (cached), with no free whitespace; checked against this tokenizer."""
        import llguidance

        key = json.dumps(schema)  # keys in the schema's order: the grammar writes properties in that order
        with self._grammar_lock:
            if key in self._grammars:
                self._grammars.move_to_end(key)
                return self._grammars[key]
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(key, defaults={"whitespace_flexible": False})
            problem = llguidance.LLMatcher.validate_grammar(grammar, self._grammar_tokenizer())  # "" when fine
        except Exception as error:  # llguidance's own error types; the schema is the caller's input
            raise ConfigError("schema", schema, "a JSON Schema llguidance can compile",
                              detail=first_line(error)) from None
        if problem:
            raise ConfigError("schema", schema, "a JSON Schema llguidance can compile", detail=problem.splitlines()[0][:300])
        with self._grammar_lock:
            self._grammars[key] = grammar
            while len(self._grammars) > _GRAMMAR_CACHE_SIZE:
                self._grammars.popitem(last=False)
        return grammar

    def generate_fixed_length(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        """Like :meth:`generate` but never stops early: every completion is ``max_new_tokens`` long (benchmarks)."""
        return self._generate(prompts, sampling, ignore_eos=True)

    def _generate(self, prompts: list[Prompt], sampling: Sampling, ignore_eos: bool,
                  grammar: Any = None) -> list[Generation]:
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
            out.extend(self._generate_chunk(encoded[start:stop], sampling, chunk, ignore_eos, grammar))
        return out

    def _generate_chunk(
        self, encoded: list[list[int]], sampling: Sampling, chunk: int, ignore_eos: bool, grammar: Any = None
    ) -> list[Generation]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

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
        processors = LogitsProcessorList()
        if grammar is not None:  # one per generate call: its matchers keep the state of this call's rows
            processors.append(self._grammar_processor(grammar))
        on_cpu = self.model.device.type == "cpu"
        devices = [] if on_cpu else [self.model.device]
        threads_before = torch.get_num_threads()
        if on_cpu and self.cpu_threads:
            torch.set_num_threads(self.cpu_threads)
        try:
            with torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(_mixed_seed(sampling.seed, chunk))
                sequences = self.model.generate(
                    input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config,
                    logits_processor=processors, stopping_criteria=StoppingCriteriaList([_stop_when_asked]),
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


def _stop_when_asked(input_ids: Any, scores: Any, **kwargs: Any) -> Any:
    """A stopping criterion: every row stops once the calling thread's generation was asked to stop
    (:func:`policy.backend_base.stop_generation_in`)."""
    import torch

    return torch.full((input_ids.shape[0],), generation_stopped(), dtype=torch.bool, device=input_ids.device)


def _accelerate_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("accelerate") is not None
