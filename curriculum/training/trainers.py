"""The stage trainers by name: ``training.trainer`` (``curriculum.config.Training``) picks the job a stage runs,
GRPO (:mod:`curriculum.training.grpo`) or rejection-sampling fine-tuning (:mod:`curriculum.training.rft`).

Nothing here decides a curriculum: the stage loop (``curriculum.training.run``) passes instances in and gets a checkpoint
folder (model + tokenizer, always saved together) and a :class:`curriculum.loop.records.TrainingReport` out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from curriculum.loop.records import TrainingReport
from curriculum.training.grpo import grpo_stage
from curriculum.training.rft import rft_stage
from policy.prompts import PromptStyle
from simulator.generator import LabelledInstance


def train_stage(training, model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *,
                seed: int, cpu_threads: int | None = None, save: bool = True) -> TrainingReport:
    """One stage with the trainer ``training.trainer`` names (a ``curriculum.config.Training``)."""
    return STAGE_TRAINERS[training.trainer](training, model_dir, items, style, out_dir, seed=seed,
                                            cpu_threads=cpu_threads, save=save)


# The stage trainers by ``training.trainer`` name; each takes the run config's ``Training`` section whole.
STAGE_TRAINERS = {"grpo": grpo_stage, "rft": rft_stage}
