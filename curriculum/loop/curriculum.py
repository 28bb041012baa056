"""The curriculum as one trainer-free object: what any trainer plugs in to train with the environment engineer.

A :class:`Curriculum` owns everything of a run but the training itself:

* the run's protected sets (training / evidence / test, disjoint by content: :mod:`curriculum.loop.sets`);
* the current stage's config and certified sampling from it (:meth:`Curriculum.sample`, :meth:`training_row`);
* the stage boundary (:meth:`Curriculum.end_stage`): the model's answers on the evidence set, their failure
  summary, the engineer's decision with its reasons, the next stage's config;
* its state (the run folder's records, plus :meth:`state_dict` for a trainer's checkpoint) and the run-folder
  records that ``mapf-lake report`` and ``compare`` read.

Trainers drive it through their own hooks: TRL through :mod:`curriculum.plugins.trl_hooks` (an IterableDataset,
a TrainerCallback, an ``environment_factory`` environment), verl through :mod:`curriculum.plugins.verl_sampler`;
``mapf-lake train`` (:mod:`curriculum.training.run`) is one more user: its stage trainers train on
:meth:`Curriculum.prepare_stage`'s instances and hand the checkpoint to :meth:`Curriculum.end_stage`.

Nothing here imports a trainer, torch or transformers at import time (a test holds it); a model's answers come from
``policy``'s backends, loaded when a boundary needs them.

Use::

    curriculum = Curriculum(preset("demo").with_overrides(name="mine")).open()
    curriculum.begin(start_model)            # validates the start model, plans stage 1 (engineer.plan_first)
    while not curriculum.finished:
        rows = [curriculum.training_row(item) for item in curriculum.sample(64)]
        ...                                  # the user's trainer trains on rows
        record = curriculum.end_stage(model) # evidence, decision, next config; record.decision says why
    table = curriculum.evaluate(model)       # the test set, read by nothing else
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from curriculum.config import RunConfig
from curriculum.loop.distributed import wait_for_file
from curriculum.loop.folder import (HANDED_FILE, Log, RunFolder, read_decision, read_run_id, read_shared_from,
                                    read_summary, recorded_decision, stage_folder)
from curriculum.loop.records import (OUTCOMES_FILE, StageRecord, StageTimings, TrainingReport, read_record,
                                     write_record)
from curriculum.loop.sets import RunSets, certify_handed, training_seed
from curriculum.loop.validation import EvaluationModels, LoadedModel, Model, answer_churn, model_name, validate
from engineer import HistoryEntry, StageEvidence
from engineer.evidence import StageScores
from engineer.decision import EngineerDecision, make_decision
from engineer.position import RunPosition
from policy.evaluation import EvalTable
from policy.prompts import get_style
from simulator.documents import is_python_int
from simulator.atomic import atomic_write
from simulator.config import StageConfig, save_config
from simulator.errors import ConfigError
from simulator.generator import GeneratedStage, LabelledInstance, to_jsonl
from simulator.text import counted, percent


MAX_DRAW = 1_000_000
"""The most instances one :meth:`Curriculum.sample` call draws (a trainer asks for one batch at a time)."""
MAX_POSITION = 10**12
"""The furthest position of a stage's stream a draw may start at."""


def log_to_stderr(message: str) -> None:
    """A run's log line on standard error, redacted of any secret the process holds (:mod:`simulator.secrets`)."""
    from simulator.secrets import redacted_where_held

    print(redacted_where_held(message), file=sys.stderr, flush=True)


def stage_seed(run_seed: int, stage: int) -> int:
    """Seed of stage ``stage``'s trainer and engineer (random streams of torch, numpy and the engineers, which
    want seeds below 2**32): fixed by the run seed, distinct per stage. The stage's *instances* take
    ``curriculum.loop.sets.training_seed``, in a domain no evidence or test seed shares."""
    return run_seed * 1000 + stage


class PhaseClock:
    """Seconds per phase of a stage: ``lap(name)`` closes the phase that began at the previous lap."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._last
        self._last = now


@dataclass(frozen=True)
class StageInputs:
    """What a stage trains on: its config (the stage's training seed set), the instances the previous decision
    handed it (and their bytes as ``replay.jsonl`` holds them), and all its instances with the generator's
    report per map side."""

    stage: int
    config: StageConfig
    given: tuple[LabelledInstance, ...]
    given_bytes: bytes
    generated: GeneratedStage

    @property
    def instances(self) -> list[LabelledInstance]:
        return self.generated.instances


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


_OUTCOME_WORDS = {"changed": "changed the config", "kept": "kept the config (nothing to change)",
                  "rejected": "rejected the proposal, kept the config"}


class Curriculum:
    """One run's curriculum: protected sets, stage configs, certified sampling, stage boundaries, records.

    Stages are 1-based; :attr:`stage` is the one being trained (``stages + 1`` once every stage is finished:
    :attr:`finished`). Every registered engineer works through it (``engineer.spec`` of the run config).
    """

    def __init__(self, config: RunConfig, log: Log = log_to_stderr) -> None:
        self.config = config
        self.dir = config.run_dir
        self.log = log
        self.style = get_style(config.prompt_style)
        self.folder = RunFolder(config, log)
        self.models = EvaluationModels(config, self.style)
        self.history: list[HistoryEntry] = []
        self.trial: Callable[[int, Model, StageConfig], float] | None = None
        """Set by a loop that owns a trainer (``mapf-lake train``): train stage ``stage + 1`` on a candidate config
        from ``model`` and return its evidence valid rate; the ``lookahead`` engineer's trial. None: no trainer."""
        """The engineer's history: the warm start (stage 0, with one) and every finished stage."""
        self.current: StageConfig = config.stage_one
        """The config of the stage being trained (its seed is set to the stage's training seed when prepared)."""
        self.stage = 1
        self.base_model: Model | None = None
        """The model before any training (an ``llm:base`` engineer's)."""
        self._inputs: StageInputs | None = None
        self._clock: PhaseClock | None = None
        self._drawn = 0
        self._sets: RunSets | None = None
        self._begun = False
        self._serving_after_end = False
        self._pass_order: tuple[tuple[int, int, int], Any] | None = None  # ((stage, pass, size), permutation)
        self._generated: dict[int, tuple[StageConfig, bytes, GeneratedStage]] = {}  # checked at a decision

    # --- the folder -------------------------------------------------------------------------------------------
    @property
    def is_main_process(self) -> bool:
        return self.folder.is_main_process

    def stage_dir(self, stage: int) -> Path:
        return stage_folder(self.dir, stage)

    @property
    def finished(self) -> bool:
        return self.stage > self.config.stages

    def open(self) -> "Curriculum":
        """Make the run folder (or accept an existing one as this run's: resume); nothing is trained."""
        self.folder.start()
        return self

    # --- the three sets ---------------------------------------------------------------------------------------
    @property
    def sets(self) -> RunSets:
        """The run's protected sets: test (the evaluation suite) and evidence (validation), built once."""
        if self._sets is None:
            self._sets = RunSets.build(self.config.evaluation_suite, self.config.evidence_config,
                                       self.config.validation.samples)
        return self._sets

    @property
    def evidence_items(self) -> list[LabelledInstance]:
        """The evidence set: what the engineer reads (generated with every test instance excluded)."""
        return self.sets.evidence.instances

    def warm_start_config(self) -> StageConfig:
        """The supervised warm start's instances' config (stage 0's training seed)."""
        ws = self.config.warm_start
        return replace(ws.config or self.config.stage_one, samples=ws.samples, seed=training_seed(self.config.seed, 0))

    def warm_start_instances(self) -> list[LabelledInstance]:
        """The warm start's certified instances with their optimal plans (training set, stage 0)."""
        return self.sets.training(self.warm_start_config()).instances

    # --- evidence ---------------------------------------------------------------------------------------------
    def validate(self, model: Model, folder: Path, stage: int, trained_config: dict | None = None) -> StageEvidence:
        """``model``'s answers on the evidence set -> ``folder``'s replays and summary (read back when there).
        Under several processes the main one answers and the others read its summary."""
        summary_path = folder / "summary.json"
        if not self.is_main_process or ((folder / "validation.mlr").exists() and summary_path.exists()):
            return read_summary(wait_for_file(summary_path))
        folder.mkdir(parents=True, exist_ok=True)
        return validate(self.models, model, folder, stage, self.evidence_items, trained_config)

    def begin(self, model: Model, base_model: Model | None = None) -> Model:
        """Start (or resume) the stages from ``model``, the model stage 1 trains from (warm-started, or not): it is
        validated into ``warm_start/`` (``untrained/`` without a warm start) unless it was already; the engineer
        plans stage 1 (``engineer.plan_first``); finished stages are read back. Returns the model the next stage
        trains from (the last finished stage's checkpoint, or ``model``)."""
        cfg = self.config
        if isinstance(model, str):
            from policy.prompts import checkpoint_style

            trained_on = checkpoint_style(f"hf:{model}")
            if trained_on is not None and trained_on != cfg.prompt_style:
                raise ConfigError("prompt_style", cfg.prompt_style, f"{trained_on}, the style {model} was trained "
                                  f"on (its prompt_style.json): set prompt_style={trained_on}, or start from a "
                                  f"model of this style")
        self.base_model = base_model if base_model is not None else model
        trained = self.warm_start_config().to_dict() if cfg.warm_start.enabled else None
        start = self.validate(model, self.folder.start_dir(), 0, trained_config=trained)
        self.history = [HistoryEntry(0, None, StageScores.of(start))] if cfg.warm_start.enabled else []
        self.current = cfg.stage_one
        if cfg.engineer.plan_first and self.is_main_process:
            self.current = self._plan_first(model)
        elif cfg.engineer.plan_first:  # the other processes take the main one's decision
            self.current = StageConfig.from_dict(read_record(wait_for_file(self.folder.plan_path()),
                                                             "engineer's decision", ("config",))["config"])
        self.stage = 1
        for record in self.folder.completed_stages():
            self.history.append(record.history_entry())
            self.current, model = record.next_config, record.model
            self.stage = record.stage + 1
        self._inputs, self._drawn, self._begun = None, 0, True
        return model

    def _plan_first(self, model: Model) -> StageConfig:
        """Stage 1's config as the engineer decides it from the model it starts from (``engineer.plan_first``)."""
        path = self.folder.plan_path()
        evidence = read_summary(path.parent / "summary.json")
        decision = self.decide(0, model, self.config.stage_one, evidence, self.history, path)
        self._log_decision("before stage 1", decision)
        return decision.config

    # --- a stage's instances ----------------------------------------------------------------------------------
    def _given_instances(self, stage: int) -> tuple[list[LabelledInstance], str]:
        """The instances the decision before ``stage`` handed it (``EngineerDecision.instances``; [] from an engineer
        that only writes configs) and the record they come from. Read back from the file, they are certified again
        before anything trains on them (:func:`~curriculum.loop.sets.certify_handed`: boards of the run's stage
        configs so far, labels and plan as the generator's own)."""
        previous = self.folder.previous_decision(stage)
        if previous is None or not previous.exists():
            return [], ""
        given = list(read_decision(previous).instances)
        configs = [entry.config for entry in self.history if entry.config is not None] + [self.current]
        certify_handed(given, configs, str(previous))
        return given, str(previous)

    def prepare_stage(self) -> StageInputs:
        """The current stage's inputs, made once: its config (seeded) in ``config.yaml``, the instances handed over
        in ``replay.jsonl``, and its certified instances (handed ones last). The stage's clock starts here."""
        self._require_begun()
        if self.finished:
            raise ConfigError("stage", self.stage, f"at most {self.config.stages} (stages): every stage is finished")
        if self._inputs is not None and self._inputs.stage == self.stage:
            return self._inputs
        self._clock = PhaseClock()
        folder = self.stage_dir(self.stage)
        folder.mkdir(parents=True, exist_ok=True)
        config = replace(self.current, seed=training_seed(self.config.seed, self.stage))
        given, source = self._given_instances(self.stage)
        given_bytes = to_jsonl(given) if given else b""
        save_config(config, folder / "config.yaml")
        if given:
            atomic_write(folder / HANDED_FILE, given_bytes)
        made = self._generated.pop(self.stage, None)
        if made is not None and made[0] == config and made[1] == given_bytes:
            generated = made[2]  # generated when the decision was checked
        else:
            generated = stage_instances(self.sets, config, given, source)
        self._clock.lap("instances")
        self._inputs = StageInputs(self.stage, config, tuple(given), given_bytes, generated)
        self._drawn = 0
        return self._inputs

    def sample(self, n: int, start: int | None = None) -> list[LabelledInstance]:
        """The next ``n`` certified training instances of the current stage: its instances in a seeded order,
        reshuffled each pass (the same run seed and stage, the same stream). ``start``: draw from that position of
        the stage's stream instead of where the last draw ended (a trainer that fixes its rows by step; the next
        draw goes on after them). After the last stage, the last stage's config keeps serving (a trainer that runs
        on); a run begun on a finished folder has no stage to serve and says so."""
        if not is_python_int(n) or not 0 <= n <= MAX_DRAW:
            raise ConfigError("n", n, f"an integer in 0..{MAX_DRAW:,}")
        if start is not None:
            from simulator.documents import checked_int

            checked_int(start, "start", 0, MAX_POSITION)
        if self.finished and self._inputs is None:
            self._require_begun()
            raise ConfigError("stage", self.stage, f"at most {self.config.stages} (stages): every stage of "
                              f"{self.dir} is finished, so there is nothing left to train on; score it with "
                              f"evaluate(), or start a new run to train more")
        if self.finished and not self._serving_after_end:
            self._serving_after_end = True
            self.log("curriculum: every stage is finished; sampling goes on from the last stage's instances")
        inputs = self.prepare_stage() if not self.finished else self._inputs
        if inputs is None:
            raise ConfigError("stage", self.stage, "a stage with instances (sample during the run's stages)")
        items = inputs.instances
        first = self._drawn if start is None else start
        out = []
        for position in range(first, first + n):
            rounds, index = divmod(position, len(items))
            out.append(items[int(self._order(inputs.stage, rounds, len(items))[index])])
        self._drawn = first + n
        return out

    def _order(self, stage: int, rounds: int, size: int):
        """The seeded order of a stage's ``size`` instances in pass ``rounds`` (one permutation per pass, kept)."""
        import numpy as np

        key = (stage, rounds, size)
        if self._pass_order is None or self._pass_order[0] != key:
            self._pass_order = (key, np.random.default_rng([self.config.seed, stage, rounds]).permutation(size))
        return self._pass_order[1]

    def training_row(self, item: LabelledInstance) -> dict[str, Any]:
        """One trainer row: the instance's prompt in the run's style and the columns the project's reward reads
        (``policy.rewards.StageReward``: ``instance``, ``optimal_makespan``, ``horizon``)."""
        from curriculum.loop.rows import grpo_row

        return grpo_row(item, self.style)

    def supervised_row(self, item: LabelledInstance) -> dict[str, Any]:
        """One supervised row: the instance's prompt in the run's style and the solver's plan as the completion."""
        from curriculum.loop.rows import sft_row

        return sft_row(item, self.style)

    # --- the stage boundary -----------------------------------------------------------------------------------
    def end_stage(self, model: Model, train_info: TrainingReport | None = None) -> StageRecord:
        """Close the current stage trained into ``model`` (a checkpoint folder, or a :class:`LoadedModel`):
        its evidence (greedy answers on the evidence set, failure summary, sampled pass@1), how far its answers
        moved, the engineer's decision (with the stage's training signal from ``train_info``, and its reasons),
        the stage record, and the switch to the next stage's config. A stage already recorded (a resumed trainer
        replaying steps) is read back, not decided again."""
        inputs = self.prepare_stage()
        clock = self._clock or PhaseClock()
        clock.lap("train")
        train_info = train_info or TrainingReport()
        stage, config, folder = inputs.stage, inputs.config, self.stage_dir(inputs.stage)
        recorded = folder / "stage.json"
        if not self.is_main_process or recorded.exists():
            path = wait_for_file(recorded)
            record = self.folder.read_stage(path, stage)
            if self.is_main_process:
                self.log(f"stage {stage}: already recorded in {path}; its decision is read back")
            return self._advance(replace(record, model=str(folder / "model")))
        summary = self.validate(model, folder, stage, trained_config=config.to_dict())
        clock.lap("validation")
        split = summary.seconds or {}
        if "judging_and_records" in split and clock.laps.get("validation", 0.0) >= split["judging_and_records"]:
            clock.laps["validation"] -= split["judging_and_records"]  # what is left is the model generating
            clock.laps["judging"] = split["judging_and_records"]
        self.log(f"stage {stage}: valid {percent(summary.failures.valid_rate)}, "
                 f"optimal {percent(summary.failures.optimal_rate)},"
                 f" zero-variance groups {percent(train_info.zero_variance_share, missing='not measured')}")
        before = self.stage_dir(stage - 1) if stage > 1 else self.folder.start_dir()
        churn = answer_churn(before / "validation.mlr", folder / "validation.mlr")
        if churn.changed is not None:
            self.log(f"stage {stage}: greedy answers changed on {percent(churn.changed)} of the validation "
                     f"set (valid gained {churn.gained}, lost {churn.lost})")
        clock.lap("records")
        evidence = replace(  # the generator's own report and the trainer's own groups: what the stage trained on
            summary, generation=dict(sorted(inputs.generated.reports.items())),
            training_signal=train_info.signal)
        scores = StageScores.of(summary, train_info.zero_variance_share)
        decision = self.decide(stage, model, config, evidence, self.history + [HistoryEntry(stage, config, scores)],
                               folder / "decision.json", bank=inputs.instances)
        self.models.release()
        clock.lap("engineer")
        handed = len(decision.instances)
        self._log_decision(f"stage {stage}", decision,
                           f"; {counted(handed, 'instance')} for stage {stage + 1}" if handed else "")
        record = StageRecord(
            stage=stage, config=config, next_config=decision.config,
            model=model if isinstance(model, str) else model_name(model), scores=scores,
            decision=decision.summary(), train=train_info, generation=evidence.generation or {}, churn=churn,
            timings=StageTimings(**clock.laps), shared_from=read_shared_from(folder), run_id=self.folder.run_id)
        write_record(recorded, record.to_dict(), "stage record", StageRecord.from_dict)
        return self._advance(record)

    def _advance(self, record: StageRecord) -> StageRecord:
        self.history.append(record.history_entry())
        self.current, self.stage = record.next_config, record.stage + 1
        # after the last stage its instances keep serving a trainer that runs on (sample)
        self._inputs = self._inputs if self.finished else None
        self._clock, self._drawn = None, 0
        if self.is_main_process:
            self.folder.write_metrics()
        return record

    def decide(self, stage: int, model: Model, config: StageConfig, evidence: StageEvidence,
               history: list[HistoryEntry], decision_path: Path,
               bank: Sequence[LabelledInstance] = ()) -> EngineerDecision:
        """The engineer's decision after ``stage`` (0: before stage 1, from the start model): read back from
        ``decision_path`` when a resumed run made it already, else asked for and written there.
        ``bank``: the instances the stage trained on, for an engineer that reads them (``load_material``)."""
        from engineer import build_context, make_engineer
        from engineer.engineers import ReadsMaterial, Stateful, TakesPosition, TakesTrial, proposals

        if decision_path.exists():
            return read_decision(decision_path)
        cfg = self.config
        spec = cfg.engineer.spec
        options = dict(cfg.engineer.options)
        if spec == "llm:self":
            spec, backend = self.models.engineer_backend(model)
            if backend is not None:
                options["backend"] = backend
        elif spec == "llm:base":
            base = self.base_model if self.base_model is not None else model
            spec, backend = (f"llm:hf:{base}", None) if isinstance(base, str) else self.models.engineer_backend(base)
            if backend is not None:
                options["backend"] = backend
        engineer = make_engineer(spec, **options)
        if isinstance(engineer, Stateful):  # a stateful engineer continues from its previous decision
            previous = self.folder.previous_decision(stage) if stage >= 1 else None
            if previous is not None and previous.exists():
                recorded = read_decision(previous).details.get("state")
                try:  # the state comes from the file: its checks' errors name it
                    engineer.load_state(recorded)
                except ConfigError as error:
                    raise ConfigError(f"{previous}: details.{error.field}", error.value, error.allowed) from None
            else:
                engineer.load_state(None)
        if isinstance(engineer, TakesTrial):  # the lookahead ceiling tries candidates with the loop's trainer, if any
            trial = self.trial
            if trial is not None and stage < cfg.stages:  # after the last stage there is no next one to try
                engineer.load_trial(lambda candidate: trial(stage, model, candidate), proposals)
        if isinstance(engineer, ReadsMaterial):  # an engineer that writes instances reads the instances themselves
            engineer.load_material(self.material(stage, bank, decision_path.parent / "validation.mlr"))
        if isinstance(engineer, TakesPosition):  # an open-loop control decides by the stage; its refusals stop the run
            engineer.load_position(RunPosition(
                stage=stage, run_seed=cfg.seed, plan_first=cfg.engineer.plan_first,
                recorded=lambda folder, seed, at: recorded_decision(folder, seed, at, cfg)))
        context = build_context(evidence, config, history, sections=tuple(cfg.engineer.context))
        try:
            decision = engineer.propose(context, config, seed=stage_seed(cfg.seed, stage))
        except Exception as exc:  # a bug or a lost connection in the engineer: the run goes on, the fallback says why
            reason = f"the engineer raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}; kept the config"
            self.log(f"stage {stage}: {reason}")
            decision = make_decision(spec, config, None, reason)
        decision = self._within_budget(decision)
        if stage < cfg.stages:
            decision = self._fillable(stage + 1, decision, config)
        write_record(decision_path, decision.to_dict(), "engineer's decision", EngineerDecision.from_dict, ("config",))
        return decision

    def _within_budget(self, decision: EngineerDecision) -> EngineerDecision:
        """``decision`` with no more instances in its stage than the run's first stage has (``initial_config``'s
        ``samples``): the engineer decides what a stage's instances are, the run how many. Over it, the count is cut
        to it and the cut recorded as a repair. (Answers of ``smol-self``'s trainee asked for 300,000 and 1,000,000
        instances where the run trains on 200 a stage: days of generation for one stage.)"""
        budget = self.config.stage_one.samples
        if not decision.accepted or decision.config.samples <= budget:
            return decision
        note = (f"samples: {decision.config.samples} -> {budget} (a stage has at most the run's first-stage count of "
                "instances)")
        return make_decision(decision.engineer, decision.previous, replace(decision.config, samples=budget),
                             decision.reason, raw_answer=decision.raw_answer,
                             proposal=decision.proposal or decision.config.to_dict(),
                             repairs=[*decision.repairs, note], rationale=decision.rationale,
                             context_text=decision.context_text, seconds=decision.seconds, details=decision.details,
                             instances=decision.instances)

    def _fillable(self, stage: int, decision: EngineerDecision, config: StageConfig) -> EngineerDecision:
        """``decision`` if the generator can fill its config for ``stage`` (generated now and kept for
        :meth:`prepare_stage`); else the fallback that keeps ``config``, with the generator's error as the reason
        (the proposal and the answer stay in the record)."""
        if not decision.diff and not decision.instances:
            return decision  # the config that was just generated
        seeded = replace(decision.config, seed=training_seed(self.config.seed, stage))
        try:
            self._generated[stage] = (seeded, to_jsonl(list(decision.instances)) if decision.instances else b"",
                                      stage_instances(self.sets, seeded, decision.instances, "the decision"))
        except ConfigError as error:
            reason = f"the generator cannot fill the proposed config ({error}); kept the config"
            self.log(f"before stage {stage}: {reason}")
            return make_decision(decision.engineer, config, None, reason, raw_answer=decision.raw_answer,
                                 proposal=decision.proposal or decision.config.to_dict(), repairs=decision.repairs,
                                 rationale=decision.rationale,
                                 context_text=decision.context_text, seconds=decision.seconds,
                                 details=decision.details)
        return decision

    def material(self, stage: int, bank: Sequence[LabelledInstance], replay: Path):
        """What an engineer that writes instances reads (``engineer.material.StageMaterial``): the stage's
        instances, the evidence's episodes in ``replay`` (the validation replays the decision's evidence came
        from) and the content no training instance may have (the test and evidence sets)."""
        from engineer.material import StageMaterial, read_outcomes
        from replays.reader import ReplayReader

        with ReplayReader(replay) as reader:
            episodes = tuple(episode.materialized() for episode in reader)
        path = replay.parent / OUTCOMES_FILE  # a rejection-sampling stage's own samples of each instance
        outcomes = read_outcomes(read_record(path, "instance outcomes"), str(path)) if path.exists() else {}
        return StageMaterial(stage=stage, bank=tuple(bank), evidence=episodes,
                             protected=self.sets.test | self.sets.evidence_keys, outcomes=outcomes)

    def _log_decision(self, when: str, decision: EngineerDecision, tail: str = "", limit: int = 10) -> None:
        """The decision in the log: what changed, and why (the engineer's own rationale, a line each, at most
        ``limit``, each cut to one terminal line)."""
        self.log(f"{when}: engineer {decision.engineer} {_OUTCOME_WORDS[decision.outcome]}"
                 f" ({decision.reason}); changes: {', '.join(decision.diff) or 'none'}" + tail)
        if decision.outcome != "changed" or not decision.rationale.strip():
            return
        lines = [" ".join(line.split()) for line in decision.rationale.splitlines() if line.strip()]
        for line in lines[:limit]:
            self.log(f"  why: {line[:110]}")
        if len(lines) > limit:
            self.log(f"  why: ... {len(lines) - limit} more lines in the decision.json")

    # --- the test set -----------------------------------------------------------------------------------------
    def evaluate(self, model: Model) -> EvalTable:
        """The final score of ``model`` on the test set (``final/``; read back when done). Nothing else reads it, and
        only after the last stage's boundary: before it (or before :meth:`begin`) the call is refused, so no test
        figure can be written early and then returned as the run's final one."""
        from curriculum.loop.validation import evaluate_test_set

        self._require_begun()
        if not self.finished:
            raise ConfigError("stage", self.stage, f"evaluate after the last stage's boundary (stage "
                              f"{self.config.stages} of {self.dir}): the test set is read once, by the final score")

        table_path = self.dir / "final" / "table.json"
        if not self.is_main_process:
            return EvalTable.from_dict(read_record(wait_for_file(table_path), "final table"), str(table_path))
        return evaluate_test_set(self.models, model, self.dir / "final", self.log)

    # --- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What a trainer's checkpoint keeps of the curriculum: the run (its name and id), the stage being trained
        and how many instances were drawn from it. Everything else is in the run folder's records."""
        return {"run": self.config.name, "run_id": self.folder.run_id, "stage": self.stage, "drawn": self._drawn}

    def load_state_dict(self, state: Any) -> None:
        """Continue from a trainer's checkpoint: the stage it was training and the draws it had made. A stage the
        folder finished after that checkpoint is trained again from the checkpoint, and its boundary reads the
        recorded decision back (the same next config), so nothing recorded is lost or decided twice."""
        self._require_begun()
        if not isinstance(state, dict) or not {"run", "stage", "drawn"} <= set(state):
            raise ConfigError("curriculum state", state, "a mapping with run, stage and drawn (Curriculum.state_dict)")
        if state["run"] != self.config.name:
            raise ConfigError("curriculum state: run", state["run"], f"this run's name, {self.config.name!r}")
        recorded, own = read_run_id(state, "curriculum state"), self.folder.run_id
        if recorded and own and recorded != own:
            raise ConfigError("curriculum state: run_id", recorded, f"{own}, the id of the run in {self.dir} "
                              "(manifest.json): a checkpoint of another run with the same name")
        stage, drawn = state["stage"], state["drawn"]
        if not is_python_int(stage) or not 1 <= stage <= min(self.stage, self.config.stages + 1):
            raise ConfigError("curriculum state: stage", stage, f"1..{self.stage} (the stages this folder reached)")
        if not is_python_int(drawn) or not 0 <= drawn <= MAX_POSITION:
            raise ConfigError("curriculum state: drawn", drawn, f"an integer in 0..{MAX_POSITION:,} (instances "
                              "drawn from the stage)")
        if stage < self.stage:  # the folder went on after this checkpoint: roll back to the checkpoint's stage
            finished = self.folder.completed_stages()
            self.history = [entry for entry in self.history if entry.stage < stage]
            self.current = finished[stage - 2].next_config if stage > 1 else self._stage_one_config()
            self.stage, self._inputs = stage, None
        if not self.finished:
            self.prepare_stage()
        self._drawn = drawn

    def _stage_one_config(self) -> StageConfig:
        plan = self.folder.plan_path()
        return read_decision(plan).config if self.config.engineer.plan_first and plan.exists() \
            else self.config.stage_one

    def _require_begun(self) -> None:
        if not self._begun:
            raise ConfigError("curriculum", "not begun", "Curriculum.begin(model) first: it validates the model "
                              "stage 1 starts from and reads the finished stages back")


__all__ = ["Curriculum", "LoadedModel", "PhaseClock", "StageInputs", "log_to_stderr", "stage_instances",
           "stage_seed"]
