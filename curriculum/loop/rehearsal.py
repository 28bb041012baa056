"""A CPU rehearsal of a preset's exact path: ``mapf-lake train --preset qwen3-4b --rehearse``.

The rehearsal keeps everything a preset decides about the path (prompt style, thinking mode, chat template,
trainer and its knobs, LoRA or not, the engineer and its options, the evaluation decoding, the stage configs'
sizes and agents) and shrinks only what costs time:

* the model: a preset that trains a hub model (``hf:...``) gets a miniature random Qwen3 on the real Qwen3
  tokenizer (~10 M parameters, nearly all of them its embeddings), built offline with the real chat
  template and Qwen3-4B's 40,960-token window, so the engineer's prompt goes in at its real length; an embedded model stays as it is;
* the budgets: 2 stages of 2 steps of 1 prompt x 2 completions of at most 24 tokens, 8 validation instances,
  a warm start (where the preset has one) of 2 steps, engineer answers of at most 48 tokens;
* vLLM: used only where it is installed and a GPU is there; otherwise transformers generates (said in the log);
* the final evaluation: ``paper-quick`` (10 instances of each of the paper's 21 cells).

The random model's answers are noise, so its plans fail and its engineer answers are rejected (the decision
records the fallback); what the rehearsal proves is that every step of the loop runs and writes its records.
"""

from __future__ import annotations

from pathlib import Path

from curriculum.config import RunConfig
from simulator.config import StageConfig

REHEARSAL_SUFFIX = "-rehearsal"
STAGES = 2
STEPS = 2
PROMPTS = 1
GENERATIONS = 2
TOKENS = 24
VALIDATION = 8
ENGINEER_TOKENS = 48
SUITE = "paper-quick"
# The miniature's shape: Qwen3-4B's window, and narrow, because with the real 151,936-token vocabulary the LM head
# is almost all of a step's cost on a CPU (TRL's chunked log-prob head runs in torch there).
MODEL_SHAPE = {"max_position_embeddings": 40_960, "hidden_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128}


def _vllm_usable() -> bool:
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def _small_stage(config: StageConfig | None, samples: int) -> dict:
    return config.to_dict() | {"samples": samples} if config else {}


def rehearsal_model(folder: Path) -> Path:
    """The miniature random Qwen3 of a rehearsal under ``folder`` (built once; a half-built one is rebuilt)."""
    import shutil

    from curriculum.training.common import quiet_libraries
    from policy.models import init_qwen3_tokenizer, init_tiny_qwen3
    from simulator.atomic import atomic_folder

    model = folder / "rehearsal-model"
    if (model / "config.json").is_file() and any(model.glob("*.safetensors")):
        return model
    shutil.rmtree(model, ignore_errors=True)
    quiet_libraries()
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_folder(model) as building:
        tokenizer = Path(building) / "tokenizer-source"
        init_qwen3_tokenizer(tokenizer)
        init_tiny_qwen3(building, tokenizer, seed=0, **MODEL_SHAPE)
        shutil.rmtree(tokenizer)
    return model


def rehearsal_config(config: RunConfig, log=print) -> RunConfig:
    """``config`` with the rehearsal's model and budgets (module docstring); everything else kept."""
    changes: dict = {
        "name": config.name if config.name.endswith(REHEARSAL_SUFFIX) else config.name + REHEARSAL_SUFFIX,
        "stages": STAGES,
        "initial_config": _small_stage(config.initial_config, 8 * STEPS * PROMPTS),
        "training.steps": STEPS,
        "training.prompts_per_step": PROMPTS,
        "training.generations": GENERATIONS,
        "training.max_completion_length": min(config.training.max_completion_length, TOKENS),
        "training.rft_rounds": 1,
        "training.rft_batch_size": 4,
        "validation.samples": VALIDATION,
        "validation.max_new_tokens": min(config.validation.max_new_tokens, TOKENS),
        "validation.sampled_k": min(config.validation.sampled_k, 1),
        "evaluation_suite": SUITE,
    }
    if config.warm_start.enabled:
        changes.update({"warm_start.steps": STEPS, "warm_start.samples": 16, "warm_start.batch_size": 8,
                        "warm_start.config": _small_stage(config.warm_start.config, 16)})
    if config.engineer.spec.startswith("llm:"):
        changes["engineer.options"] = {**config.engineer.options, "max_new_tokens": ENGINEER_TOKENS,
                                       "timeout_s": 600.0}
    if config.training.use_vllm and not _vllm_usable():
        log("rehearsal: vLLM or a GPU is missing here, so transformers generates instead (training.use_vllm "
            "off; validation.backend hf)")
        changes.update({"training.use_vllm": False, "validation.backend": "hf"})
    if ":" in config.model:
        model = rehearsal_model(Path(config.output_dir) / changes["name"])
        log(f"rehearsal: {config.model} replaced by a miniature random Qwen3 on the real tokenizer ({model})")
        changes["model"] = f"hf:{model}"
    return config.with_overrides(**changes)


__all__ = ["rehearsal_config", "rehearsal_model"]
