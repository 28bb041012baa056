"""The two trainers of a run, both TRL: the supervised warm start (``SFTTrainer``) on the solver's optimal plans,
and one GRPO stage (``GRPOTrainer``) whose reward is ``policy.rewards.StageReward`` (the run's weighted reward
components, judged by the batched plan judge), which also records the stage's training signal per map size.

Nothing here decides a curriculum: the stage loop (``curriculum.loop.run``) passes instances in and gets a checkpoint
folder (model + tokenizer, always saved together) and metrics out.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from curriculum.loop.distributed import is_main_process
from curriculum.loop.records import (MAX_RECORD_BYTES, OUTCOMES_FILE, RoundFigures, TrainingReport, mean_figure,
                                     read_record, write_record)
from policy.backend_hf import set_cpu_threads as _cpu_threads
from policy.prompts import PromptStyle, save_checkpoint_style
from policy.rewards import StageReward, group_key, reward_columns
from simulator.atomic import atomic_write
from simulator.errors import ConfigError
from simulator.files import load_json, read_text_bounded
from simulator.env import default_horizon
from simulator.generator import LabelledInstance
from simulator.types import JointPlan

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def quiet_libraries() -> None:
    """The stage loop prints its own one-line status: silence the libraries' progress bars and info logs, and the
    renaming notices (``gradient_checkpointing`` -> ``activation_checkpointing``) TRL's own calls raise every step."""
    import warnings

    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)


def _small_on_cpu(model) -> bool:
    import torch

    from policy.backends import HFBackend

    return not torch.cuda.is_available() and sum(p.numel() for p in model.parameters()) < HFBackend.SMALL_MODEL_PARAMETERS


def _checkpointing(model) -> bool:
    """Activation checkpointing (recompute in the backward pass): the memory saver a 4B model needs on a GPU;
    a small model on a CPU has memory to spare and trains ~12% faster without it."""
    return not _small_on_cpu(model)


def _quiet(trainer) -> None:
    """Drop the Trainer's per-step dict printing."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _checkpoint_done(path: Path) -> bool:
    return (path / "checkpoint_done.json").exists()


"""Beside a rejection-sampling stage's model: each sampled instance's own ``[valid samples, samples]`` by its content
key in hex (``{"outcomes": {...}}``), what the ``replay`` engineer scores an instance by (``engineer.material``)."""


def _read_mark(path: Path, what: str) -> dict[str, Any]:
    """The JSON object a stage wrote in its own folder (a checkpoint mark, the reward tallies beside a TRL
    checkpoint), read back on resume through :mod:`simulator.files` (a regular file, at most
    ``MAX_RECORD_BYTES``, bounded numbers and nesting); anything else is a ConfigError naming the file."""
    return load_json(read_text_bounded(path, MAX_RECORD_BYTES, what), str(path), what, object_only=True)


def _load_signal(reward: StageReward, state: Any, where: str) -> None:
    """``reward.load_state(state)``, its ConfigError naming ``where`` (the file the state was read from)."""
    try:
        reward.load_state(state)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error.field}", error.value, error.allowed) from None


def _read_round_mark(path: Path) -> tuple[RoundFigures, dict[str, Any]]:
    """A finished rejection-sampling round's ``checkpoint_done.json`` (``{round, signal_state, outcomes}``),
    checked: its figures (:class:`RoundFigures`) and the whole mark, ``outcomes`` as
    ``engineer.material.read_outcomes`` reads them. A bad one is a ConfigError naming the file and key."""
    mark = _read_mark(path, "a round's checkpoint mark")
    return _round_figures(mark, str(path)), mark


def _round_figures(mark: dict[str, Any], where: str) -> RoundFigures:
    """The figures of a round's checkpoint mark, its ``outcomes`` checked as ``engineer.material.read_outcomes``
    reads them (ConfigError naming ``where`` and the key)."""
    from engineer.material import read_outcomes

    figures = RoundFigures.from_dict(mark.get("round"), f"{where}: round")
    read_outcomes({"outcomes": mark.get("outcomes") or {}}, where)
    return figures


def _read_report(path: Path) -> TrainingReport:
    """The report a finished checkpoint's ``checkpoint_done.json`` keeps (a bad one: ConfigError naming it)."""
    return TrainingReport.from_dict(read_record(path / "checkpoint_done.json", "checkpoint mark"),
                                    str(path / "checkpoint_done.json"))


def _mark_checkpoint(path: Path, info: dict, read: Callable[[dict, str], Any] = TrainingReport.from_dict) -> None:
    """Mark the checkpoint ``path`` finished: ``checkpoint_done.json`` holds ``info``, written only if ``read`` (the
    reader a resume uses) takes it back (:func:`curriculum.loop.records.write_record`)."""
    write_record(path / "checkpoint_done.json", info, "checkpoint mark", read)


def _latest_trainer_checkpoint(folder: Path) -> str | None:
    """The newest ``checkpoint-N`` folder TRL saved (to resume a killed stage), if any."""
    if not folder.exists():
        return None
    found = sorted((p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1]))
    return str(found[-1]) if found else None


def _checkpointing_argument() -> str:
    """The trainer argument's name: ``activation_checkpointing`` in the transformers this project resolves on CPU,
    ``gradient_checkpointing`` before the rename (the 5.10-5.17 that vLLM 0.31 pins on a GPU machine)."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def _common_arguments(out_dir: Path, steps: int, learning_rate: float, save_every: int, seed: int, model) -> dict:
    """Trainer arguments shared by the warm start and the GRPO stages: seeded, checkpointed for resume (one kept),
    no external loggers, CPU unless a GPU is there (then bf16), activation checkpointing only where it pays."""
    cuda = _cuda()
    return dict(
        **{_checkpointing_argument(): _checkpointing(model)},
        output_dir=str(out_dir / "trainer"),
        max_steps=steps,
        learning_rate=learning_rate,
        save_strategy="steps",
        save_steps=max(save_every, 1),
        save_total_limit=1,
        report_to=[],
        use_cpu=not cuda,
        bf16=cuda,
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def sft_dataset(items: Sequence[LabelledInstance], style: PromptStyle):
    """Prompt-completion rows: the instance's prompt and the solver's optimal plan written in the style."""
    from datasets import Dataset

    rows = []
    for item in items:
        prompt = style.prompt(item.instance)
        answer = style.write_answer(item.instance, item.plan)
        if style.chat:
            rows.append({"prompt": prompt, "completion": [{"role": "assistant", "content": answer}]})
        else:
            rows.append({"prompt": prompt, "completion": answer})
    return Dataset.from_list(rows)


def grpo_dataset(items: Sequence[LabelledInstance], style: PromptStyle):
    """Prompt rows with the columns the reward reads (``policy.rewards.reward_columns``)."""
    from datasets import Dataset

    rows = []
    for item in items:
        row = {"prompt": style.prompt(item.instance)}
        row.update(reward_columns(item.instance, item.optimal_makespan, default_horizon(item.instance)))
        rows.append(row)
    return Dataset.from_list(rows)


def _format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


SIGNAL_FILE = "stage_signal.json"  # the StageReward tallies, beside each TRL checkpoint of a GRPO stage


def signal_saving_callback(reward: StageReward):
    """A TrainerCallback that writes ``reward``'s tallies into every checkpoint TRL saves, so a stage resumed
    from that checkpoint continues its per-size training signal instead of starting the counts again."""
    from transformers import TrainerCallback

    class SignalSaver(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                atomic_write(folder / SIGNAL_FILE, json.dumps(reward.state()))

    return SignalSaver()


AVERAGE_FILE = "weight_average.pt"  # the running weight average, beside each TRL checkpoint of a GRPO stage


def weight_average_callback(decay: float):
    """A TrainerCallback keeping an exponential moving average of the trained weights over a stage's optimizer
    steps (``average = decay * average + (1 - decay) * weights`` after every step, starting from the stage's
    first weights): the weights a noisy update random-walks around, with the walk averaged out over about
    ``1 / (1 - decay)`` steps. At the end of training the average is copied into the model (before the stage
    saves it); every checkpoint TRL saves holds it, so a resumed stage continues the same average."""
    import torch
    from transformers import TrainerCallback

    class WeightAverage(TrainerCallback):
        def __init__(self) -> None:
            self.average: dict[str, torch.Tensor] | None = None

        @staticmethod
        def _trained(model) -> dict:
            return {name: p for name, p in model.named_parameters() if p.requires_grad}

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            resumed = Path(args.output_dir) / f"checkpoint-{state.global_step}" / AVERAGE_FILE
            trained = self._trained(model)
            if state.global_step and resumed.is_file():
                self.average = torch.load(resumed, map_location="cpu", weights_only=True)
            if self.average is None or set(self.average) != set(trained):
                self.average = {name: p.detach().float().clone() for name, p in trained.items()}
            # kept in float32 beside its weights (a bf16 average would round the small steps away)
            self.average = {name: value.to(trained[name].device) for name, value in self.average.items()}

        def on_step_end(self, args, state, control, model=None, **kwargs):
            with torch.no_grad():
                for name, p in self._trained(model).items():
                    self.average[name].mul_(decay).add_(p.detach().float(), alpha=1.0 - decay)

        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir() and self.average is not None:
                temporary = folder / (AVERAGE_FILE + ".tmp")
                torch.save(self.average, temporary)
                os.replace(temporary, folder / AVERAGE_FILE)

        def on_train_end(self, args, state, control, model=None, **kwargs):
            if self.average is None:
                return
            with torch.no_grad():
                for name, p in self._trained(model).items():
                    p.copy_(self.average[name].to(dtype=p.dtype))

    return WeightAverage()


class _Progress:
    """A TrainerCallback (made lazily so transformers loads on demand) that times every optimizer step and keeps
    one live status line on stderr: phase, step/total, seconds per step, time left, and the latest loss or reward.
    On a terminal the line is rewritten in place; elsewhere (logs, CI) it is printed at every tenth of the run."""

    @staticmethod
    def make(phase: str, total: int, stream=None):
        import sys

        from transformers import TrainerCallback

        out = stream or sys.stderr

        class Progress(TrainerCallback):
            def __init__(self) -> None:
                self.times: list[float] = []
                self._start = 0.0
                self._latest = ""
                self._live = hasattr(out, "isatty") and out.isatty()
                self._every = max(total // 10, 1)

            def on_step_begin(self, args, state, control, **kwargs):
                self._start = time.perf_counter()

            def on_log(self, args, state, control, logs=None, **kwargs):
                logs = logs or {}
                for key in ("reward", "loss"):
                    if isinstance(logs.get(key), (int, float)):
                        self._latest = f"{key} {logs[key]:.3f}"
                        break

            def on_step_end(self, args, state, control, **kwargs):
                self.times.append(time.perf_counter() - self._start)
                step = state.global_step
                if not self._live and step % self._every and step != total:
                    return
                recent = self.times[-20:]
                per_step = sum(recent) / len(recent)
                line = (f"{phase}: step {step}/{total}, {per_step:.2f} s/step, "
                        f"{_format_seconds(per_step * (total - step))} left" + (f", {self._latest}" if self._latest else ""))
                if self._live:
                    out.write("\r" + line.ljust(100)[:100] + ("\n" if step >= total else ""))
                else:
                    out.write(line + "\n")
                out.flush()

        return Progress()


def warm_start(model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *, steps: int,
               batch_size: int, learning_rate: float, max_length: int, seed: int, cpu_threads: int | None = None,
               warmup_steps: int = 0, label: str = "warm start") -> TrainingReport:
    """Supervised fine-tuning on the items' plans (the solver's optimal ones, or a policy's own kept ones); saves
    model + tokenizer to ``out_dir/model``. Resumable. ``label`` names the progress lines."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    final = out_dir / "model"
    if _checkpoint_done(final):
        return _read_report(final)
    quiet_libraries()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    _cpu_threads(model, cpu_threads)
    args = SFTConfig(
        **_common_arguments(out_dir, steps, learning_rate, steps // 4, seed, model),
        per_device_train_batch_size=batch_size,
        lr_scheduler_type="cosine",
        warmup_steps=warmup_steps,
        logging_steps=max(steps // 20, 1),
        max_length=max_length,
    )
    timer = _Progress.make(label, steps)
    trainer = SFTTrainer(model=model, args=args, train_dataset=sft_dataset(items, style), processing_class=tokenizer,
                         callbacks=[timer])
    _quiet(trainer)
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=_latest_trainer_checkpoint(out_dir / "trainer"))
    seconds = time.perf_counter() - start
    trainer.save_model(str(final))  # TRL writes on the main process only
    if is_main_process():
        tokenizer.save_pretrained(str(final))  # a checkpoint without its tokenizer.json fails to load later
        save_checkpoint_style(final, style.name)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    info = TrainingReport(steps=steps, seconds=seconds,
                          step_seconds=(sum(timer.times) / len(timer.times)) if timer.times else None,
                          figures={"first_loss": losses[0] if losses else None,
                                   "last_loss": losses[-1] if losses else None})
    if is_main_process():
        _mark_checkpoint(final, info.to_dict())
    return info


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
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tr = training
    steps, prompts_per_step, generations = tr.steps, tr.prompts_per_step, tr.generations
    max_completion_length, learning_rate, temperature, beta = (tr.max_completion_length, tr.learning_rate,
                                                               tr.temperature, tr.beta)
    lora, lora_rank, use_vllm, vllm_mode, enable_thinking = tr.lora, tr.lora_rank, tr.use_vllm, tr.vllm_mode, tr.enable_thinking
    rewards, loss_type, num_iterations = dict(tr.rewards), tr.loss_type, tr.num_iterations
    scale_rewards, warmup_ratio, weight_average = tr.scale_rewards, tr.warmup_ratio, tr.weight_average
    vllm_server_host, vllm_server_port = tr.vllm_server_host, tr.vllm_server_port

    final = out_dir / "model"
    if _checkpoint_done(final):
        return _read_report(final)
    quiet_libraries()
    rewards = rewards or {"default": 1.0}
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    cuda = _cuda()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto" if cuda else None)
    _cpu_threads(model, cpu_threads)
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules="all-linear", task_type="CAUSAL_LM")
    options = dict(
        **_common_arguments(out_dir, steps, learning_rate, steps // 3, seed, model),
        per_device_train_batch_size=prompts_per_step * generations,
        num_generations=generations,
        max_completion_length=max_completion_length,
        temperature=temperature,
        beta=beta,
        logging_steps=1,
        use_vllm=use_vllm,
        reward_weights=[1.0],  # the one StageReward already weighs the components
        loss_type=loss_type,
        num_iterations=num_iterations,
        scale_rewards=scale_rewards,
        warmup_steps=round(warmup_ratio * steps),
    )
    if not save:
        options["save_strategy"] = "no"
    if use_vllm:
        options["vllm_mode"] = vllm_mode
        if vllm_mode == "server":
            options.update(vllm_server_host=vllm_server_host, vllm_server_port=vllm_server_port)
    if style.chat:
        options["chat_template_kwargs"] = {"enable_thinking": enable_thinking}
    timer = _Progress.make(f"GRPO {out_dir.name}", steps)
    reward = StageReward(rewards, generations, scale_rewards)
    resume_from = _latest_trainer_checkpoint(out_dir / "trainer")
    if resume_from and (Path(resume_from) / SIGNAL_FILE).exists():
        signal_path = Path(resume_from) / SIGNAL_FILE
        _load_signal(reward, _read_mark(signal_path, "the stage's reward tallies"), str(signal_path))
    callbacks = [timer, signal_saving_callback(reward)] + ([weight_average_callback(weight_average)] if weight_average else [])
    trainer_class = greedy_member_trainer() if tr.greedy_member else GRPOTrainer
    if tr.failure_credit:
        trainer_class = failure_credit_trainer(trainer_class)
    reward_funcs: list[Any] = [reward]  # a callable object: TRL's annotation names plain functions
    trainer = trainer_class(model=model, reward_funcs=reward_funcs, args=GRPOConfig(**options),
                          train_dataset=grpo_dataset(items, style), processing_class=tokenizer,
                          peft_config=peft_config, callbacks=callbacks)
    _quiet(trainer)
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.perf_counter() - start
    trained: Any = trainer.model  # set once trained (transformers types it Optional, peft's methods untyped)
    trainable = sum(p.numel() for p in trained.parameters() if p.requires_grad)
    if lora:
        trainer.model = trained = trained.merge_and_unload()  # a merged model loads like any other checkpoint
    if save and lora and is_main_process():
        trained.save_pretrained(str(final))
    elif save and not lora:
        trainer.save_model(str(final))  # TRL writes on the main process only
    if save and is_main_process():
        tokenizer.save_pretrained(str(final))
        save_checkpoint_style(final, style.name)
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]

    def mean_of(key: str):
        values = [entry[key] for entry in logs if key in entry]
        return sum(values) / len(values) if values else None

    figures = {
        "first_step_seconds": timer.times[0] if timer.times else None,
        "later_step_seconds": (sum(timer.times[1:]) / len(timer.times[1:])) if len(timer.times) > 1 else None,
        "parameters": sum(p.numel() for p in trained.parameters()),
        "trainable_parameters": trainable,
        "reward_std": mean_of("reward_std"),
        "reward_first": logs[0]["reward"] if logs else None,
        "reward_last": logs[-1]["reward"] if logs else None,
    }
    if tr.failure_credit:
        figures["failure_credit_localized"] = mean_of("failure_credit/localized")
    info = TrainingReport(
        steps=steps, seconds=seconds, step_seconds=(sum(timer.times) / len(timer.times)) if timer.times else None,
        reward_mean=mean_of("reward"), zero_variance_share=mean_of("frac_reward_zero_std"),
        completion_tokens_mean=mean_of("completions/mean_length"),
        signal=reward.signal(), figures=figures)
    if save and is_main_process():
        _mark_checkpoint(final, info.to_dict())
    _release(trainer)
    return info


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


def _best_valid_plans(items: Sequence[LabelledInstance], plans: Sequence, generations: int,
                      *signals, outcomes: dict[str, list[int]] | None = None) -> tuple[list, RoundFigures]:
    """For each instance (``generations`` consecutive samples each), the best valid sampled plan or None.

    Best = least makespan, then least sum of costs, then fewest written actions. Returns the kept plans per
    instance and the round's figures: sampled valid rate (the reward mean of a 0/1 reward), the share of
    instances whose samples all agree (all valid or all invalid: a GRPO group with zero reward variance), and
    the share of instances with at least one valid sample (the ones that teach anything), and for the instances
    that need a wait (when there are any) their number, sampled valid rate and how many kept a plan. Each of ``signals``
    (``policy.rewards.StageReward``) tallies each instance's samples as one group of the 0/1 valid reward: the
    stage's training signal per map size, as a GRPO stage records it. ``outcomes`` (when given) gains each
    instance's own ``[valid samples, samples]``, keyed by its content key in hex (added up over repeats)."""
    import numpy as np

    from policy.rollout import judge_answers

    verdicts = judge_answers([item for item in items for _ in range(generations)], plans)
    valid, makespan, cost = verdicts.valid, verdicts.makespan, verdicts.sum_of_costs
    if generations >= 2 and len(items):
        keys = [group_key(item.instance) for item in items]
        for signal in signals:
            signal.record_groups(keys, valid, valid)
    kept: list[JointPlan | None] = []  # per instance, its best valid sampled plan
    agree = 0
    for index in range(len(items)):
        lo, hi = index * generations, (index + 1) * generations
        group = valid[lo:hi]
        agree += int(group.all() or not group.any())
        if outcomes is not None:
            tally = outcomes.setdefault(items[index].instance.content_key().hex(), [0, 0])
            tally[0] += int(group.sum())
            tally[1] += len(group)
        choices = [j for j in range(lo, hi) if valid[j]]
        if not choices:
            kept.append(None)
            continue
        best = min(choices, key=lambda j: (makespan[j], cost[j], int(plans[j].lengths.sum()), j))
        kept.append(plans[best])
    figures = RoundFigures(sampled_valid_rate=float(valid.mean()) if len(valid) else 0.0,
                           zero_variance_share=agree / max(len(items), 1),
                           solved_share=sum(plan is not None for plan in kept) / max(len(items), 1))
    waiting = [index for index, item in enumerate(items) if item.needs_wait]
    if waiting:  # the skill apart: how often the samples solve the instances that need a wait
        rows = np.asarray(valid[:len(items) * generations], bool).reshape(len(items), generations)[waiting]
        figures = replace(figures, needs_wait=len(waiting), needs_wait_sampled_valid_rate=float(rows.mean()),
                          needs_wait_kept=int(rows.any(axis=1).sum()))
    return kept, figures


def rft_stage(training, model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *,
              seed: int, cpu_threads: int | None = None, save: bool = True) -> TrainingReport:
    """One rejection-sampling fine-tuning stage (expert iteration): RL with a filtered positive signal.

    The generation budget is GRPO's at equal ``steps``: ``steps x prompts_per_step`` prompts, ``generations``
    samples each at ``temperature``. They are spent in ``rounds`` rounds; in each, the current checkpoint samples
    its share of the stage's instances, the plan judge keeps each instance's best valid sample (no solver plan is
    ever used), and TRL's ``SFTTrainer`` trains on the kept (prompt, own plan) pairs for ``epochs`` passes at
    ``learning_rate`` (cosine to 0 within the round); a round that keeps fewer than ``rft_min_kept`` plans does
    not fine-tune (a handful of plans, passed over many times, is over-fitted). Each round's checkpoint is saved
    under ``out_dir/round-NN`` and skipped on resume; the last one becomes ``out_dir/model``. Returns the same metric
    keys as :func:`grpo_stage` (``reward_mean`` is the sampled valid rate, ``zero_variance_share`` the share of
    instances whose samples all agree, ``signal`` each map size's groups of samples scored like GRPO's groups
    of a 0/1 valid reward, for the engineer, with ``rounds``: each round's own ``by_size``, in order) plus
    per-round figures; each sampled instance's own ``[valid, samples]`` goes to ``out_dir/outcomes.json``
    (:data:`OUTCOMES_FILE`)."""
    import math
    import random
    import shutil

    from policy.backends import HFBackend, Sampling
    from policy.policies import ModelPolicy

    tr = training
    steps, prompts_per_step, generations = tr.steps, tr.prompts_per_step, tr.generations
    max_completion_length, learning_rate, temperature = tr.max_completion_length, tr.learning_rate, tr.temperature
    rounds, epochs, batch_size = tr.rft_rounds, tr.rft_epochs, tr.rft_batch_size
    final = out_dir / "model"
    if _checkpoint_done(final):
        return _read_report(final)
    quiet_libraries()
    total_prompts = steps * prompts_per_step
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    chosen = [items[order[i % len(order)]] for i in range(total_prompts)]
    per_round = math.ceil(total_prompts / rounds)
    signal = StageReward({"valid": 1.0}, generations)  # the stage's groups per map size, for the engineer
    outcomes: dict[str, list[int]] = {}  # each instance's own samples, for an engineer that scores instances
    current = model_dir
    figures: list[RoundFigures] = []
    start = time.perf_counter()
    for round_index in range(rounds):
        round_items = chosen[round_index * per_round:(round_index + 1) * per_round]
        if not round_items:
            break
        folder = out_dir / f"round-{round_index + 1:02d}"
        done = folder / "model"
        if _checkpoint_done(done):
            finished, mark = _read_round_mark(done / "checkpoint_done.json")
            figures.append(finished)
            # the tallies up to and including this round
            _load_signal(signal, mark.get("signal_state") or {}, f"{done}/checkpoint_done.json")
            for key, (valid, samples) in (mark.get("outcomes") or {}).items():
                outcomes[key] = [valid, samples]  # cumulative up to this round, as the tallies are
            current = str(done)
            continue
        began = time.perf_counter()
        policy = ModelPolicy(f"hf:{current}", style,
                             Sampling(max_new_tokens=max_completion_length, temperature=temperature,
                                      seed=seed * 1000 + round_index, batch_size=64),
                             backend=HFBackend(current, cpu_threads=cpu_threads))
        repeated = [item for item in round_items for _ in range(generations)]
        plans = policy.answer(repeated, seed=seed).plans
        # the stage's tallies, and this round's alone: how each size's sampled rate moves from round to round
        round_signal = StageReward({"valid": 1.0}, generations)
        kept, round_figures = _best_valid_plans(round_items, plans, generations, signal, round_signal,
                                                outcomes=outcomes)
        pairs = [replace(item, plan=plan) for item, plan in zip(round_items, kept) if plan is not None]
        round_figures = replace(round_figures, round=round_index + 1, prompts=len(round_items), kept=len(pairs),
                                sample_seconds=time.perf_counter() - began,
                                signal_by_size=round_signal.signal().by_size if round_signal.state() else None)
        if len(pairs) >= tr.rft_min_kept:
            sft_steps = max(math.ceil(len(pairs) * epochs / batch_size), 1)
            # A fresh Adam moves every weight by about the learning rate per step whatever its gradient; a
            # linear warm-up over the first tenth keeps a converged checkpoint from being knocked off its optimum.
            info = warm_start(current, pairs, style, folder, steps=sft_steps, batch_size=batch_size,
                              learning_rate=learning_rate, max_length=512, seed=seed + round_index,
                              cpu_threads=cpu_threads, warmup_steps=sft_steps // 10,
                              label=f"RFT {out_dir.name} round {round_index + 1}/{rounds}")
            round_figures = replace(round_figures, sft_steps=sft_steps, last_loss=info.figures.get("last_loss"))
            shutil.rmtree(folder / "trainer", ignore_errors=True)
        else:  # nothing (or too little) valid to learn from: the checkpoint stays as it was
            if pairs:
                print(f"RFT {out_dir.name} round {round_index + 1}/{rounds}: {len(pairs)} kept plans, fewer than "
                      f"training.rft_min_kept={tr.rft_min_kept}: no fine-tuning this round", file=sys.stderr)
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copytree(current, done, dirs_exist_ok=True, ignore=shutil.ignore_patterns("checkpoint_done.json"))
            round_figures = replace(round_figures, sft_steps=0, last_loss=None)
        _mark_checkpoint(done, {"round": round_figures.to_dict(), "signal_state": signal.state(),
                                "outcomes": outcomes}, _round_figures)
        figures.append(round_figures)
        current = str(done)
    seconds = time.perf_counter() - start

    round_sides = tuple(f.signal_by_size for f in figures if f.signal_by_size)  # each round's own groups per side
    info = TrainingReport(
        steps=steps, seconds=seconds, step_seconds=seconds / max(steps, 1),
        reward_mean=mean_figure(figures, "sampled_valid_rate"),
        zero_variance_share=mean_figure(figures, "zero_variance_share"),
        signal=replace(signal.signal(trainer="rft"), rounds=round_sides) if signal.state() else None,
        figures={"trainer": "rft", "solved_share": mean_figure(figures, "solved_share"),
                 "rounds": [f.to_dict() for f in figures],
                 "reward_first": figures[0].sampled_valid_rate if figures else None,
                 "reward_last": figures[-1].sampled_valid_rate if figures else None})
    if save:
        final.mkdir(parents=True, exist_ok=True)
        shutil.copytree(current, final, dirs_exist_ok=True, ignore=shutil.ignore_patterns("checkpoint_done.json"))
        atomic_write(out_dir / OUTCOMES_FILE, json.dumps({"outcomes": outcomes}, sort_keys=True))
        _mark_checkpoint(final, info.to_dict())
    return info


def train_stage(training, model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *,
                seed: int, cpu_threads: int | None = None, save: bool = True) -> TrainingReport:
    """One stage with the trainer ``training.trainer`` names (a ``curriculum.config.Training``)."""
    return STAGE_TRAINERS[training.trainer](training, model_dir, items, style, out_dir, seed=seed,
                                            cpu_threads=cpu_threads, save=save)


# The stage trainers by ``training.trainer`` name; each takes the run config's ``Training`` section whole.
STAGE_TRAINERS = {"grpo": grpo_stage, "rft": rft_stage}
