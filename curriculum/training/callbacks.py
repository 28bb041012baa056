"""The TrainerCallbacks a GRPO stage passes TRL beside its progress line: one saves the stage's reward tallies
(:data:`SIGNAL_FILE`) into every checkpoint TRL saves, one keeps an exponential moving average of the trained
weights (:data:`AVERAGE_FILE`, also saved with every checkpoint). Both files let a resumed stage continue where the
killed one stopped."""

from __future__ import annotations

import json
import os
from pathlib import Path

from policy.rewards import StageReward
from simulator.atomic import atomic_write


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
