"""The environment engineer in a plain TRL GRPO script.

One ``GRPOTrainer`` trains for ``stages x stage_steps`` steps on rows drawn from the curriculum's current stage;
every ``stage_steps`` steps the curriculum's callback answers the evidence set with the trainer's own model, the
engineer reads the failures and writes the next stage's config, and the very next optimizer step trains on rows of
that config (``attach`` draws each batch's rows when the trainer takes it). The run folder is the same as
``mapf-lake train`` writes (``mapf-lake report RUN`` reads it), and the test set is scored once at the end.

CPU, 2 cores, the embedded tiny model (a few minutes with the defaults)::

    python examples/trl_grpo_curriculum.py --preset demo --arm gap-band --stage-steps 40

Which path for what: this one-trainer path is GRPO whatever the preset's own stage trainer is. ``demo`` and
``small`` train their stages by rejection sampling (``training.trainer: rft``, learning rate 5e-4); under GRPO that
learning rate lowers a warm-started model, so the one-trainer path takes GRPO's default (5e-5) unless
``--set training.learning_rate=...`` says otherwise, and records ``training.trainer: grpo`` in its run config.
To reproduce ``mapf-lake train``'s figures use ``--per-stage``: each stage trained from the last checkpoint by the
preset's own stage trainer (``training.trainer``), as ``mapf-lake train`` does; from the same warm start it makes
the same decisions as ``mapf-lake train --preset demo --compare --arm gap-band``::

    python examples/trl_grpo_curriculum.py --preset demo --arm gap-band --per-stage --model runs/demo-gap-band/warm_start/model

A Hugging Face model on GPUs (TRL's own scale-out: accelerate, DeepSpeed, ``trl vllm-serve``)::

    accelerate launch --num_processes 8 examples/trl_grpo_curriculum.py --preset qwen3-4b-nothink \\
        --model Qwen/Qwen3-4B --stage-steps 250 --bf16

``--model FOLDER`` starts from a checkpoint (e.g. a ``mapf-lake train`` run's ``warm_start/model``); without it an
embedded model is created and warm-started with TRL's ``SFTTrainer`` on the solver's plans. The run config records
what makes the run itself: ``training.steps`` (the stage length), ``model: hf:FOLDER`` (the start checkpoint),
``training.trainer`` and the arm label ``ARM+trl-grpo`` / ``ARM+per-stage`` (so ``mapf-lake compare`` keeps the
example's runs apart from ``mapf-lake train``'s). The same command resumes a killed run from its last TRL
checkpoint (trained on exactly the rows an uninterrupted run would), scores a run killed in its final evaluation,
reads a finished run's table back, and refuses another ``--stage-steps`` for an existing run with one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from curriculum.commands import default_arms
    from curriculum.config import PRESETS, parse_overrides, preset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="demo", choices=sorted(PRESETS), help="run preset whose sets, configs and engineer are used")
    parser.add_argument("--arm", default=None, choices=list(default_arms()), help="a compared arm of mapf-lake train --compare by name (e.g. "
                        "gap-band, fixed): its engineer and options")
    parser.add_argument("--engineer", default=None, help="engineer spec (default: the arm's or the preset's), e.g. "
                        "gap, rule, fixed")
    parser.add_argument("--per-stage", action="store_true", help="train each stage with the preset's own stage "
                        "trainer from the last checkpoint (as mapf-lake train does) instead of one GRPOTrainer")
    parser.add_argument("--model", default=None, help="start checkpoint folder or hub name (default: warm-start "
                        "the preset's embedded model)")
    parser.add_argument("--stage-steps", type=int, default=None, help="optimizer steps per stage (default: the "
                        "preset's training.steps)")
    parser.add_argument("--name", default="trl-grpo", help="run folder name")
    parser.add_argument("--output-dir", default="runs", help="where the run folder goes")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="run-config override")
    parser.add_argument("--bf16", action="store_true", help="train in bf16 (GPU)")
    parser.add_argument("--report-to", action="append", default=[], metavar="NAME", help="a logger of the "
                        "trainer's (tensorboard, wandb, ...; repeat for several): the curriculum's figures join each "
                        "boundary step's entry (default: none)")
    parser.add_argument("--progress", action="store_true", help="show TRL's progress bar and per-step dicts "
                        "(default: off, so the curriculum's boundary lines stand out)")
    args = parser.parse_args(argv)

    from curriculum.loop.curriculum import Curriculum
    from curriculum.plugins.trl_hooks import attach, curriculum_dataset
    from policy.rewards import StageReward
    from simulator.errors import ConfigError

    try:
        overrides = {"name": args.name, "output_dir": args.output_dir, **parse_overrides(args.set)}
        if args.arm is not None:
            overrides = {**default_arms()[args.arm], "arm": args.arm, **overrides}
        if args.engineer:
            overrides["engineer.spec"] = args.engineer
        base = preset(args.preset).with_overrides(**overrides)
        # What makes this run itself, recorded in its manifest: the stage length, the start checkpoint, the trainer
        # and an arm label that names the path (so compare keeps it apart from mapf-lake train's run of the arm).
        identity: dict = {"arm": f"{base.arm or base.engineer.spec}+{'per-stage' if args.per_stage else 'trl-grpo'}"}
        if args.stage_steps is not None:
            if args.stage_steps < 1:
                raise ConfigError("--stage-steps", args.stage_steps, "an integer >= 1")
            identity["training.steps"] = args.stage_steps
        if args.model:
            identity["model"] = f"hf:{args.model}"
        if not args.per_stage and base.training.trainer != "grpo":
            # The preset's learning rate was set for its own stage trainer (demo: rejection sampling, 5e-4, which
            # lowers a warm-started model under GRPO); the one-trainer path takes the GRPO default unless --set.
            identity["training.trainer"] = "grpo"
            if not any(item.startswith("training.learning_rate=") for item in args.set):
                identity["training.learning_rate"] = GRPO_LEARNING_RATE
        config = base.with_overrides(**identity)
        tr = config.training
        stage_steps = tr.steps
        curriculum = Curriculum(config).open()
        start = args.model or warm_start(curriculum)
        latest = curriculum.begin(start)  # a resumed run: the last finished stage's checkpoint (--per-stage)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    if curriculum.is_main_process:
        from curriculum.loop.folder import read_summary

        start_dir = curriculum.folder.start_dir()
        evidence = read_summary(start_dir / "summary.json").failures
        curriculum.log(f"start model {start}: evidence valid {evidence.valid_rate:.1%}, optimal "
                       f"{evidence.optimal_rate:.1%} ({start_dir.name}/); {config.stages} stages of {stage_steps} "
                       f"steps, arm {config.arm}")
    if curriculum.finished:
        return finish(curriculum, latest if args.per_stage else None)
    if args.per_stage:
        return per_stage(curriculum, latest)
    from transformers import AutoTokenizer
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOTrainer

    # one trainer from the start model; a resumed run's weights come from TRL's checkpoint
    tokenizer = AutoTokenizer.from_pretrained(str(start))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    reward = StageReward(dict(tr.rewards), tr.generations, tr.scale_rewards)
    with quiet_trl():
        grpo = grpo_config(config, stage_steps, args)
        trainer = GRPOTrainer(model=str(start), reward_funcs=[reward], args=grpo, processing_class=tokenizer,
                              train_dataset=curriculum_dataset(curriculum))
    if not args.progress:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # the per-step dicts; the boundary lines are the log
    attach(trainer, curriculum, stage_steps, reward=reward)
    with quiet_trl():
        trainer.train(resume_from_checkpoint=get_last_checkpoint(grpo.output_dir) if Path(grpo.output_dir).is_dir()
                      else None)
    final = config.run_dir / "final-model"
    trainer.save_model(str(final))  # the main process writes
    if curriculum.is_main_process:
        tokenizer.save_pretrained(str(final))
    return finish(curriculum, final)


def grpo_config(config, stage_steps: int, args):
    """The one trainer's GRPOConfig from the run config's ``training`` section."""
    from trl import GRPOConfig

    tr = config.training
    return GRPOConfig(
        output_dir=str(config.run_dir / "trl"), max_steps=config.stages * stage_steps, learning_rate=tr.learning_rate,
        per_device_train_batch_size=tr.prompts_per_step * tr.generations, num_generations=tr.generations,
        max_completion_length=tr.max_completion_length, temperature=tr.temperature, beta=tr.beta,
        loss_type=tr.loss_type, scale_rewards=tr.scale_rewards, logging_steps=1, save_steps=stage_steps,
        save_total_limit=2, report_to=args.report_to, seed=config.seed, bf16=args.bf16, use_cpu=not _cuda(),
        dataloader_num_workers=0, disable_tqdm=not args.progress, shuffle_dataset=False)


def finish(curriculum, model) -> int:
    """The test-set score of a run whose stages are all finished: ``model``, else the final model the one-trainer
    path saved, else its last TRL checkpoint (a run killed after its last boundary). A scored run reads its table
    back."""
    from transformers.trainer_utils import get_last_checkpoint

    config = curriculum.config
    if model is None:
        final, checkpoints = config.run_dir / "final-model", config.run_dir / "trl"
        if (final / "config.json").exists():
            model = final
        elif checkpoints.is_dir() and get_last_checkpoint(str(checkpoints)):
            model = get_last_checkpoint(str(checkpoints))
        else:
            print(f"error: {config.run_dir}: every stage is finished but neither final-model/ nor a TRL checkpoint "
                  f"is there to score", file=sys.stderr)
            return 2
    if (config.run_dir / "final" / "table.json").exists():
        curriculum.log(f"curriculum: {config.run_dir} is finished and scored; its test-set table is read back")
    curriculum.evaluate(str(model))
    if curriculum.is_main_process:
        print(f"run folder: {config.run_dir} (mapf-lake report {config.run_dir})")
    return 0


GRPO_LEARNING_RATE = 5e-5
"""The one-trainer path's learning rate when the preset's own stage trainer is not GRPO (``Training``'s default)."""


class quiet_trl:
    """TRL's and transformers' warnings and info lines off while the trainer is built and trains, as
    ``mapf-lake train`` keeps them, so the curriculum's boundary lines stand out (errors still show)."""

    def __enter__(self):
        import warnings

        from transformers.utils import logging as hf_logging

        self._level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")
        return self

    def __exit__(self, *exc):
        from transformers.utils import logging as hf_logging

        self._warnings.__exit__(*exc)
        hf_logging.set_verbosity(self._level)
        return False


def per_stage(curriculum, model) -> int:
    """Each stage trained by the preset's stage trainer (``training.trainer``) from the last checkpoint, on the
    stage's instances, exactly as ``mapf-lake train`` trains it; the checkpoint goes to the stage boundary."""
    from curriculum.training.run import train_next_stage

    while not curriculum.finished:
        model = train_next_stage(curriculum, str(model), log=curriculum.log)
    return finish(curriculum, model)


def warm_start(curriculum) -> str:
    """The embedded model, created and fine-tuned with TRL's SFTTrainer on the solver's plans of the warm start's
    instances (training set, stage 0): the preset's ``warm_start`` settings."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from curriculum.loop.distributed import wait_for_file
    from policy.models import init_tiny_model
    from policy.prompts import save_checkpoint_style

    config, ws = curriculum.config, curriculum.config.warm_start
    folder = config.run_dir / "warm_start" / "model"
    if (folder / "model.safetensors").exists():
        return str(folder)
    initial = config.run_dir / "model-init"
    if curriculum.is_main_process and not (initial / "model.safetensors").exists():
        init_tiny_model(initial, seed=config.seed, shape=config.model)  # once; the other processes wait for it
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        wait_for_file(initial / name)
    style = curriculum.style
    rows = [{"prompt": style.prompt(item.instance), "completion": style.write_answer(item.instance, item.plan)}
            for item in curriculum.warm_start_instances()]
    tokenizer = AutoTokenizer.from_pretrained(str(initial))
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(str(initial)), processing_class=tokenizer,
                         train_dataset=Dataset.from_list(rows),
                         args=SFTConfig(output_dir=str(folder.parent / "trainer"), max_steps=ws.steps,
                                        per_device_train_batch_size=ws.batch_size, learning_rate=ws.learning_rate,
                                        lr_scheduler_type="cosine", max_length=ws.max_length, report_to=[],
                                        seed=config.seed, use_cpu=not _cuda(), disable_tqdm=True, save_strategy="no"))
    trainer.train()
    trainer.save_model(str(folder))  # the main process writes
    if curriculum.is_main_process:
        tokenizer.save_pretrained(str(folder))
        save_checkpoint_style(folder, style.name)
    return str(folder)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
