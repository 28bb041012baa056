"""Model backends: one interface, looked up by name in :data:`BACKENDS`, made from a spec string.

A spec is ``KIND:TARGET``:

* ``hf:PATH_OR_NAME``: transformers on this machine (CPU, or a GPU when there is one); ``hf:@smollm2`` names a
  pretrained model of :data:`policy.pretrained.PRETRAINED`, made offline from its registry wheel on first use.
  ``PATH_OR_NAME`` is a
  model folder (e.g. one from :func:`policy.models.init_tiny_model`) or a hub name already in the local cache;
  a hub name not cached is downloaded only when the hub is not switched off (``HF_HUB_OFFLINE=1``).
* ``vllm:PATH_OR_NAME``: an offline vLLM engine in this process (GPU machines; ``pip install
  'mapf-frozenlake[vllm]'``).
* ``openai:MODEL``: any OpenAI-compatible HTTP endpoint (OpenAI, ``vllm serve``, ``trl vllm-serve``'s OpenAI
  front, Gemini's compatibility API, ...). Base URL from ``MAPF_LAKE_OPENAI_BASE_URL`` (default
  ``https://api.openai.com/v1``), key from ``MAPF_LAKE_OPENAI_API_KEY`` or else ``OPENAI_API_KEY``.

Each kind lives in its own module (``policy.backend_hf``, ``policy.backend_vllm``, ``policy.backend_openai``);
what they share (:class:`Sampling`, :class:`Generation`, the :class:`Backend` protocol and the contract of its
``generate``) is in ``policy.backend_base``. This module is the registry and re-exports those public names.
"""

from __future__ import annotations

from typing import Callable

from policy.backend_base import Backend, BackendError, Generation, Prompt, Sampling, check_prompts
from policy.backend_hf import SMALL_MODEL_PARAMETERS, HFBackend, default_cpu_threads, set_cpu_threads
from policy.backend_openai import (
    DEFAULT_BASE_URL,
    ENV_API_KEY,
    ENV_API_KEY_FALLBACK,
    ENV_BASE_URL,
    OpenAIBackend,
)
from policy.backend_vllm import VLLM_INSTALL_HINT, VLLMBackend, release_vllm
from simulator.errors import ConfigError
from simulator.secrets import HIDDEN

__all__ = [
    "BACKENDS",
    "DEFAULT_BASE_URL",
    "ENV_API_KEY",
    "ENV_API_KEY_FALLBACK",
    "ENV_BASE_URL",
    "HIDDEN",
    "SMALL_MODEL_PARAMETERS",
    "SPEC_FORMS",
    "VLLM_INSTALL_HINT",
    "Backend",
    "BackendError",
    "Generation",
    "HFBackend",
    "OpenAIBackend",
    "Prompt",
    "Sampling",
    "VLLMBackend",
    "check_backend_config",
    "check_prompts",
    "default_cpu_threads",
    "make_backend",
    "parse_spec",
    "release_vllm",
    "set_cpu_threads",
]

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


def check_backend_config(spec: str) -> None:
    """The checks of ``spec`` that need neither a model load nor the network: its form, and for ``openai`` the
    key and base URL in the environment (a missing key raises ConfigError naming both variables). A command that
    would otherwise only find out when it first calls the backend (and then record a fallback) calls this first."""
    kind, target = parse_spec(spec)
    if kind == "openai":
        BACKENDS[kind](target)  # from the environment; no request is sent


def make_backend(spec: str, check: bool = True) -> Backend:
    """The backend for ``spec`` (see the module docstring), ready to use.

    With ``check`` (the default) a backend that can verify its endpoint does so now (``openai``: ``GET /models``),
    so a missing key or a dead endpoint fails here, before any work; ``hf`` and ``vllm`` load their model here.
    """
    kind, target = parse_spec(spec)
    if kind in ("hf", "vllm"):
        from policy.pretrained import resolve_target

        target = resolve_target(target)  # hf:@smollm2: the pretrained model's folder, made on first use
    backend = BACKENDS[kind](target)
    endpoint_check = getattr(backend, "check", None)  # not part of the Backend protocol: only some kinds have one
    if check and callable(endpoint_check):
        endpoint_check()
    return backend
