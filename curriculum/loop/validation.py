"""What a checkpoint answers on the run's protected sets: the evidence set between stages (greedy replays, their
failure summary, sampled pass@1) and the test set at the end (the final table, sampled pass@1).

The model is a checkpoint folder (``mapf-lake train``'s stages) or a model in memory (:class:`LoadedModel`: a
trainer's own, at a stage boundary of a user's script). Answers come from transformers, or from a vLLM engine built
once per checkpoint folder and released before the next one (or before a trainer needs the GPU back).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from curriculum.config import RunConfig
from curriculum.loop.folder import read_summary
from curriculum.loop.records import AnswerChurn, read_record, write_record
from engineer import StageEvidence, summarize_episodes
from engineer.evidence import SampledPass
from policy.evaluation import EvalTable, SampledCell, SampledPass1
from policy.prompts import PromptStyle
from replays.format import ReplayHeader
from simulator.generator import LabelledInstance


@dataclass(frozen=True)
class LoadedModel:
    """A model in memory with its tokenizer (a trainer's own, mid-training). ``name`` stands for its path in
    replay headers and an ``llm:self`` engineer's spec."""

    model: Any
    tokenizer: Any
    name: str = "trainer-model"


Model = Any
"""A checkpoint folder (or hub name), a :class:`LoadedModel`, or a ready policy (an object with ``answer(items,
seed)`` and ``descriptor``: ``policy.policies``' scripted or model policies, or a user's own), which then answers the
evidence and test sets as it is, greedy and sampled alike."""


def model_name(model: Model) -> str:
    if isinstance(model, LoadedModel):
        return model.name
    if _is_policy(model):
        return str(model.descriptor.get("spec") or model.descriptor.get("name") or type(model).__name__)
    return str(model)


def _is_policy(model: Any) -> bool:
    return callable(getattr(model, "answer", None)) and hasattr(model, "descriptor")


class EvaluationModels:
    """Policies of a model with the run's decodings: the evaluation decoding (``validation.temperature``,
    ``top_p``, ``top_k``; greedy by default) and the training temperature for sampled pass@1."""

    def __init__(self, config: RunConfig, style: PromptStyle) -> None:
        self.config = config
        self.style = style
        self.vllm_engine: tuple[str, Any] | None = None  # (model folder, VLLMBackend) of the last validation

    def backend_kind(self) -> str:
        """``hf`` or ``vllm``: what generates validation and evaluation answers (``validation.backend``)."""
        choice = self.config.validation.backend
        return ("vllm" if self.config.training.use_vllm else "hf") if choice == "auto" else choice

    def evaluation_policy(self, model: Model):
        v = self.config.validation
        return self.policy(model, temperature=v.temperature, top_p=v.top_p, top_k=v.top_k, seed=self.config.seed)

    def sampling_policy(self, model: Model):
        """The model sampling at the training temperature (sampled pass@1)."""
        return self.policy(model, temperature=self.config.training.temperature, top_p=1.0, top_k=0,
                           seed=self.config.seed + 1)

    def policy(self, model: Model, *, temperature: float, top_p: float, top_k: int, seed: int):
        """A ``ModelPolicy`` of ``model``. A vLLM engine is built once per checkpoint folder (validation and sampled
        pass@1 share it) and released before the next one is built; a model in memory answers through
        transformers."""
        from policy.backends import HFBackend, Sampling, VLLMBackend
        from policy.policies import ModelPolicy

        sampling = Sampling(max_new_tokens=self.config.validation.max_new_tokens, temperature=temperature,
                            top_p=top_p, top_k=top_k, seed=seed, batch_size=64,
                            enable_thinking=self.config.training.enable_thinking)
        if _is_policy(model):
            return model
        if isinstance(model, LoadedModel):
            backend = HFBackend.loaded(model.model, model.tokenizer, model.name, cpu_threads=self.config.cpu_threads)
            return ModelPolicy(f"hf:{model.name}", self.style, sampling, backend=backend)
        if self.backend_kind() == "hf":
            return ModelPolicy(f"hf:{model}", self.style, sampling,
                               backend=HFBackend(model, cpu_threads=self.config.cpu_threads))
        cached = self.vllm_engine
        if cached is None or cached[0] != model:
            self.release()
            engine = VLLMBackend(model, gpu_memory_utilization=self.config.validation.vllm_gpu_memory_utilization,
                                 seed=self.config.seed)
            self.vllm_engine = cached = (model, engine)
        return ModelPolicy(f"vllm:{model}", self.style, sampling, backend=cached[1])

    def engineer_backend(self, model: Model) -> tuple[str, Any]:
        """An ``llm:self`` engineer's spec and ready backend for ``model`` (None: the spec loads it): the engine
        that just validated a checkpoint, or the model in memory."""
        from simulator.errors import ConfigError

        if _is_policy(model):
            raise ConfigError("engineer.spec", "llm:self", "a model to ask (a checkpoint folder or a LoadedModel); "
                              f"the stage was closed with a policy, {model_name(model)}")
        if isinstance(model, LoadedModel):
            from policy.backends import HFBackend

            return f"llm:hf:{model.name}", HFBackend.loaded(model.model, model.tokenizer, model.name,
                                                            cpu_threads=self.config.cpu_threads)
        cached = self.vllm_engine
        if cached is not None and cached[0] == model:
            return f"llm:vllm:{model}", cached[1]
        return f"llm:hf:{model}", None

    def release(self) -> None:
        """Free the validation vLLM engine (the next stage's trainer needs the GPU memory back)."""
        cached = self.vllm_engine
        self.vllm_engine = None
        if cached is not None:
            cached[1].close()


def sampled_verdicts(policy, items: Sequence[LabelledInstance], k: int, seed: int):
    """``k`` sampled answers of every item (in order, each item's ``k`` together), judged: the verdicts'
    ``valid`` and ``optimal`` arrays over the repeated items."""
    from policy.rollout import judge_answers

    repeated = [item for item in items for _ in range(k)]
    verdicts = judge_answers(repeated, policy.answer(repeated, seed=seed).plans)
    return verdicts.valid, verdicts.optimal


def validate(models: EvaluationModels, model: Model, folder: Path, stage: int, items: Sequence[LabelledInstance],
             trained_config: dict | None = None) -> StageEvidence:
    """Greedy answers of ``model`` on the evidence set ``items`` -> ``folder/validation.mlr`` + ``summary.json``
    (skipped when both are there: the summary is read back).

    The replay header's ``stage_config`` is the validation config (it produced these instances); the config the
    checkpoint was trained on goes in ``extra["trained_config"]`` (None: untrained), so a reader of the replays
    alone (``mapf-lake engineer --replays STAGE``) edits the stage's training config."""
    import numpy as np

    from policy.evaluation import answer_and_record

    config = models.config
    replay = folder / "validation.mlr"
    summary_path = folder / "summary.json"
    if replay.exists() and summary_path.exists():
        return read_summary(summary_path)
    policy = models.evaluation_policy(model)
    header = ReplayHeader.new(run_id=config.name, stage=stage, split="validation", policy=policy.descriptor,
                              stage_config=config.evidence_config.to_dict(), extra={"trained_config": trained_config})
    recorded = answer_and_record(policy, items, replay, header, config.seed)
    started = time.perf_counter()
    summary = summarize_episodes(recorded.episodes)  # the failure summary plus per-size figures for the engineer
    judged = time.perf_counter()
    k = config.validation.sampled_k
    if k:
        valid, optimal = sampled_verdicts(models.sampling_policy(model), items, k, config.seed)
        sides = np.array([item.size for item in items for _ in range(k)])
        summary = replace(summary, sampled=SampledPass(
            k=k, temperature=config.training.temperature, valid_rate=float(valid.mean()),
            optimal_rate=float(optimal.mean()),
            by_size={int(side): float(valid[sides == side].mean()) for side in sorted(set(sides.tolist()))}))
    # the model's generation apart from the loop's own work on its answers (parse, judge, rewards, replays)
    summary = replace(summary, seconds={
        "generation": recorded.answer_seconds + time.perf_counter() - judged,
        "judging_and_records": recorded.record_seconds + judged - started})
    write_record(summary_path, summary.to_dict(), "validation summary", StageEvidence.from_dict)
    return summary


def evaluate_test_set(models: EvaluationModels, model: Model, folder: Path, log) -> EvalTable:
    """The final score: ``model`` on the run's test set (``evaluation_suite``) -> ``folder`` (replays per cell,
    ``table.json`` written last: an evaluation is complete when its table exists, and is then read back), plus
    sampled pass@1 in ``sampled.json`` when ``validation.sampled_k``."""
    from policy.evaluation import evaluate
    from simulator.cli import showing_progress
    from simulator.suites import suite_size

    config = models.config
    table_path = folder / "table.json"
    if table_path.exists():  # a finished run: read its table back, write nothing (resumed comparisons)
        return EvalTable.from_dict(read_record(table_path, "final table"), str(table_path))
    policy = models.evaluation_policy(model)
    try:
        with showing_progress(suite_size(config.evaluation_suite), "final evaluation") as update:
            table = evaluate(policy, config.evaluation_suite, folder, seed=config.seed, run_id=config.name,
                             progress=lambda done, total: update(done),
                             ignored_policy_keys=("spec",))  # the checkpoint's path moves with the run folder
    finally:
        models.release()
    if config.validation.sampled_k:
        _test_sampled_pass1(models, model, folder, log)
    write_record(table_path, table.to_dict(), "final table", EvalTable.from_dict)  # last: complete when it exists
    log(table.render())
    return table


def _test_sampled_pass1(models: EvaluationModels, model: Model, folder: Path, log) -> SampledPass1:
    """Sampled pass@1 on the test set (``sampled.json``): ``validation.sampled_k`` samples of every test instance
    at the training temperature, the share valid (and optimal) per cell and overall. Read back when present."""
    import numpy as np

    from simulator.suites import generate_suite

    config = models.config
    path = folder / "sampled.json"
    if path.exists():
        return SampledPass1.from_dict(read_record(path, "test-set sampled pass@1"), str(path))
    k, temperature = config.validation.sampled_k, config.training.temperature
    cells = generate_suite(config.evaluation_suite)
    items = [item for _, stage in cells for item in stage.instances]
    keys = [f"{cell.agents}x{cell.size}" for cell, stage in cells for _ in range(len(stage.instances) * k)]
    log(f"final evaluation: sampled pass@1 ({k} samples of {len(items)} test instances)")
    policy = models.sampling_policy(model)
    try:
        valid, optimal = sampled_verdicts(policy, items, k, config.seed)
    finally:
        models.release()
    cell_of = np.array(keys)
    result = SampledPass1(
        k=k, suite=config.evaluation_suite, temperature=temperature, valid_rate=float(valid.mean()),
        optimal_rate=float(optimal.mean()),
        cells={(cell.agents, cell.size): SampledCell(float(valid[cell_of == key].mean()),
                                                     float(optimal[cell_of == key].mean()), int((cell_of == key).sum()))
               for cell, _ in cells for key in [f"{cell.agents}x{cell.size}"]})
    write_record(path, result.to_dict(), "test-set sampled pass@1", SampledPass1.from_dict)
    return result


def answer_churn(before: Path, after: Path) -> AnswerChurn:
    """How far a stage moved the greedy answers on the validation set: the share of instances whose answer text
    changed from ``before``'s replay to ``after``'s, and how many became valid (``gained``) or stopped being
    valid (``lost``). A stage that changes many answers with gains equal to losses moved the policy by noise."""
    from replays.reader import ReplayReader

    def answers(path: Path) -> list[tuple[str | None, bool]]:
        with ReplayReader(path) as reader:
            return [(episode.completion, bool(episode.outcome.valid)) for episode in reader]

    old, new = answers(before), answers(after)
    if len(old) != len(new) or not old:
        return AnswerChurn(episodes=len(new))
    return AnswerChurn(episodes=len(old), changed=sum(a[0] != b[0] for a, b in zip(old, new)) / len(old),
                       gained=sum(not a[1] and b[1] for a, b in zip(old, new)),
                       lost=sum(a[1] and not b[1] for a, b in zip(old, new)))


__all__ = ["EvaluationModels", "LoadedModel", "Model", "answer_churn", "evaluate_test_set", "model_name",
           "sampled_verdicts", "validate"]
