"""What the paper's setting costs on one GPU: ``mapf-lake bench gpu`` prints one JSON report.

The model is Qwen3-4B's architecture with random weights on the real Qwen3 tokenizer, both built locally
(``policy.models.init_qwen3_tokenizer`` + ``init_random_qwen3(..., qwen3_4b_config(), device="cuda")``, no
download; ``--model DIR`` times another folder instead, e.g. a downloaded ``Qwen/Qwen3-4B``). A random model
rarely stops by itself, so its completions run to their token limit: the figures are those of full-length
answers. The parts, in the order they run (``--parts`` picks some; :data:`PARTS`):

``grpo-full`` / ``grpo-lora``
    ``--steps`` GRPO steps (``curriculum.benches.grpo.bench_grpo``, the trainer of a run), completions from vLLM
    colocated in this process as a run with ``training.use_vllm`` makes them: all weights trained, then LoRA
    adapters (rank ``--lora-rank``). Seconds per step after the first (which builds the vLLM engine and warms
    everything) and the first apart; peak GPU memory (``torch.cuda.max_memory_allocated``: the trainer and the
    colocated engine share this process).
``generation``
    vLLM throughput through ``policy.backends.VLLMBackend`` (the engine validation uses), on ``natural`` prompts
    of the preset's first stage config, with the preset's validation decoding: completion tokens per second.
``engineer``
    ``--engineer-answers`` (default 1) ``llm:self`` engineer calls (``engineer.llm.LLMEngineer`` on that same
    engine, the preset's engineer options, seeds ``--seed`` on) with the real engineer prompt after three stages
    (schema, behavior, failures, env_stats with the generator's report and a training signal, history): the first
    call's seconds, prompt and completion tokens; over all calls, answers per second, the answer mode (with
    ``qwen3-4b-nothink``, ``constrained``: vLLM's structured outputs hold each answer to the answer schema) and how
    many answers a config was read from and accepted.
``stage``
    a two-step stage the way a run trains one (``curriculum.training.trainers.train_stage`` with the preset's
    ``training`` section), on instances of the preset's first stage config. The batch is the bench's
    (``--prompts-per-step`` x ``--generations`` x ``--max-completion-length``) or, with ``--stage-batch
    preset``, the preset's own. Its seconds include what a run's stage writes: TRL checkpoints (a 2-step stage
    saves one after each step, with the optimizer state: about 3x the model's size each, two at a time while
    the older is rotated out) and the final model. It needs about 7x the model folder's size free under the
    temporary folder (``TMPDIR``; 4B, full fine-tuning: ~56 GiB) and says so at once when the disk has less.

Each part is timed and guarded on its own: a part that fails records its error text (and the last frames of its
traceback) in the report and the next part runs. The report also names the GPU and the versions of torch,
transformers, TRL, vLLM, peft and accelerate. ``--out FILE`` writes it atomically, after every part too, so a
process that dies midway leaves the parts done so far. Library output (vLLM logs to stdout) is sent to stderr
while the parts run, so stdout carries the JSON report alone. Exit status: 0 when every part ran, 1 when one
failed, 2 (one line on stderr) when there is no CUDA GPU or no vLLM.

Budget: with the defaults expected to take about 10 minutes on one H200-class GPU (not measured yet); four vLLM
engine builds of a 4B model (grpo-full, grpo-lora, generation with engineer, stage) are a good part of it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from simulator.documents import is_python_int
from simulator.errors import ConfigError

GPU_PRESETS = ("qwen3-4b-nothink", "qwen3-4b")
STAGE_BATCHES = ("bench", "preset")
BACKENDS = ("vllm", "hf")
VERSION_PACKAGES = ("torch", "transformers", "trl", "vllm", "peft", "accelerate", "deepspeed", "datasets")


@dataclass(frozen=True)
class GpuBenchSettings:
    """What ``bench gpu`` runs; checked on construction (a bad value raises ConfigError naming its flag).

    The defaults are the GPU measurement. ``backend="hf"`` with ``use_vllm=False``, a tiny model folder and the
    ``tiny`` preset is the CPU-sized stand-in the tests run the same parts with."""

    model: str | None = None
    """A model folder; None: build Qwen3-4B's architecture with random weights on the GPU."""
    preset: str = "qwen3-4b-nothink"
    """Run preset whose training section, validation decoding, engineer options and first stage config are used."""
    style: str = "natural"
    """Prompt style of every part."""
    steps: int = 3
    """GRPO steps of ``grpo-full`` and ``grpo-lora`` (the first is timed apart)."""
    prompts_per_step: int = 8
    generations: int = 8
    max_completion_length: int = 256
    lora_rank: int = 16
    stage_batch: str = "bench"
    """``bench``: the stage part uses the three numbers above; ``preset``: the preset's own batch."""
    generation_prompts: int = 256
    generation_tokens: int = 512
    """Most new tokens per completion in the ``generation`` part."""
    engineer_answers: int = 1
    """Engineer calls of the ``engineer`` part (seeds ``seed``, ``seed + 1``, ...)."""
    gpu_memory_utilization: float = 0.5
    """Share of the GPU the ``generation``/``engineer`` engine may take (``vllm.LLM(gpu_memory_utilization)``)."""
    backend: str = "vllm"
    """What ``generation`` and ``engineer`` generate with: ``vllm`` (the measurement) or ``hf`` (CPU stand-in)."""
    use_vllm: bool = True
    """GRPO completions from vLLM colocate (the measurement) or transformers ``generate`` (CPU stand-in)."""
    seed: int = 0
    cpu_threads: int | None = None
    """Torch threads on a CPU (the stand-in); ignored on a GPU."""

    def __post_init__(self) -> None:
        from curriculum.config import PRESETS
        from policy.prompts import PROMPT_STYLES

        counts = {"--steps": (self.steps, 2, 10_000), "--prompts-per-step": (self.prompts_per_step, 1, 4096),
                  "--generations": (self.generations, 2, 1024),
                  "--max-completion-length": (self.max_completion_length, 1, 131_072),
                  "--lora-rank": (self.lora_rank, 1, 4096),
                  "--generation-prompts": (self.generation_prompts, 1, 65_536),
                  "--generation-tokens": (self.generation_tokens, 1, 131_072), "--seed": (self.seed, 0, 2**31 - 1),
                  "--engineer-answers": (self.engineer_answers, 1, 1024)}
        for flag, (value, low, high) in counts.items():
            if not is_python_int(value) or not low <= value <= high:
                raise ConfigError(flag, value, f"an integer in [{low}, {high}]")
        if self.cpu_threads is not None and (not isinstance(self.cpu_threads, int) or self.cpu_threads < 1):
            raise ConfigError("--cpu-threads", self.cpu_threads, "an integer >= 1")
        if self.preset not in PRESETS:
            raise ConfigError("--preset", self.preset, f"one of {sorted(PRESETS)}")
        if self.style not in PROMPT_STYLES:
            raise ConfigError("--style", self.style, f"one of {sorted(PROMPT_STYLES)}")
        if self.stage_batch not in STAGE_BATCHES:
            raise ConfigError("--stage-batch", self.stage_batch, " or ".join(STAGE_BATCHES))
        if self.backend not in BACKENDS:
            raise ConfigError("backend", self.backend, " or ".join(BACKENDS))
        utilization = self.gpu_memory_utilization
        if (isinstance(utilization, bool) or not isinstance(utilization, (int, float))
                or not 0.05 <= utilization <= 0.99):
            raise ConfigError("--gpu-memory-utilization", utilization, "a share in [0.05, 0.99]")
        if self.model is not None and not (Path(self.model) / "config.json").is_file():
            raise ConfigError("--model", self.model, "a model folder with config.json (or leave it out: a random "
                              "Qwen3-4B is built)")

    @property
    def needs_vllm(self) -> bool:
        return self.use_vllm or self.backend == "vllm"


# ------------------------------------------------------------------------------------------------------------
# what the report says about this machine


def versions() -> dict[str, str | None]:
    """Installed versions of the libraries the figures depend on (None: not installed), and Python's."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSION_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def device_info() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"name": "cpu", "cuda": False}
    properties = torch.cuda.get_device_properties(0)
    return {"name": torch.cuda.get_device_name(0), "cuda": True, "count": torch.cuda.device_count(),
            "memory_gib": round(properties.total_memory / 2**30, 2),
            "capability": f"{properties.major}.{properties.minor}", "torch_cuda": torch.version.cuda}


def gpu_missing(settings: GpuBenchSettings | None = None) -> str | None:
    """Why this machine cannot run the GPU measurement (one line), or None when it can."""
    import warnings

    from policy.backends import VLLM_INSTALL_HINT

    vllm_missing = importlib.util.find_spec("vllm") is None
    if importlib.util.find_spec("torch") is None:
        return ("bench gpu needs torch and a CUDA GPU: torch is not installed (pip install -e '.[train]')"
                + (f"; vLLM is not installed either ({VLLM_INSTALL_HINT})" if vllm_missing else ""))
    import torch

    with warnings.catch_warnings():  # a broken driver warns on the first CUDA call: the line below says it all
        warnings.simplefilter("ignore")
        cuda = torch.cuda.is_available()
    if not cuda:
        return ("bench gpu needs a CUDA GPU: no CUDA GPU is available on this machine (torch.cuda.is_available() "
                "is False)" + (f"; vLLM is not installed either ({VLLM_INSTALL_HINT})" if vllm_missing else ""))
    if vllm_missing and (settings is None or settings.needs_vllm):
        return f"bench gpu needs vLLM, which is not installed: {VLLM_INSTALL_HINT}"
    return None


# ------------------------------------------------------------------------------------------------------------
# what the parts share: the model folder and the generation engine


def build_random_qwen3(folder: Path, config: Any = None, device: str | None = "cuda", seed: int = 0) -> Path:
    """The real Qwen3 tokenizer and a random-weight model of ``config`` (default Qwen3-4B's) in ``folder/model``."""
    from policy.models import init_qwen3_tokenizer, init_random_qwen3, qwen3_4b_config

    tokenizer = init_qwen3_tokenizer(folder / "tokenizer")
    return init_random_qwen3(folder / "model", tokenizer, config or qwen3_4b_config(), seed=seed, device=device)


def _folder_gib(folder: Path) -> float:
    return round(sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**30, 3)


class BenchContext:
    """The model folder (built once, on first use) and the ``generation``/``engineer`` engine (built once, released
    before a part that trains). A model that fails to build fails every part that asks for it, with its error."""

    def __init__(self, settings: GpuBenchSettings, workdir: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.model_info: dict[str, Any] = {}
        self._model: str | None = None
        self._model_error: BaseException | None = None
        self._engine: Any = None

    def model_dir(self) -> str:
        if self._model_error is not None:
            raise RuntimeError(f"the model could not be built: {_error_text(self._model_error)}")
        if self._model is None:
            if self.settings.model is not None:
                self._model = self.settings.model
                self.model_info = {"source": self.settings.model}
            else:
                start = time.perf_counter()
                try:
                    folder = build_random_qwen3(self.workdir / "qwen3-4b-random", seed=self.settings.seed)
                except Exception as error:
                    self._model_error = error
                    self.model_info = {"source": "Qwen3-4B architecture, random weights", "error": _error_text(error)}
                    raise
                self._model = str(folder)
                _free_memory()  # the build's cached blocks would count as used when vLLM sizes its share
                self.model_info = {"source": "Qwen3-4B architecture, random weights (bf16, built on the GPU)",
                                   "build_s": time.perf_counter() - start, "folder_gib": _folder_gib(folder)}
            config = json.loads((Path(self._model) / "config.json").read_text())
            self.model_info.update({key: config.get(key) for key in (
                "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
                "max_position_embeddings")})
        return self._model

    def engine(self) -> tuple[Any, float | None]:
        """The shared generation backend, and the seconds it took to build (None when it already existed)."""
        if self._engine is not None:
            return self._engine, None
        from policy.backends import HFBackend, VLLMBackend

        model = self.model_dir()
        start = time.perf_counter()
        if self.settings.backend == "vllm":
            self._engine = VLLMBackend(model, gpu_memory_utilization=self.settings.gpu_memory_utilization,
                                       seed=self.settings.seed)
        else:
            self._engine = HFBackend(model, cpu_threads=self.settings.cpu_threads)
        return self._engine, time.perf_counter() - start

    def release_engine(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None and callable(getattr(engine, "close", None)):
            engine.close()
        del engine
        _free_memory()


def _free_memory() -> None:
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------------------
# the parts


def _grpo(bench: BenchContext, lora: bool) -> dict[str, Any]:
    from curriculum.benches.grpo import bench_grpo

    s = bench.settings
    return bench_grpo(bench.model_dir(), style=s.style, steps=s.steps, prompts_per_step=s.prompts_per_step,
                      generations=s.generations, max_completion_length=s.max_completion_length, lora=lora,
                      lora_rank=s.lora_rank, cpu_threads=s.cpu_threads, seed=s.seed, use_vllm=s.use_vllm,
                      vllm_mode="colocate")


def part_grpo_full(bench: BenchContext) -> dict[str, Any]:
    return _grpo(bench, lora=False)


def part_grpo_lora(bench: BenchContext) -> dict[str, Any]:
    return _grpo(bench, lora=True)


STAGE_KEYS = ("steps", "seconds", "step_seconds", "first_step_seconds", "later_step_seconds", "parameters",
              "trainable_parameters", "reward_mean", "zero_variance_share", "completion_tokens_mean")


def part_stage(bench: BenchContext) -> dict[str, Any]:
    from curriculum.config import preset
    from curriculum.training.trainers import train_stage
    from policy.prompts import get_style
    from simulator.generator import generate

    s = bench.settings
    changes: dict[str, Any] = {"training.steps": 2}
    if s.stage_batch == "bench":
        changes.update({"training.prompts_per_step": s.prompts_per_step, "training.generations": s.generations,
                        "training.max_completion_length": s.max_completion_length})
    if not s.use_vllm:
        changes["training.use_vllm"] = False
    run = preset(s.preset).with_overrides(**changes)
    training = run.training
    model = bench.model_dir()
    start = time.perf_counter()
    items = generate(replace(run.stage_one, samples=training.steps * training.prompts_per_step,
                             seed=s.seed)).instances
    generate_s = time.perf_counter() - start
    folder = bench.workdir / "stage-01"
    need_gib = _folder_gib(Path(model)) * (2 if training.lora else 7)
    free_gib = shutil.disk_usage(bench.workdir).free / 2**30
    if free_gib < need_gib:
        raise RuntimeError(f"a stage saves TRL checkpoints with the optimizer state and the final model: about "
                           f"{need_gib:.0f} GiB free disk needed under {bench.workdir.parent}, {free_gib:.0f} GiB "
                           "free (set TMPDIR to a larger disk)")
    try:
        info = train_stage(training, model, items, get_style(s.style), folder, seed=s.seed, cpu_threads=s.cpu_threads,
                           save=True)
        final_gib = _folder_gib(folder / "model")
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # a 4B checkpoint is 8 GB of disk
    return {"preset": s.preset, "trainer": training.trainer, "prompts_per_step": training.prompts_per_step,
            "generations": training.generations, "max_completion_length": training.max_completion_length,
            "use_vllm": training.use_vllm, "vllm_mode": training.vllm_mode, "lora": training.lora,
            "enable_thinking": training.enable_thinking, "loss_type": training.loss_type,
            "instances_generate_s": generate_s, "final_model_gib": final_gib, "disk_free_gib_before": free_gib,
            **{key: info.figure(key) for key in STAGE_KEYS}}


def _prompts(settings: GpuBenchSettings, count: int) -> list:
    from curriculum.config import preset
    from policy.prompts import get_style
    from simulator.generator import generate

    run = preset(settings.preset)
    items = generate(replace(run.stage_one, samples=count, seed=settings.seed)).instances
    style = get_style(settings.style)
    return [style.prompt(item.instance) for item in items]


def part_generation(bench: BenchContext) -> dict[str, Any]:
    from curriculum.config import preset
    from policy.backends import Sampling

    s = bench.settings
    run = preset(s.preset)
    prompts = _prompts(s, s.generation_prompts)
    engine, build_s = bench.engine()
    v = run.validation
    sampling = Sampling(max_new_tokens=s.generation_tokens, temperature=v.temperature, top_p=v.top_p, top_k=v.top_k,
                        seed=s.seed, enable_thinking=run.training.enable_thinking, batch_size=min(len(prompts), 64))
    engine.generate(prompts[:4], Sampling(max_new_tokens=8, seed=s.seed, batch_size=4,
                                          enable_thinking=run.training.enable_thinking))  # warm-up, not timed
    start = time.perf_counter()
    generations = engine.generate(prompts, sampling)
    seconds = time.perf_counter() - start
    completion = sum(g.completion_tokens for g in generations)
    return {"backend": engine.spec.split(":", 1)[0], "engine_build_s": build_s, "prompts": len(prompts),
            "style": s.style, "max_new_tokens": s.generation_tokens, "temperature": v.temperature, "top_p": v.top_p,
            "top_k": v.top_k, "enable_thinking": run.training.enable_thinking,
            "gpu_memory_utilization": s.gpu_memory_utilization if s.backend == "vllm" else None,
            "prompt_tokens_mean": sum(g.prompt_tokens for g in generations) / len(generations),
            "completion_tokens_mean": completion / len(generations), "generate_s": seconds,
            "tokens_per_s": completion / seconds, "completions_per_s": len(generations) / seconds}


def part_engineer(bench: BenchContext) -> dict[str, Any]:
    from curriculum.benches.tokens import engineer_inputs
    from curriculum.config import preset
    from engineer.llm import LLMEngineer

    s = bench.settings
    context, config = engineer_inputs(s.preset)
    engine, build_s = bench.engine()
    engineer = LLMEngineer(f"{s.backend}:{bench.model_dir()}", backend=engine, **preset(s.preset).engineer.options)
    calls = []
    for index in range(s.engineer_answers):
        start = time.perf_counter()
        answer = engineer.propose(context, config, seed=s.seed + index)
        calls.append((answer, time.perf_counter() - start))
        if "completion_tokens" not in answer.details:  # the engineer fell back: the backend never answered
            raise RuntimeError(f"the engineer call failed: {answer.reason}")
    decision, seconds = calls[0]
    completion = decision.details["completion_tokens"]
    total_s = sum(took for _, took in calls)
    return {"backend": s.backend, "engine_build_s": build_s, "call_s": seconds,
            "answers": len(calls), "answers_per_s": len(calls) / total_s if total_s > 0 else None,
            "answer_mode": decision.details["answer_mode"],  # set with every answer the backend gave
            "completion_tokens_mean": sum(answer.details["completion_tokens"] for answer, _ in calls) / len(calls),
            "answers_read": sum(answer.proposal is not None for answer, _ in calls),
            "answers_accepted": sum(answer.accepted for answer, _ in calls),
            "prompt_form": decision.details.get("prompt_form"), "prompt_fit": decision.details.get("prompt_fit"),
            "prompt_tokens": decision.details["prompt_tokens"],
            "completion_tokens": completion, "tokens_per_s": completion / seconds if seconds > 0 else None,
            "max_new_tokens": engineer.max_new_tokens, "enable_thinking": engineer.enable_thinking,
            "temperature": engineer.temperature, "accepted": decision.accepted, "reason": decision.reason[:300]}


@dataclass(frozen=True)
class Part:
    help: str
    run: Callable[[BenchContext], dict[str, Any]]
    shares_engine: bool = False
    """Uses the shared generation engine (a part that does not gets the GPU back first)."""


# The parts by name, in the order they run: the GRPO steps, then the engine validation and the engineer share,
# then the stage (last: it writes checkpoints of several times the model's size, and may find the disk full).
PARTS: dict[str, Part] = {
    "grpo-full": Part("GRPO steps, all weights trained, vLLM colocate", part_grpo_full),
    "grpo-lora": Part("GRPO steps, LoRA adapters trained, vLLM colocate", part_grpo_lora),
    "generation": Part("vLLM generation throughput on natural prompts (VLLMBackend)", part_generation,
                       shares_engine=True),
    "engineer": Part("one llm:self engineer call on the same engine, real engineer prompt", part_engineer,
                     shares_engine=True),
    "stage": Part("a two-step stage as a run trains it (preset training section, checkpoints saved)", part_stage),
}


# ------------------------------------------------------------------------------------------------------------
# running and reporting


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:1500]}"


def _where(error: BaseException, frames: int = 3) -> list[str]:
    """The last ``frames`` frames of ``error``'s traceback as ``file:line in function`` (to find it on rerun)."""
    return [f"{frame.filename}:{frame.lineno} in {frame.name}"
            for frame in traceback.extract_tb(error.__traceback__)[-frames:]]


def _memory() -> dict[str, float] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return {"peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
            "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3),
            "device_used_gib": round((total - free) / 2**30, 3)}


def run_part(part: Part, bench: BenchContext) -> dict[str, Any]:
    """``part`` timed and guarded: ``{"ok": True, "seconds": ..., **figures}`` or ``{"ok": False, "error": ...}``;
    on a GPU with the device's used memory before and the torch peaks during it."""
    import torch

    cuda = torch.cuda.is_available()
    before = _memory()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        result: dict[str, Any] = {"ok": True, **part.run(bench)}
    except Exception as error:  # recorded, and the next part runs
        result = {"ok": False, "error": _error_text(error), "where": _where(error)}
    result["seconds"] = time.perf_counter() - start
    if not result["ok"]:  # outside the except block, so the traceback's frames (a trainer, an engine) can go
        _free_memory()
    if cuda:
        result["memory"] = {"device_used_gib_before": before["device_used_gib"] if before else None, **(_memory() or {})}
    return result


def _json(report: dict) -> str:
    return json.dumps(report, indent=2, default=lambda value: value.item() if hasattr(value, "item") else str(value))


def run_parts(names: list[str], settings: GpuBenchSettings, out: str | Path | None = None,
              parts: dict[str, Part] | None = None, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the ``names`` parts of ``parts`` (default :data:`PARTS`) in the registry's order; return the report.
    With ``out`` the report is written there atomically at the start and after every part."""
    from simulator.atomic import atomic_write

    registry = PARTS if parts is None else parts
    unknown = [name for name in names if name not in registry]
    if unknown or not names:
        raise ConfigError("--parts", ",".join(unknown) or "", f"part names among {', '.join(registry)}")
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.perf_counter()
    report: dict[str, Any] = {"bench": "gpu", "versions": versions(), "device": device_info(),
                              "settings": asdict(settings), "model": {}, "parts": {}}

    def save() -> None:
        if out is not None:
            atomic_write(out, _json(report) + "\n")

    save()
    with tempfile.TemporaryDirectory(prefix="mapf-bench-gpu-") as tmp:
        bench = BenchContext(settings, Path(tmp))
        try:
            for name, part in registry.items():
                if name not in names:
                    continue
                if not part.shares_engine:
                    bench.release_engine()
                log(f"bench gpu: {name} ({part.help})")
                result = run_part(part, bench)
                report["parts"][name] = result
                report["model"] = bench.model_info
                report["wall_s"] = time.perf_counter() - started
                log(f"bench gpu: {name} {'done' if result['ok'] else 'FAILED: ' + result['error'][:200]} "
                    f"in {result['seconds']:.1f} s")
                save()
        finally:
            bench.release_engine()
    report["wall_s"] = time.perf_counter() - started
    save()
    return report


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to file descriptor 1 (this process's and its children's) to stderr while inside,
    so the JSON report printed afterwards is stdout's only content (vLLM logs to stdout)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


# ------------------------------------------------------------------------------------------------------------
# the command


def _part_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARTS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or repr(text)}: choose comma-separated parts among "
                                         f"{', '.join(PARTS)}")
    return names


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags and handler of ``mapf-lake bench gpu`` (cheap: nothing heavy is imported until it runs)."""
    parts = "; ".join(f"{name}: {part.help}" for name, part in PARTS.items())
    defaults = GpuBenchSettings.__dataclass_fields__
    parser.add_argument("--parts", type=_part_list, default=list(PARTS), metavar="PART[,PART...]",
                        help=f"the parts to run, comma-separated, default all, in this order: {parts}")
    parser.add_argument("--out", help="also write the report to this JSON file (atomically, after every part)")
    parser.add_argument("--model", help="a model folder to time instead of a random Qwen3-4B (e.g. Qwen/Qwen3-4B "
                        "downloaded with its tokenizer)")
    parser.add_argument("--preset", default=defaults["preset"].default, choices=GPU_PRESETS,
                        help="preset whose training section, validation decoding, engineer options and first stage "
                        "config are used (default qwen3-4b-nothink; qwen3-4b thinks, and its engineer may write "
                        "16,384 tokens)")
    parser.add_argument("--steps", type=int, default=defaults["steps"].default,
                        help="GRPO steps of grpo-full and grpo-lora, >= 2; the first is timed apart (default 3)")
    parser.add_argument("--prompts-per-step", type=int, default=defaults["prompts_per_step"].default,
                        help="GRPO groups per step (default 8)")
    parser.add_argument("--generations", type=int, default=defaults["generations"].default,
                        help="completions per prompt (default 8)")
    parser.add_argument("--max-completion-length", type=int, default=defaults["max_completion_length"].default,
                        help="tokens per GRPO completion (default 256)")
    parser.add_argument("--lora-rank", type=int, default=defaults["lora_rank"].default, help="LoRA rank (default 16)")
    parser.add_argument("--stage-batch", default=defaults["stage_batch"].default, choices=STAGE_BATCHES,
                        help="the stage part's batch: the three numbers above (bench, default) or the preset's own "
                        "(preset: 16 x 8 x 2,048 tokens for qwen3-4b-nothink)")
    parser.add_argument("--generation-prompts", type=int, default=defaults["generation_prompts"].default,
                        help="prompts of the generation part (default 256)")
    parser.add_argument("--generation-tokens", type=int, default=defaults["generation_tokens"].default,
                        help="most new tokens per completion of the generation part (default 512)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=defaults["gpu_memory_utilization"].default,
                        help="share of the GPU the generation/engineer vLLM engine may take (default 0.5)")
    parser.add_argument("--engineer-answers", type=int, default=defaults["engineer_answers"].default,
                        help="engineer calls of the engineer part, for its answers per second (default 1)")
    parser.add_argument("--seed", type=int, default=defaults["seed"].default, help="seed (default 0)")
    parser.set_defaults(handler=main_args)


def main_args(args: argparse.Namespace) -> int:
    settings = GpuBenchSettings(
        model=args.model, preset=args.preset, steps=args.steps, prompts_per_step=args.prompts_per_step,
        generations=args.generations, max_completion_length=args.max_completion_length, lora_rank=args.lora_rank,
        stage_batch=args.stage_batch, generation_prompts=args.generation_prompts,
        generation_tokens=args.generation_tokens, gpu_memory_utilization=args.gpu_memory_utilization, seed=args.seed,
        engineer_answers=args.engineer_answers)
    if args.out and Path(args.out).is_dir():
        raise ConfigError("--out", args.out, "a file path (it is a folder)")
    missing = gpu_missing(settings)
    if missing:
        print(f"mapf-lake: error: {missing}", file=sys.stderr)
        return 2
    with stdout_to_stderr():
        report = run_parts(args.parts, settings, out=args.out)
    print(_json(report))
    return 0 if all(part["ok"] for part in report["parts"].values()) else 1
