"""``vllm:PATH_OR_NAME``: an offline vLLM engine in this process (GPU machines; ``pip install
'mapf-frozenlake[vllm]'``), and :func:`release_vllm`, which gives an engine's GPU memory back.

Answers held to a JSON Schema (:meth:`VLLMBackend.generate_json`) use vLLM's own structured outputs: each
request's ``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema, disable_any_whitespace=True))``
(vLLM 0.12 and later; the ``guided_decoding`` / ``GuidedDecodingParams`` names before it were removed in 0.12).
vLLM picks the grammar library itself: its default ``auto`` backend is xgrammar, with guidance (llguidance, the
library ``hf:`` uses) for schemas xgrammar cannot compile. The engineer's answer schema is one of those: its
numbers carry ``multipleOf`` (:data:`engineer.answer_schema.NUMBER_STEP`), which vLLM's own check of xgrammar's
JSON Schema features lists as unsupported, so ``auto`` holds engineer answers with llguidance on both backends (read
from vLLM's source, not yet run on a GPU here); an engine told to use xgrammar alone refuses them rather than
drop the bound.
"""

from __future__ import annotations

from typing import Any

from policy.backend_base import Generation, Prompt, Sampling, check_prompts, first_line
from simulator.errors import ConfigError

VLLM_INSTALL_HINT = "pip install 'mapf-frozenlake[vllm]' on a GPU machine"


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


def sampling_params(vllm: Any, sampling: Sampling, index: int, schema: dict[str, Any] | None = None) -> Any:
    """The ``vllm.SamplingParams`` of request ``index`` of a call (seeded ``seed + index``); with ``schema``, held
    to that JSON Schema by structured outputs without free whitespace (see the module docstring)."""
    options: dict[str, Any] = {
        "n": 1,
        "max_tokens": sampling.max_new_tokens,
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
        "seed": (sampling.seed + index) % (2**63),
    }
    if sampling.top_k:
        options["top_k"] = sampling.top_k
    if schema is not None:
        from vllm.sampling_params import StructuredOutputsParams

        options["structured_outputs"] = StructuredOutputsParams(json=schema, disable_any_whitespace=True)
    return vllm.SamplingParams(**options)


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
                detail=first_line(error),
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

    def _params(self, sampling: Sampling, index: int, schema: dict[str, Any] | None = None) -> Any:
        return sampling_params(self._vllm, sampling, index, schema)

    def json_schema_unavailable(self) -> str | None:
        """Why :meth:`generate_json` cannot run with this vLLM (one without ``StructuredOutputsParams``), or None."""
        import vllm.sampling_params

        if hasattr(vllm.sampling_params, "StructuredOutputsParams"):
            return None
        return f"vLLM {getattr(self._vllm, '__version__', '?')} has no StructuredOutputsParams: {VLLM_INSTALL_HINT}"

    def generate_json(self, prompts: list[Prompt], sampling: Sampling, schema: dict[str, Any]) -> list[Generation]:
        """Like :meth:`generate`, each request held to the JSON Schema ``schema`` by vLLM's structured outputs
        (module docstring)."""
        why = self.json_schema_unavailable()
        if why is not None:
            raise ConfigError("backend", self.spec, "a backend that can hold generation to a JSON schema", detail=why)
        return self.generate(prompts, sampling, schema)

    def generate(self, prompts: list[Prompt], sampling: Sampling,
                 schema: dict[str, Any] | None = None) -> list[Generation]:
        """See :mod:`policy.backend_base`; ``schema``: hold each answer to it (:meth:`generate_json`)."""
        prompts = check_prompts(prompts)
        raw = [index for index, prompt in enumerate(prompts) if isinstance(prompt, str)]
        chats = [index for index, prompt in enumerate(prompts) if not isinstance(prompt, str)]
        results: list[Generation | None] = [None] * len(prompts)
        batches = []
        if raw:
            outputs = self.llm.generate(
                [prompts[i] for i in raw], [self._params(sampling, i, schema) for i in raw], use_tqdm=False
            )
            batches.append((raw, outputs))
        if chats:
            outputs = self.llm.chat(
                [prompts[i] for i in chats],
                [self._params(sampling, i, schema) for i in chats],
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
