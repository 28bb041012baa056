"""The stage loop: generate -> train (TRL GRPO) -> validate -> replays -> failure summary -> engineer -> next config.

Run folder (``RunConfig.run_dir``)::

    manifest.json            run config, package versions, seeds, git commit, created
    run.yaml                 the run config
    model-init/              the embedded tiny model (model: tiny), created at start
    warm_start/model/        supervised warm start checkpoint (model + tokenizer)
    warm_start/validation.mlr, warm_start/summary.json   the warm-started model on the validation set
    warm_start/decision.json the engineer's choice of stage 1's config (only with ``engineer.plan_first``)
    stage-01/config.yaml     the stage config trained on
    stage-01/replay.jsonl    the instances the previous decision handed the stage besides its config's (only when
                             there are any: the ``replay`` and ``failures`` engineers'); the stage generates
                             ``samples`` minus their number from its config
    stage-01/model/          the stage's checkpoint (model + tokenizer); stage-01/trainer/ TRL's own checkpoints
    stage-01/validation.mlr  validation replays;  stage-01/summary.json  their failure summary
    stage-01/decision.json   the engineer's decision record (raw answer, proposal, repairs, final config, diff)
    stage-01/stage.json      the stage record, written last: a stage is complete exactly when this file exists
    metrics.jsonl            one line per completed stage (rewritten atomically)
    final/                   evaluation replays of the last checkpoint;  final/table.json
    final-stage-NN/          after an extension (below): the final evaluation of the run's earlier last stage

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

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from curriculum.config import RunConfig, load_run_config, save_run_config
from curriculum.loop.distributed import is_main_process, wait_for_file
from policy.prompts import get_style, save_checkpoint_style
from replays.format import ReplayHeader
from engineer import HistoryEntry, StageEvidence, summarize_episodes
from engineer.decision import EngineerDecision
from engineer.evidence import SampledPass
from curriculum.loop.records import StageDecision, StageRecord, StageScores, read_record
from curriculum.loop.sets import RunSets, training_seed
from simulator.atomic import atomic_folder, atomic_write
from simulator.config import StageConfig, format_config_text, save_config
from simulator.errors import ConfigError, short_repr
from simulator.generator import GeneratedStage, LabelledInstance, to_jsonl
from simulator.text import counted

Log = Callable[[str], None]


def _log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _write_json(path: Path, data) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("mapf-frozenlake", "numpy", "numba", "torch", "transformers", "trl", "accelerate", "peft", "datasets"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _machine() -> dict:
    """What the run ran on, for telling installations apart (no user or host names)."""
    return {"system": platform.system(), "machine": platform.machine(), "processor": platform.processor() or None,
            "cpus": os.cpu_count()}


def stage_folder(run_dir: Path, stage: int) -> Path:
    """A run's folder of stage ``stage`` (1-based)."""
    return run_dir / f"stage-{stage:02d}"


def stage_seed(run_seed: int, stage: int) -> int:
    """Seed of stage ``stage``'s trainer and engineer (random streams of torch, numpy and the engineers, which
    want seeds below 2**32): fixed by the run seed, distinct per stage. The stage's *instances* take
    ``curriculum.loop.sets.training_seed``, in a domain no evidence or test seed shares."""
    return run_seed * 1000 + stage


# The run-folder protocol: 2 = three disjoint sets (curriculum.loop.sets): training seeds in their own domain, test and
# evidence instances excluded from training by content, the test set scored last. A folder of protocol 1 (no
# ``protocol`` in its manifest) trained on other instances: it is read by ``report``/``compare`` but not resumed.
RUN_PROTOCOL = 2


class Run:
    """One run folder; :meth:`execute` runs (or resumes) it to the end."""

    def __init__(self, config: RunConfig, log: Log = _log_to_stderr, siblings: Sequence[RunConfig] = ()) -> None:
        """``siblings``: the other arms of a comparison (same seed); a stage one of them already trained with the
        same settings and stage configs is copied instead of trained again (:func:`share_stage`)."""
        self.config = config
        self.dir = config.run_dir
        self.style = get_style(config.prompt_style)
        self.log = log
        self.siblings = tuple(siblings)
        self._vllm_engine: tuple[str, Any] | None = None  # (model folder, VLLMBackend) of the last validation

    # --- folders and records -------------------------------------------------------------------------------
    def stage_dir(self, stage: int) -> Path:
        return stage_folder(self.dir, stage)

    def completed_stages(self) -> list[StageRecord]:
        """The finished stages, 1.. in order, each with its checkpoint in this folder as it is now (a moved folder
        holds its models; the record names the path it was written under). A stage folder after an unfinished
        or missing stage raises ConfigError: the stages after a gap trained from a model the run no longer has,
        and resuming would train the gap again while reusing their validation and decisions."""
        records = []
        for stage in range(1, self.config.stages + 1):
            path = self.stage_dir(stage) / "stage.json"
            if not path.exists():
                self._refuse_a_gap_after(stage)
                break
            record = StageRecord.from_dict(read_record(path, "stage record"), str(path))
            records.append(replace(record, model=str(self.stage_dir(stage) / "model")))
        return records

    def _refuse_a_gap_after(self, unfinished: int) -> None:
        later = sorted(int(match.group(1)) for match in (re.fullmatch(r"stage-(\d+)", path.name)
                                                         for path in self.dir.glob("stage-*") if path.is_dir())
                       if match and int(match.group(1)) > unfinished)
        if later:
            missing = self.stage_dir(unfinished)
            what = f"{missing.name}/stage.json" if missing.exists() else f"{missing.name}/"
            raise ConfigError("run folder", str(self.dir), "stage folders 1..N without a gap (restore the missing "
                              "stage, or start a new run)", f"{what} is missing but {self.stage_dir(later[0]).name}/ "
                              "is there")

    @property
    def main(self) -> bool:
        """Under several processes (``accelerate launch``), only the main one generates validation answers, runs
        the engineer, evaluates and writes the run's records; the others take part in training only and read
        the records back (``wait_for_file``)."""
        return is_main_process()

    def _start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        manifest = self.dir / "manifest.json"
        if not self.main:
            wait_for_file(manifest)
        if manifest.exists():
            data = read_record(manifest, "run manifest", ("run_config",))
            if data.get("protocol") != RUN_PROTOCOL:
                raise ConfigError("run", str(self.dir), f"a run folder of protocol {RUN_PROTOCOL} (three disjoint "
                                  "instance sets); this one was made before it and its stages trained on other "
                                  "instances: start a new run (another --name), or read it with mapf-lake report")
            recorded = data["run_config"]
            if not isinstance(recorded, dict):
                raise ConfigError(f"{manifest}: run_config", type(recorded).__name__, "a mapping (the run config)")
            try:  # a run recorded before a field existed has that field's default, which is what it ran with
                recorded = RunConfig.from_dict(recorded).to_dict()
            except ConfigError:
                pass  # compared as written: the mismatch below names the folder
            # Where the folder is (output_dir/name) is not part of the run: a folder resumed by another spelling of
            # its path, or after a move, is the same run.
            placed = {"output_dir": None, "name": None}
            recorded = {**json.loads(json.dumps(recorded, default=str)), **placed}
            current = {**json.loads(json.dumps(self.config.to_dict(), default=str)), **placed}
            if recorded != current and {**recorded, "stages": current["stages"]} == current:
                self._extend(int(recorded["stages"]))
            elif recorded != current:
                differs = ", ".join(_differences(recorded, current)[:5])
                raise ConfigError("run", str(self.dir), "the same run config as its manifest records: resume the "
                                  "folder as it is (--resume RUN, alone or with --set stages=N), or start a new run "
                                  "(another name / output_dir)", f"differs in {differs}")
            self.completed_stages()  # a gap in the stages is refused now, before anything is trained
            return
        save_run_config(self.config, self.dir / "run.yaml")
        _write_json(manifest, {"protocol": RUN_PROTOCOL, "run_config": self.config.to_dict(), "versions": _versions(),
                               "machine": _machine(), "seed": self.config.seed,
                               "git_commit": _git_commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    def _extend(self, recorded_stages: int) -> None:
        """Give a run folder more stages than it was made with (``--resume RUN --set stages=N``, or a comparison
        rerun with a larger ``stages``): the finished stages are kept and the loop continues after them, exactly as
        a run made with N stages would (no engineer sees the stage count). The final evaluation of the earlier last
        stage is kept as ``final-stage-NN/``. Fewer stages than are finished: ConfigError, nothing is touched."""
        if not self.main:  # the main process extends the folder; the others only train
            return
        done = len(self.completed_stages())
        if self.config.stages < max(done, recorded_stages):
            raise ConfigError("stages", self.config.stages, f"at least {max(done, recorded_stages)}: the run folder "
                              f"{self.dir} was made with {counted(recorded_stages, 'stage')} and {done} are finished "
                              "(a run can be extended, not cut)")
        final, kept = self.dir / "final", self.dir / f"final-stage-{recorded_stages:02d}"
        if final.exists():
            if kept.exists():
                shutil.rmtree(kept)
            final.rename(kept)
        save_run_config(self.config, self.dir / "run.yaml")
        manifest = self.dir / "manifest.json"
        data = read_record(manifest, "run manifest", ("run_config",))
        data["run_config"] = self.config.to_dict()
        data.setdefault("extended", []).append({"from_stages": recorded_stages, "to_stages": self.config.stages,
                                                "git_commit": _git_commit(), "versions": _versions(),
                                                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        _write_json(manifest, data)
        self.log(f"{self.config.name}: extended from {recorded_stages} to {counted(self.config.stages, 'stage')}"
                 + (f" (the {recorded_stages}-stage final evaluation kept in {kept.name}/)" if kept.exists() else ""))

    # --- the model -----------------------------------------------------------------------------------------
    def initial_model(self) -> str:
        """Folder (or hub name) of the model before any training."""
        from policy.models import EMBEDDED_SHAPES, init_tiny_model

        if self.config.model in EMBEDDED_SHAPES:
            folder = self.dir / "model-init"
            if not self.main:
                while not _complete_model(folder):
                    time.sleep(2.0)
            if not _complete_model(folder):
                shutil.rmtree(folder, ignore_errors=True)  # a folder a kill left half-written before renames
                with atomic_folder(folder) as building:
                    init_tiny_model(building, seed=self.config.seed, shape=self.config.model)
                    save_checkpoint_style(building, self.style.name)
            return str(folder)
        kind, _, target = self.config.model.partition(":")
        if kind != "hf":
            raise ConfigError("model", self.config.model, "tiny, small, medium or hf:PATH_OR_NAME (training needs "
                              "transformers weights)")
        return target

    # --- the three sets --------------------------------------------------------------------------------------
    @property
    def sets(self) -> RunSets:
        """The run's protected sets: test (the evaluation suite) and evidence (validation), built once."""
        if getattr(self, "_sets", None) is None:
            self._sets = RunSets.build(self.config.evaluation_suite, self.config.evidence_config,
                                       self.config.validation.samples)
        return self._sets

    # --- validation ----------------------------------------------------------------------------------------
    def validation_items(self):
        """The evidence set: what the engineer reads (generated with every test instance excluded)."""
        return self.sets.evidence.instances

    def validate(self, model_dir: str, folder: Path, stage: int, items,
                 trained_config: dict | None = None) -> StageEvidence:
        """Greedy answers of ``model_dir`` on the validation set -> replays + summary (skipped when present: the
        summary is read back).

        The replay header's ``stage_config`` is the validation config (it produced these instances); the config
        the checkpoint was trained on goes in ``extra["trained_config"]`` (None: untrained), so a reader of the
        replays alone (``mapf-lake engineer --replays STAGE``) edits the stage's training config."""
        from policy.evaluation import answer_and_record

        replay = folder / "validation.mlr"
        summary_path = folder / "summary.json"
        if not self.main:
            wait_for_file(summary_path)
        if not self.main or (replay.exists() and summary_path.exists()):
            return _read_summary(summary_path)
        policy = self._eval_policy(model_dir)
        header = ReplayHeader.new(run_id=self.config.name, stage=stage, split="validation", policy=policy.descriptor,
                                  stage_config=self.config.evidence_config.to_dict(),
                                  extra={"trained_config": trained_config})
        recorded = answer_and_record(policy, items, replay, header, self.config.seed)
        started = time.perf_counter()
        summary = summarize_episodes(recorded.episodes)  # the failure summary plus per-size figures for the engineer
        judged = time.perf_counter()
        if self.config.validation.sampled_k:
            summary = replace(summary, sampled=self._sampled_pass1(model_dir, items))
        # the model's generation apart from the loop's own work on its answers (parse, judge, rewards, replays)
        summary = replace(summary, seconds={
            "generation": recorded.answer_seconds + time.perf_counter() - judged,
            "judging_and_records": recorded.record_seconds + judged - started})
        _write_json(summary_path, summary.to_dict())
        return summary

    def _sampled_pass1(self, model_dir: str, items) -> SampledPass:
        """Sampled pass@1 on ``items``: ``validation.sampled_k`` samples each at the training temperature; the
        share of samples that are valid (and optimal), overall and per map side."""
        import numpy as np

        from policy.rollout import judge_answers

        k = self.config.validation.sampled_k
        temperature = self.config.training.temperature
        policy = self._policy(model_dir, temperature=temperature, top_p=1.0, top_k=0, seed=self.config.seed + 1)
        repeated = [item for item in items for _ in range(k)]
        verdicts = judge_answers(repeated, policy.answer(repeated, seed=self.config.seed).plans)
        valid, optimal = verdicts.valid, verdicts.optimal
        sides = np.array([item.size for item in repeated])
        return SampledPass(k=k, temperature=temperature, valid_rate=float(valid.mean()),
                           optimal_rate=float(optimal.mean()),
                           by_size={str(int(side)): float(valid[sides == side].mean())
                                    for side in sorted(set(sides.tolist()))})

    def _eval_policy(self, model_dir: str):
        """The checkpoint answering with the run's evaluation decoding (``validation.temperature``, ``top_p``,
        ``top_k``; greedy by default): validation and the final evaluation."""
        v = self.config.validation
        return self._policy(model_dir, temperature=v.temperature, top_p=v.top_p, top_k=v.top_k, seed=self.config.seed)

    def eval_backend_kind(self) -> str:
        """``hf`` or ``vllm``: what generates validation and evaluation answers (``validation.backend``)."""
        choice = self.config.validation.backend
        return ("vllm" if self.config.training.use_vllm else "hf") if choice == "auto" else choice

    def _policy(self, model_dir: str, *, temperature: float, top_p: float, top_k: int, seed: int):
        """A ``ModelPolicy`` of ``model_dir`` on the evaluation backend. A vLLM engine is built once per checkpoint
        (validation and sampled pass@1 share it) and released before the next one is built."""
        from policy.backends import HFBackend, Sampling, VLLMBackend
        from policy.policies import ModelPolicy

        sampling = Sampling(max_new_tokens=self.config.validation.max_new_tokens, temperature=temperature,
                            top_p=top_p, top_k=top_k, seed=seed, batch_size=64,
                            enable_thinking=self.config.training.enable_thinking)
        kind = self.eval_backend_kind()
        if kind == "hf":
            return ModelPolicy(f"hf:{model_dir}", self.style, sampling,
                               backend=HFBackend(model_dir, cpu_threads=self.config.cpu_threads))
        cached = getattr(self, "_vllm_engine", None)
        if cached is None or cached[0] != model_dir:
            self.release_eval_backend()
            engine = VLLMBackend(model_dir, gpu_memory_utilization=self.config.validation.vllm_gpu_memory_utilization,
                                 seed=self.config.seed)
            self._vllm_engine = cached = (model_dir, engine)
        return ModelPolicy(f"vllm:{model_dir}", self.style, sampling, backend=cached[1])

    def release_eval_backend(self) -> None:
        """Free the validation vLLM engine (the next stage's trainer needs the GPU memory back)."""
        cached = getattr(self, "_vllm_engine", None)
        self._vllm_engine = None
        if cached is not None:
            cached[1].close()

    # --- the loop ------------------------------------------------------------------------------------------
    def execute(self) -> dict:
        from curriculum.training.trainers import quiet_libraries

        quiet_libraries()  # the run prints its own status lines, not the libraries' bars and info logs
        self._start()
        cfg = self.config
        t0 = time.perf_counter()
        model = self.initial_model()
        base_model = model
        validation_items = self.validation_items()
        history: list[HistoryEntry] = []
        untrained = self.dir / "untrained"
        untrained.mkdir(exist_ok=True)
        baseline = self.validate(model, untrained, 0, validation_items)
        self.log(f"untrained model: valid {100 * baseline.failures.valid_rate:.1f}%")
        if cfg.warm_start.enabled:
            model = self._warm_start(model, validation_items)
            warm = _read_summary(self.dir / "warm_start" / "summary.json")
            history.append(HistoryEntry(stage=0, config=None, **self._scores(warm)))
        current = cfg.stage_one
        if cfg.engineer.plan_first and self.main:
            current = self._plan_first(model, base_model, history)
        elif cfg.engineer.plan_first:  # the other processes take the main one's decision
            current = StageConfig.from_dict(read_record(wait_for_file(self._plan_path()), "engineer's decision",
                                                        ("config",))["config"])
        for record in self.completed_stages():
            history.append(record.history_entry())
            current, model = record.next_config, record.model
        for stage in range(len(self.completed_stages()) + 1, cfg.stages + 1):
            record = self._stage(stage, model, base_model, current, validation_items, history)
            history.append(record.history_entry())
            current, model = record.next_config, record.model
            if self.main:
                self._write_metrics()
        table = self._final_evaluation(model)
        self.log(f"run {cfg.name} finished in {time.perf_counter() - t0:.0f} s")
        return table

    def _scores(self, summary: StageEvidence) -> dict:
        failures = summary.failures
        scores = {"valid_rate": failures.valid_rate, "optimal_rate": failures.optimal_rate,
                  "reward_mean": failures.reward_mean}
        if summary.sampled is not None:
            scores["sampled_valid_rate"] = summary.sampled.valid_rate
        return scores

    def _warm_start(self, model: str, validation_items) -> str:
        from curriculum.training.trainers import warm_start

        ws = self.config.warm_start
        folder = self.dir / "warm_start"
        folder.mkdir(parents=True, exist_ok=True)
        trained = replace(ws.config or self.config.stage_one, samples=ws.samples,
                          seed=training_seed(self.config.seed, 0))
        items = self.sets.training(trained).instances
        self.log(f"warm start: supervised fine-tuning on {counted(len(items), 'optimal plan')}, {counted(ws.steps, 'step')}")
        info = warm_start(model, items, self.style, folder, steps=ws.steps, batch_size=ws.batch_size,
                          learning_rate=ws.learning_rate, max_length=ws.max_length, seed=self.config.seed,
                          cpu_threads=self.config.cpu_threads)
        summary = self.validate(str(folder / "model"), folder, 0, validation_items,
                                trained_config=trained.to_dict())
        self.log(f"warm start: {info.seconds or 0:.0f} s, validation valid "
                 f"{100 * summary.failures.valid_rate:.1f}% optimal {100 * summary.failures.optimal_rate:.1f}%")
        return str(folder / "model")

    def _stage(self, stage: int, model: str, base_model: str, config: StageConfig, validation_items,
               history) -> StageRecord:
        from curriculum.training.trainers import train_stage

        cfg = self.config
        clock = _PhaseClock()
        folder = self.stage_dir(stage)
        folder.mkdir(parents=True, exist_ok=True)
        config = replace(config, seed=training_seed(cfg.seed, stage))
        given, source = self._given_instances(stage)
        given_bytes = to_jsonl(given) if given else b""
        shared = next((sibling for sibling in self.siblings
                       if share_stage(sibling, cfg, stage, config, given_bytes)), None)
        if shared is not None:
            self.log(f"{cfg.name}: stage {stage} shared with {shared.name} (the same settings, warm start and "
                     f"stage configs: the same training)")
        save_config(config, folder / "config.yaml")
        if given:
            atomic_write(folder / REPLAY_FILE, given_bytes)
        generated = stage_instances(self.sets, config, given, source)
        items = generated.instances
        generation = {str(side): asdict(report) for side, report in sorted(generated.reports.items())}
        tr = cfg.training
        clock.lap("instances")
        if shared is None:
            handed_note = f" ({len(given)} of them handed over by the engineer)" if given else ""
            self.log(f"stage {stage}: {tr.trainer.upper()} on {counted(len(items), 'instance')}{handed_note}, "
                     f"{counted(tr.steps, 'step')}")
        self.release_eval_backend()  # a colocated trainer engine needs the GPU memory
        train_info = train_stage(tr, model, items, self.style, folder, seed=stage_seed(cfg.seed, stage),
                                 cpu_threads=cfg.cpu_threads)
        clock.lap("train")
        if not self.main:  # the main process validates, asks the engineer and writes the stage record
            path = wait_for_file(folder / "stage.json")
            return StageRecord.from_dict(read_record(path, "stage record"), str(path))
        checkpoint = str(folder / "model")
        summary = self.validate(checkpoint, folder, stage, validation_items, trained_config=config.to_dict())
        clock.lap("validation")
        split = summary.seconds or {}
        if "judging_and_records" in split and clock.laps.get("validation", 0.0) >= split["judging_and_records"]:
            clock.laps["validation"] -= split["judging_and_records"]  # what is left is the model generating
            clock.laps["judging"] = split["judging_and_records"]
        self.log(f"stage {stage}: valid {100 * summary.failures.valid_rate:.1f}%, "
                 f"optimal {100 * summary.failures.optimal_rate:.1f}%,"
                 f" zero-variance groups {train_info.zero_variance_share}")
        before = self.stage_dir(stage - 1) if stage > 1 else self.dir / ("warm_start" if cfg.warm_start.enabled
                                                                          else "untrained")
        churn = answer_churn(before / "validation.mlr", folder / "validation.mlr")
        if churn["changed"] is not None:
            self.log(f"stage {stage}: greedy answers changed on {100 * churn['changed']:.1f}% of the validation "
                     f"set (valid gained {churn['gained']}, lost {churn['lost']})")
        clock.lap("records")
        evidence = replace(  # the generator's own report and the trainer's own groups: what the stage trained on
            summary, generation={str(side): report for side, report in sorted(generated.reports.items())},
            training_signal=train_info.signal)
        decision = self._decide(stage, checkpoint, base_model, config, evidence, history + [HistoryEntry(
            stage=stage, config=config, **self._scores(summary),
            zero_variance_share=train_info.zero_variance_share)], folder / "decision.json", bank=items)
        self.release_eval_backend()
        clock.lap("engineer")
        outcome = StageDecision.of(decision)
        handed = len(decision.instances)
        self.log(f"stage {stage}: engineer {outcome.engineer} {_OUTCOME_WORDS[outcome.outcome]}"
                 f" ({outcome.reason}); changes: {', '.join(outcome.diff) or 'none'}"
                 + (f"; {counted(handed, 'instance')} for stage {stage + 1}" if handed else ""))
        self._log_rationale(outcome, decision.rationale)
        record = StageRecord(
            stage=stage, config=config, next_config=decision.config, model=checkpoint,
            scores=StageScores(**self._scores(summary), zero_variance_share=train_info.zero_variance_share),
            decision=outcome, train=train_info, generation=generation, churn=churn, timings=clock.laps,
            shared_from=(folder / _SHARED_FROM).read_text() if (folder / _SHARED_FROM).exists() else None)
        _write_json(folder / "stage.json", record.to_dict())
        return record

    def _decide(self, stage: int, checkpoint: str, base_model: str, config: StageConfig, evidence: StageEvidence,
                history: list[HistoryEntry], decision_path: Path,
                bank: Sequence[LabelledInstance] = ()) -> EngineerDecision:
        """The engineer's decision after ``stage`` (0: before stage 1, from the warm start): read back from
        ``decision_path`` when a resumed run made it already, else asked for and written there.
        ``bank``: the instances the stage trained on, for an engineer that reads them (``load_material``)."""
        from engineer import build_context, make_engineer

        if decision_path.exists():
            return _read_decision(decision_path)
        cfg = self.config
        spec = cfg.engineer.spec
        options = dict(cfg.engineer.options)
        if spec == "llm:self":
            spec = f"llm:hf:{checkpoint}"
            cached = getattr(self, "_vllm_engine", None)
            if cached is not None and cached[0] == checkpoint:  # the engine that just validated it
                spec, options["backend"] = f"llm:vllm:{checkpoint}", cached[1]
        elif spec == "llm:base":
            spec = f"llm:hf:{base_model}"
        engineer = make_engineer(spec, **options)
        if hasattr(engineer, "load_state"):  # a stateful engineer continues from its previous decision
            previous = (self.stage_dir(stage - 1) / "decision.json" if stage > 1
                        else self._plan_path() if stage == 1 and cfg.engineer.plan_first else None)
            engineer.load_state(_read_decision(previous).details.get("state")
                                if previous is not None and previous.exists() else None)
        if hasattr(engineer, "load_material"):  # an engineer that writes instances reads the instances themselves
            engineer.load_material(self._material(stage, bank, decision_path.parent / "validation.mlr"))
        context = build_context(evidence, config, history, sections=tuple(cfg.engineer.context))
        decision = engineer.propose(context, config, seed=stage_seed(cfg.seed, stage))
        _write_json(decision_path, decision.to_dict())
        return decision

    def _given_instances(self, stage: int) -> tuple[list[LabelledInstance], str]:
        """The instances the decision before ``stage`` handed it (``EngineerDecision.instances``; [] from an engineer
        that only writes configs) and the record they come from."""
        cfg = self.config
        previous = (self.stage_dir(stage - 1) / "decision.json" if stage > 1
                    else self._plan_path() if cfg.engineer.plan_first else None)
        if previous is None or not previous.exists():
            return [], ""
        return list(_read_decision(previous).instances), str(previous)

    def _plan_path(self) -> Path:
        """Where the decision made before stage 1 (``engineer.plan_first``) is kept."""
        return self.dir / ("warm_start" if self.config.warm_start.enabled else "untrained") / "decision.json"

    def _material(self, stage: int, bank: Sequence[LabelledInstance], replay: Path):
        """What an engineer that writes instances reads (``engineer.material.StageMaterial``): the stage's
        instances, the evidence's episodes in ``replay`` (the validation replays the decision's evidence came
        from) and the content no training instance may have (the test and evidence sets)."""
        from curriculum.training.trainers import OUTCOMES_FILE
        from engineer.material import StageMaterial, read_outcomes
        from replays.reader import ReplayReader

        with ReplayReader(replay) as reader:
            episodes = tuple(episode.materialized() for episode in reader)
        path = replay.parent / OUTCOMES_FILE  # a rejection-sampling stage's own samples of each instance
        outcomes = read_outcomes(read_record(path, "instance outcomes"), str(path)) if path.exists() else {}
        return StageMaterial(stage=stage, bank=tuple(bank), evidence=episodes,
                             protected=self.sets.test | self.sets.evidence_keys, outcomes=outcomes)

    def _plan_first(self, model: str, base_model: str, history: list[HistoryEntry]) -> StageConfig:
        """Stage 1's config as the engineer decides it from the model it starts from (``engineer.plan_first``)."""
        path = self._plan_path()
        evidence = _read_summary(path.parent / "summary.json")
        decision = self._decide(0, model, base_model, self.config.stage_one, evidence, history, path)
        outcome = StageDecision.of(decision)
        self.log(f"before stage 1: engineer {outcome.engineer} {_OUTCOME_WORDS[outcome.outcome]}"
                 f" ({outcome.reason}); changes: {', '.join(outcome.diff) or 'none'}")
        self._log_rationale(outcome, decision.rationale)
        return decision.config

    def _log_rationale(self, outcome: StageDecision, rationale: str, limit: int = 10) -> None:
        """Why the engineer changed the config: its own rationale, a line each (at most ``limit``, each cut to
        one terminal line), so a reader of the log sees the reasons beside the changes."""
        if outcome.outcome != "changed" or not rationale.strip():
            return
        lines = [" ".join(line.split()) for line in rationale.splitlines() if line.strip()]
        for line in lines[:limit]:
            self.log(f"  why: {line[:110]}")
        if len(lines) > limit:
            self.log(f"  why: ... {len(lines) - limit} more lines in the decision.json")

    def _write_metrics(self) -> None:
        lines = []
        for record in self.completed_stages():
            lines.append(json.dumps({"stage": record.stage, **record.scores.to_dict(),
                                     "step_seconds": record.train.step_seconds,
                                     "reward_mean_train": record.train.reward_mean,
                                     "completion_tokens_mean": record.train.completion_tokens_mean}))
        atomic_write(self.dir / "metrics.jsonl", "\n".join(lines) + "\n")

    def _final_evaluation(self, model: str) -> dict:
        from policy.evaluation import evaluate
        from simulator.cli import showing_progress
        from simulator.suites import suite_size

        table_path = self.dir / "final" / "table.json"
        if not self.main:
            return read_record(wait_for_file(table_path), "final table")
        if table_path.exists():  # a finished run: read its table back, write nothing (resumed comparisons)
            return read_record(table_path, "final table")
        policy = self._eval_policy(model)
        try:
            with showing_progress(suite_size(self.config.evaluation_suite), "final evaluation") as update:
                table = evaluate(policy, self.config.evaluation_suite, self.dir / "final", seed=self.config.seed,
                                 run_id=self.config.name, progress=lambda done, total: update(done),
                                 ignored_policy_keys=("spec",))  # the checkpoint's path moves with the run folder
        finally:
            self.release_eval_backend()
        if self.config.validation.sampled_k:
            self._test_sampled_pass1(model)
        _write_json(table_path, table.to_dict())  # last: a final evaluation is complete when its table exists
        self.log(table.render())
        return table.to_dict()

    def _test_sampled_pass1(self, model: str) -> dict:
        """Sampled pass@1 on the test set (``final/sampled.json``): ``validation.sampled_k`` samples of every
        test instance at the training temperature, the share valid (and optimal) per cell and overall. Read back
        when present (a resumed final evaluation)."""
        import numpy as np

        from policy.rollout import judge_answers
        from simulator.suites import generate_suite

        path = self.dir / "final" / "sampled.json"
        if path.exists():
            return read_record(path, "test-set sampled pass@1")
        k, temperature = self.config.validation.sampled_k, self.config.training.temperature
        cells = generate_suite(self.config.evaluation_suite)
        repeated = [item for _, stage in cells for item in stage.instances for _ in range(k)]
        keys = [f"{cell.agents}x{cell.size}" for cell, stage in cells for _ in range(len(stage.instances) * k)]
        self.log(f"final evaluation: sampled pass@1 ({k} samples of {len(repeated) // k} test instances)")
        policy = self._policy(model, temperature=temperature, top_p=1.0, top_k=0, seed=self.config.seed + 1)
        try:
            verdicts = judge_answers(repeated, policy.answer(repeated, seed=self.config.seed).plans)
        finally:
            self.release_eval_backend()
        valid, optimal, cell_of = verdicts.valid, verdicts.optimal, np.array(keys)
        result = {"suite": self.config.evaluation_suite, "k": k, "temperature": temperature,
                  "valid_rate": float(valid.mean()), "optimal_rate": float(optimal.mean()),
                  "cells": {key: {"valid_rate": float(valid[cell_of == key].mean()),
                                  "optimal_rate": float(optimal[cell_of == key].mean()),
                                  "samples": int((cell_of == key).sum())} for key in dict.fromkeys(keys)}}
        _write_json(path, result)
        return result


def _read_decision(path: Path) -> EngineerDecision:
    """A ``decision.json`` the stage loop wrote, read back (a bad one raises ConfigError naming the file and
    field)."""
    return EngineerDecision.from_dict(read_record(path, "engineer's decision", ("config",)), str(path))


def _read_summary(path: Path) -> StageEvidence:
    """A ``summary.json`` the stage loop wrote, read back (a bad one raises ConfigError naming the file and key).

    A summary written before the split by optimal makespan existed (a run folder of an older version, or a warm
    start another arm made) gets the split from the ``validation.mlr`` beside it, in memory: the engineer of a
    new arm reads the same evidence as one that validated itself, and the folder is not rewritten."""
    evidence = StageEvidence.from_dict(read_record(path, "validation summary"), str(path))
    replay = path.parent / "validation.mlr"
    if not evidence.failures.by_size_makespan and evidence.failures.episodes and replay.exists():
        from replays.mining import summarize
        from replays.reader import ReplayReader

        with ReplayReader(replay) as reader:
            split = summarize(reader, exemplars_per_category=0).by_size_makespan
        evidence = replace(evidence, failures=replace(evidence.failures, by_size_makespan=split))
    return evidence


def _differences(recorded, current, prefix: str = "") -> list[str]:
    """Dotted names of the entries in which two run-config documents differ, with both values (``a -> b``)."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for key in dict.fromkeys([*recorded, *current]):
            out += _differences(recorded.get(key), current.get(key), f"{prefix}{key}.")
        return out
    if recorded == current:
        return []
    return [f"{prefix.rstrip('.')}: {short_repr(recorded, 40)} -> {short_repr(current, 40)}"]


def answer_churn(before: Path, after: Path) -> dict:
    """How far a stage moved the greedy answers on the validation set: the share of instances whose answer text
    changed from ``before``'s replay to ``after``'s, and how many became valid (``gained``) or stopped being
    valid (``lost``). A stage that changes many answers with gains equal to losses moved the policy by noise."""
    from replays.reader import ReplayReader

    def answers(path: Path) -> list[tuple[str | None, bool]]:
        with ReplayReader(path) as reader:
            return [(episode.completion, bool(episode.outcome.valid)) for episode in reader]

    old, new = answers(before), answers(after)
    if len(old) != len(new) or not old:
        return {"changed": None, "gained": None, "lost": None, "episodes": len(new)}
    return {"changed": sum(a[0] != b[0] for a, b in zip(old, new)) / len(old),
            "gained": sum(not a[1] and b[1] for a, b in zip(old, new)),
            "lost": sum(a[1] and not b[1] for a, b in zip(old, new)), "episodes": len(old)}


def resume(run_dir: str | Path, log: Log = _log_to_stderr, stages: int | None = None) -> dict:
    """Continue the run in ``run_dir`` (its ``run.yaml``) after a crash or kill; ``stages``: extend it to that
    many stages (a finished run too; see :meth:`Run._extend`)."""
    folder = Path(run_dir)
    if folder.name in ("", ".", ".."):  # '.', '..', '/': the folder's own name is needed
        folder = folder.resolve()
    path = folder / "run.yaml"
    if not path.exists():
        raise ConfigError("--resume", str(run_dir), "a run folder with run.yaml (made by mapf-lake train)")
    config = load_run_config(path)
    # The folder is the run, wherever it is now and however its path is spelled: run.yaml's output_dir and name
    # (and the manifest's) say where it was made, which Run._start does not compare.
    config = replace(config, output_dir=str(folder.parent), name=folder.name)
    if stages is not None:
        config = config.with_overrides(stages=stages)
    return Run(config, log).execute()


def share_warm_start(source: Path, target: Path) -> None:
    """Copy a finished warm start (and the untrained baseline) into another run folder of the same settings, so
    compared runs start from the same checkpoint and the budget goes to the stages."""
    for part in ("model-init", "untrained", "warm_start"):
        src = source / part
        dst = target / part
        if src.exists() and not dst.exists():
            # Copied under a temporary name and renamed: a kill mid-copy must not leave a model folder with its
            # config but no weights (or a warm start marked done without its checkpoint) for the resume to trust.
            with atomic_folder(dst) as building:
                shutil.copytree(src, building, dirs_exist_ok=True, ignore=shutil.ignore_patterns("trainer"))


class _PhaseClock:
    """Seconds per phase of a stage: ``lap(name)`` closes the phase that began at the previous lap."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._last
        self._last = now


def loop_overhead(timings: dict) -> float | None:
    """The share of a stage's recorded wall time spent outside the trainer's optimisation (``train``) and the
    model's validation answers (``validation``): instance generation, judging and scoring the answers and writing
    their replays (``judging``), records, the engineer's decision."""
    total = sum(timings.values()) if timings else 0.0
    if total <= 0:
        return None
    return (total - timings.get("train", 0.0) - timings.get("validation", 0.0)) / total


_OUTCOME_WORDS = {"changed": "changed the config", "kept": "kept the config (nothing to change)",
                  "rejected": "rejected the proposal, kept the config"}

# Run-config keys that cannot change what a stage trains on: the engineer acts only after a stage is validated,
# and what it decides is compared stage by stage (the stage configs themselves).
_STAGE_NEUTRAL = ("name", "arm", "engineer")
_SHARED_PARTS = ("config.yaml", "model", "validation.mlr", "summary.json", "outcomes.json")
# (outcomes.json: only a rejection-sampling stage has it, curriculum.training.trainers.OUTCOMES_FILE)
_SHARED_FROM = "shared_from.txt"  # in a copied stage: the run folder that trained it
REPLAY_FILE = "replay.jsonl"  # in a stage folder: the instances the previous decision handed it, as JSON lines


def stage_instances(sets: RunSets, config: StageConfig, given: Sequence[LabelledInstance],
                    source: str = "decision") -> GeneratedStage:
    """A stage's training instances: ``config``'s, generated with ``samples - len(given)`` (every test and evidence
    instance excluded, :meth:`RunSets.training`), then ``given``, the instances the previous decision handed over
    (``source``: its record, named in errors). The reports are the generator's, of the generated part.

    ``given`` must leave room for one generated instance, and none of it may be a test or evidence instance (the
    engineers that hand instances over exclude them; this is the proof, as generation's exclusion is): else
    ConfigError naming the record."""
    if not given:
        return sets.training(config)
    if len(given) >= config.samples:
        raise ConfigError(f"{source}: instances", len(given), f"fewer than the stage's {config.samples} samples")
    protected = sets.test | sets.evidence_keys
    for index, item in enumerate(given):
        if item.instance.content_key() in protected:
            raise ConfigError(f"{source}: instances[{index}]", "a test or evidence instance",
                              "training instances apart from the run's test and evidence sets")
    generated = sets.training(replace(config, samples=config.samples - len(given)))
    return GeneratedStage(generated.instances + list(given), generated.reports)


def share_stage(source: RunConfig, target: RunConfig, stage: int, config: StageConfig, given: bytes = b"") -> bool:
    """Copy ``source``'s finished stage ``stage`` (its config, trained model and validation) into ``target``'s run
    folder when training it again would repeat the same experiment: the runs differ only in the engineer (and
    name/arm, and ``initial_config`` where it is not the warm start's data), so they share the warm start and
    seeds, and every stage so far trained on the same stage config and handed instances (``replay.jsonl``) in both,
    ``config`` and ``given`` (``target``'s next stage, seed set, and the bytes of its handed instances, empty for
    none) included. Compared arms whose engineers agree (``rule``
    keeping a config ``fixed`` keeps, an ``llm:`` engineer falling back) then pay for a stage once per seed; stage
    1 is always shared. The engineer's decision is not copied: ``target`` makes its own. Returns whether anything
    was shared (False when the settings or any stage config differ, or ``source``'s stage is not finished)."""
    def neutral(run: RunConfig) -> dict:
        data = {key: value for key, value in run.to_dict().items() if key not in _STAGE_NEUTRAL}
        # ``initial_config`` reaches training only through stage 1's config (compared below, so a stage 1 an
        # engineer planned into a sibling's config is shared) and, without a warm-start config of its own,
        # through the warm start's data: that is what is compared
        initial = data.pop("initial_config")
        if run.warm_start.enabled and not data["warm_start"]["config"]:
            data["warm_start"]["config"] = initial
        return data

    src, dst = stage_folder(source.run_dir, stage), stage_folder(target.run_dir, stage)
    if neutral(source) != neutral(target) or not (src / "stage.json").exists() or (dst / "model").exists():
        return False
    if not (src / "config.yaml").exists() or (src / "config.yaml").read_text() != format_config_text(config, "yaml"):
        return False
    if _handed(src) != given:
        return False
    for earlier in range(1, stage):  # the same chain of stage configs: the same checkpoint this stage starts from
        mine = stage_folder(target.run_dir, earlier) / "config.yaml"
        theirs = stage_folder(source.run_dir, earlier) / "config.yaml"
        if not (mine.exists() and theirs.exists()) or mine.read_text() != theirs.read_text():
            return False
        if _handed(mine.parent) != _handed(theirs.parent):
            return False
    dst.mkdir(parents=True, exist_ok=True)
    for part in _SHARED_PARTS:
        if (dst / part).exists() or not (src / part).exists():
            continue
        if (src / part).is_dir():
            with atomic_folder(dst / part) as building:
                shutil.copytree(src / part, building, dirs_exist_ok=True)
        else:
            atomic_write(dst / part, (src / part).read_bytes())
    origin = src / _SHARED_FROM  # a copy of a copy names the run that trained (and timed) the stage
    atomic_write(dst / _SHARED_FROM, origin.read_text() if origin.exists() else str(source.run_dir))
    return True


def _handed(folder: Path) -> bytes:
    """The bytes of a stage folder's ``replay.jsonl`` (the instances handed to it), empty without one."""
    path = folder / REPLAY_FILE
    return path.read_bytes() if path.exists() else b""


def _complete_model(folder: Path) -> bool:
    """Whether ``folder`` holds a loadable embedded model: config, tokenizer and weights."""
    return all((folder / name).exists() for name in ("config.json", "tokenizer.json", "model.safetensors"))
