"""The supervised warm start: TRL's ``SFTTrainer`` on prompt-completion pairs, the solver's optimal plans before
the first stage (``curriculum.training.run``) or a policy's own kept plans in a rejection-sampling round
(:mod:`curriculum.training.rft`). Saves model + tokenizer together and marks the checkpoint finished, so a resumed
run skips it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from curriculum.loop.distributed import is_main_process
from curriculum.loop.records import TrainingReport
from curriculum.training.common import (_checkpoint_done, _common_arguments, _latest_trainer_checkpoint,
                                        _mark_checkpoint, _Progress, _quiet, _read_report, quiet_libraries,
                                        sft_dataset)
from policy.backend_hf import set_cpu_threads
from policy.models import load_causal_lm
from policy.prompts import PromptStyle, save_checkpoint_style
from simulator.generator import LabelledInstance


def warm_start(model_dir: str, items: Sequence[LabelledInstance], style: PromptStyle, out_dir: Path, *, steps: int,
               batch_size: int, learning_rate: float, max_length: int, seed: int, cpu_threads: int | None = None,
               warmup_steps: int = 0, label: str = "warm start") -> TrainingReport:
    """Supervised fine-tuning on the items' plans (the solver's optimal ones, or a policy's own kept ones); saves
    model + tokenizer to ``out_dir/model``. Resumable. ``label`` names the progress lines."""
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    final = out_dir / "model"
    if _checkpoint_done(final):
        return _read_report(final)
    quiet_libraries()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = load_causal_lm(model_dir)
    set_cpu_threads(model, cpu_threads)
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
