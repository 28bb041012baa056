"""One GRPO stage: TRL's ``GRPOTrainer`` whose reward is ``policy.rewards.StageReward`` (the run's weighted reward
components, judged by the batched plan judge), which also records the stage's training signal per map size; and the
two trainer subclasses a run config may ask for (``training.greedy_member``: each group's greedy answer in the
group; ``training.failure_credit``: a failed answer's negative advantage on the moves that failed).

The stage loop (``curriculum.training.run``) passes instances in and gets a checkpoint folder (model + tokenizer,
always saved together) and a :class:`curriculum.loop.records.TrainingReport` out; nothing here decides a curriculum.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from curriculum.loop.distributed import is_main_process
from curriculum.loop.records import TrainingReport, log_entries, logged_mean
from curriculum.training.callbacks import reward_state_callback, weight_average_callback
from curriculum.training.common import (_checkpoint_done, _common_arguments, _cuda, _latest_trainer_checkpoint,
                                        _mark_checkpoint, _Progress, _quiet, _read_report,
                                        grpo_dataset, quiet_libraries)
from policy.backend_hf import set_cpu_threads
from policy.models import load_causal_lm
from policy.prompts import PromptStyle, save_checkpoint_style
from policy.rewards import StageReward
from simulator.generator import LabelledInstance


def greedy_member_trainer(base=None):
    """``base`` (TRL's ``GRPOTrainer`` by default) with each group's first completion replaced by the greedy decode
    of its prompt.

    Plain GRPO compares a prompt's samples with one another, so on a policy whose samples are worse than its
    greedy answer it mostly sharpens sampling: the samples catch up with the greedy answer, which itself moves little
    (docs/results/small.md, "The small preset, measured"). With the greedy answer in the group, the group mean is taken
    with it and the greedy answer gets an advantage of its own: where it fails and a sample succeeds it is pushed down
    and the sample up, which is a move of the greedy answer itself; where it succeeds it is reinforced. This is the
    greedy baseline of self-critical sequence training, put inside GRPO's group. The greedy completion is scored and
    trained on like the samples (TRL recomputes its log-probabilities under the current policy).

    Transformers generation only (a vLLM engine generates a group in one call; ``Training.validate`` refuses the
    pair). Groups must be contiguous, as TRL's repeat sampler makes them; anything else is an error, not a guess."""
    import copy

    from trl import GRPOTrainer

    class GreedyMemberGRPOTrainer(base or GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations,
                                  has_tool_images=False):
            completion_ids, logprobs = super()._generate_single_turn(prompt_ids, images, multimodal_fields,
                                                                     num_generations, has_tool_images)
            if not self.model.training or num_generations < 2:
                return completion_ids, logprobs
            if len(prompt_ids) % num_generations or any(
                    prompt_ids[i] != prompt_ids[i - i % num_generations] for i in range(len(prompt_ids))):
                raise RuntimeError("greedy_member: the batch's prompts are not in groups of num_generations")
            sampling = self.generation_config
            greedy_config = copy.deepcopy(sampling)
            greedy_config.do_sample = False
            greedy_config.temperature, greedy_config.top_p, greedy_config.top_k = 1.0, 1.0, None
            self.generation_config = greedy_config
            try:
                greedy, _ = super()._generate_single_turn(prompt_ids[::num_generations], images, multimodal_fields,
                                                          1, has_tool_images)
            finally:
                self.generation_config = sampling
            for group, ids in enumerate(greedy):
                completion_ids[group * num_generations] = ids
            return completion_ids, logprobs

    return GreedyMemberGRPOTrainer


def blamed_tokens(piece_lengths: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[bool]:
    """Which tokens of a completion overlap the character ``spans`` (``policy.rewards.failure_spans``), given each
    token's length in characters in order (the completion's text is the tokens' pieces end to end)."""
    out, start = [], 0
    for length in piece_lengths:
        end = start + length
        out.append(any(start < high and low < end for low, high in spans))
        start = end
    return out


def failure_credit_trainer(base=None):
    """``base`` (TRL's ``GRPOTrainer`` by default) with a failed answer's negative advantage put on the moves that
    failed, not on the whole answer.

    GRPO gives every token of a completion its sequence's advantage. An answer that walks into a hole at its second
    move is pushed down as a whole: the first move, the other agent's line and the labels with it, though most of
    them are what the valid answers of the group write too; the stage then fixes about as many held-out answers
    as it breaks (docs/results/grpo.md, "Why 100-step stages do not lift"). With failure credit, a completion with a
    negative advantage whose failure the judge pins on moves of one step (a hole or a move off the grid: the agent's
    move; a conflict: every move of that step; ``policy.rewards.failure_spans``) keeps that advantage on those moves'
    tokens only, and 0 elsewhere. Everything else keeps its advantage on every token: positive advantages, valid but
    slower plans, answers that did not parse, plans that end off a goal. Per-token advantages are TRL's (B, T) form; the
    loss and its normalisation are TRL's own. The share of negative-advantage completions so localised is logged as
    ``failure_credit/localized``."""
    import torch
    from trl import GRPOTrainer

    from policy.rewards import failure_spans

    class FailureCreditGRPOTrainer(base or GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            advantages = output["advantages"]
            if not self.model.training or advantages.dim() != 1:
                return output
            ids = output["completion_ids"].tolist()
            lengths = output["completion_mask"].sum(dim=1).tolist()
            decode = self.processing_class.batch_decode
            pieces = [decode([[token] for token in row[:int(n)]], skip_special_tokens=True)
                      for row, n in zip(ids, lengths)]
            spans = failure_spans(["".join(row) for row in pieces], [x["instance"] for x in inputs],
                                  [x["optimal_makespan"] for x in inputs], [x["horizon"] for x in inputs])
            weights = torch.ones(output["completion_ids"].shape, dtype=advantages.dtype, device=advantages.device)
            negative = localized = 0
            for b, row_spans in enumerate(spans):
                if advantages[b] >= 0:
                    continue
                negative += 1
                if row_spans is None:
                    continue
                blamed = blamed_tokens([len(piece) for piece in pieces[b]], row_spans)
                if any(blamed):
                    weights[b] = 0.0
                    weights[b, :len(blamed)] = torch.tensor(blamed, dtype=advantages.dtype)
                    localized += 1
            output["advantages"] = advantages.unsqueeze(1) * weights
            self._metrics["train"]["failure_credit/localized"].append(localized / negative if negative else 0.0)
            return output

    return FailureCreditGRPOTrainer


def grpo_stage(training, model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *,
               seed: int, cpu_threads: int | None = None, save: bool = True) -> TrainingReport:
    """One GRPO stage from ``model_dir`` on ``items``; saves model + tokenizer to ``out_dir/model``. Resumable
    from the last TRL checkpoint of a killed stage. With ``use_vllm`` and ``vllm_mode="server"`` completions come
    from the ``trl vllm-serve`` server at ``vllm_server_host:vllm_server_port``. Returns metrics: reward
    mean/std, share of groups with zero reward variance, tokens per completion, seconds per step (all steps; and
    the first apart from the rest), parameters (all, trained). ``save=False`` (benchmarks) writes no checkpoint
    at all. ``training`` is the run config's ``Training`` section (``curriculum.config.Training``)."""
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    final = out_dir / "model"
    if _checkpoint_done(final):
        return _read_report(final)
    quiet_libraries()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = load_causal_lm(model_dir, dtype="auto" if _cuda() else None)
    set_cpu_threads(model, cpu_threads)
    options = _grpo_arguments(training, style, out_dir, model, seed, save)
    timer = _Progress.make(f"GRPO {out_dir.name}", training.steps)
    reward = StageReward(dict(training.rewards) or {"default": 1.0}, training.generations, training.scale_rewards)
    resume_from = _latest_trainer_checkpoint(out_dir / "trainer")
    callbacks = [timer, reward_state_callback(reward)] + (
        [weight_average_callback(training.weight_average)] if training.weight_average else [])
    reward_funcs: list[Any] = [reward]  # a callable object: TRL's annotation names plain functions
    trainer = _grpo_trainer_class(training)(
        model=model, reward_funcs=reward_funcs, args=GRPOConfig(**options), train_dataset=grpo_dataset(items, style),
        processing_class=tokenizer, peft_config=_lora_config(training), callbacks=callbacks)
    _quiet(trainer)
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.perf_counter() - start
    trained: Any = trainer.model  # set once trained (transformers types it Optional, peft's methods untyped)
    trainable = sum(p.numel() for p in trained.parameters() if p.requires_grad)
    if training.lora:
        trainer.model = trained = trained.merge_and_unload()  # a merged model loads like any other checkpoint
    if save:
        _save_stage_model(trainer, trained, tokenizer, style, final, training.lora)
    info = _grpo_report(training, trainer.state.log_history, timer.times, trained, trainable, reward, seconds)
    if save and is_main_process():
        _mark_checkpoint(final, info.to_dict())
    _release(trainer)
    return info


def _lora_config(training):
    """The LoRA adapter a ``training.lora`` stage trains (rank ``lora_rank`` on every linear layer), or None."""
    if not training.lora:
        return None
    from peft import LoraConfig

    return LoraConfig(r=training.lora_rank, lora_alpha=2 * training.lora_rank, target_modules="all-linear",
                      task_type="CAUSAL_LM")


def _grpo_arguments(training, style: PromptStyle, out_dir: Path, model, seed: int, save: bool) -> dict:
    """``GRPOConfig``'s arguments for a stage: the common ones (:func:`_common_arguments`, a checkpoint every third
    of the stage) and the ``Training`` section's GRPO ones; no checkpoints at all without ``save``, the vLLM mode
    (and server) with ``use_vllm``, and the thinking switch for a chat style."""
    steps = training.steps
    options = dict(
        **_common_arguments(out_dir, steps, training.learning_rate, steps // 3, seed, model),
        per_device_train_batch_size=training.prompts_per_step * training.generations,
        num_generations=training.generations,
        max_completion_length=training.max_completion_length,
        temperature=training.temperature,
        beta=training.beta,
        logging_steps=1,
        use_vllm=training.use_vllm,
        reward_weights=[1.0],  # the one StageReward already weighs the components
        loss_type=training.loss_type,
        num_iterations=training.num_iterations,
        scale_rewards=training.scale_rewards,
        warmup_steps=round(training.warmup_ratio * steps),
    )
    if not save:
        options["save_strategy"] = "no"
    if training.use_vllm:
        options["vllm_mode"] = training.vllm_mode
        if training.vllm_mode == "server":
            options.update(vllm_server_host=training.vllm_server_host, vllm_server_port=training.vllm_server_port)
    if style.chat:
        options["chat_template_kwargs"] = {"enable_thinking": training.enable_thinking}
    return options


def _grpo_trainer_class(training):
    """TRL's ``GRPOTrainer``, or its subclass with each group's greedy member (``training.greedy_member``), with
    failure credit on top (``training.failure_credit``)."""
    from trl import GRPOTrainer

    trainer_class = greedy_member_trainer() if training.greedy_member else GRPOTrainer
    if training.failure_credit:
        trainer_class = failure_credit_trainer(trainer_class)
    return trainer_class


def _save_stage_model(trainer, trained, tokenizer, style: PromptStyle, final: Path, lora: bool) -> None:
    """Save the trained model (merged, for LoRA) with its tokenizer and prompt style to ``final``."""
    if lora:
        if is_main_process():
            trained.save_pretrained(str(final))
    else:
        trainer.save_model(str(final))  # TRL writes on the main process only
    if is_main_process():
        tokenizer.save_pretrained(str(final))
        save_checkpoint_style(final, style.name)


def _grpo_report(training, log_history: list[dict], step_times: list[float], trained, trainable: int,
                 reward: StageReward, seconds: float) -> TrainingReport:
    """The stage's report from TRL's logged steps (those with a reward), the progress callback's step times and the
    reward's per-size signal."""
    logs = [entry for entry in log_entries(log_history) if "reward" in entry]
    figures = {
        "first_step_seconds": step_times[0] if step_times else None,
        "later_step_seconds": (sum(step_times[1:]) / len(step_times[1:])) if len(step_times) > 1 else None,
        "parameters": sum(p.numel() for p in trained.parameters()),
        "trainable_parameters": trainable,
        "reward_std": logged_mean(logs, "reward_std"),
        "reward_first": logs[0]["reward"] if logs else None,
        "reward_last": logs[-1]["reward"] if logs else None,
    }
    if training.failure_credit:
        figures["failure_credit_localized"] = logged_mean(logs, "failure_credit/localized")
    return TrainingReport.from_log(log_history, steps=training.steps, seconds=seconds,
                                   step_seconds=(sum(step_times) / len(step_times)) if step_times else None,
                                   signal=reward.signal(), figures=figures)


def _release(trainer) -> None:
    """Give a finished trainer's GPU memory back, its colocated vLLM engine included (validation builds its own)."""
    generation = getattr(trainer, "vllm_generation", None)
    llm = getattr(generation, "llm", None)
    if generation is not None:
        generation.llm = None
    if llm is not None:
        from policy.backends import release_vllm

        release_vllm(llm)
    if _cuda():
        import gc

        import torch

        trainer.model = None
        gc.collect()
        torch.cuda.empty_cache()
