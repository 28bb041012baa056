"""What every trainer job of a stage shares: the libraries' quiet settings, the device checks (CUDA, a small model
on a CPU, activation checkpointing), the checkpoint marks a finished checkpoint or round keeps and a resume reads
back (written through :func:`curriculum.loop.records.write_record`, read through :mod:`simulator.files`), the TRL
trainer arguments the jobs have in common, the live progress line, and the datasets (prompt-completion rows for
``SFTTrainer``, prompt rows with the reward's columns for ``GRPOTrainer``).

The jobs themselves live one per module: :mod:`curriculum.training.sft` (the supervised warm start),
:mod:`curriculum.training.grpo` and :mod:`curriculum.training.rft`; the callbacks they pass TRL are in
:mod:`curriculum.training.callbacks`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from curriculum.loop.rows import grpo_row, sft_row
from curriculum.loop.records import MAX_RECORD_BYTES, RoundFigures, TrainingReport, read_record, write_record
from policy.prompts import PromptStyle
from simulator.files import load_json, read_text_bounded
from simulator.generator import LabelledInstance


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


def _read_mark(path: Path, what: str) -> dict[str, Any]:
    """The JSON object a stage wrote in its own folder (a checkpoint mark, the reward tallies beside a TRL
    checkpoint), read back on resume through :mod:`simulator.files` (a regular file, at most
    ``MAX_RECORD_BYTES``, bounded numbers and nesting); anything else is a ConfigError naming the file."""
    return load_json(read_text_bounded(path, MAX_RECORD_BYTES, what), str(path), what, object_only=True)


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
    """Prompt-completion rows (:func:`curriculum.loop.rows.sft_row`)."""
    from datasets import Dataset

    return Dataset.from_list([sft_row(item, style) for item in items])


def grpo_dataset(items: Sequence[LabelledInstance], style: PromptStyle):
    """Prompt rows with the columns the reward reads (:func:`curriculum.loop.rows.grpo_row`)."""
    from datasets import Dataset

    return Dataset.from_list([grpo_row(item, style) for item in items])


def _format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


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
