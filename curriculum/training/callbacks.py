"""The TrainerCallbacks a GRPO stage passes TRL beside its progress line: one saves the stage's reward tallies
(:data:`SIGNAL_FILE`) into every checkpoint TRL saves and restores them when a run resumes from one, one keeps an
exponential moving average of the trained weights (:data:`AVERAGE_FILE`, also saved with every checkpoint). Both
files let a resumed stage continue where the killed one stopped. The tallies' file is written and read here only:
``mapf-lake train``'s GRPO stages and the TRL plug-in's ``CurriculumCallback`` both go through
:func:`save_reward_state` and :func:`restore_reward_state`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from curriculum.loop.records import read_record, write_record
from policy.rewards import StageReward
from simulator.errors import ConfigError

SIGNAL_FILE = "stage_signal.json"  # the StageReward tallies, beside each TRL checkpoint
_WHAT = "reward tallies beside the TRL checkpoint"


def load_reward_state(reward: StageReward, state: Any, where: str) -> None:
    """``reward.load_state(state)`` (which checks everything before it loads anything), its ConfigError naming
    ``where`` (the file the state was read from)."""
    try:
        reward.load_state(state)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error.field}", error.value, error.allowed) from None


def _check_tallies(data: dict, where: str) -> None:
    load_reward_state(StageReward({"default": 1.0}, 1), data, where)  # the reader, on a reward that is thrown away


def save_reward_state(checkpoint: Path, reward: StageReward) -> None:
    """Write ``reward``'s tallies beside the TRL checkpoint folder ``checkpoint`` (checked by their reader first)."""
    write_record(checkpoint / SIGNAL_FILE, reward.state(), _WHAT, read=_check_tallies)


def restore_reward_state(checkpoint: Path, reward: StageReward) -> bool:
    """Load the tallies saved beside ``checkpoint`` into ``reward`` (False when there is no file: a checkpoint of
    a stage without a reward). A damaged file is one ConfigError naming it, and ``reward`` keeps its counts."""
    path = checkpoint / SIGNAL_FILE
    if not (path.exists() or path.is_symlink()):
        return False
    load_reward_state(reward, read_record(path, _WHAT), str(path))
    return True


def reward_state_callback(reward: StageReward):
    """A TrainerCallback that saves ``reward``'s tallies into every checkpoint TRL saves and, when the trainer
    resumes from a checkpoint, restores them before the first step, so a resumed stage continues its per-size
    training signal instead of starting the counts again."""
    from transformers import TrainerCallback

    class RewardState(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if state.global_step:
                restore_reward_state(Path(args.output_dir) / f"checkpoint-{state.global_step}", reward)

        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                save_reward_state(folder, reward)

    return RewardState()


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
