"""The stage record (``stage-NN/stage.json``) as typed, frozen values.

A run writes one record per finished stage, last, so a stage is complete exactly when its file exists. Inside the
package the record travels as a :class:`StageRecord`; it becomes a dict only at the file boundary
(:meth:`StageRecord.to_dict` when written, :meth:`StageRecord.from_dict` when read back by a resumed run, the
report or ``compare``). Records written before a field existed read back with that field's default (the
``outcome`` of older decisions is derived from ``accepted`` and ``diff``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from engineer.context import HistoryEntry
from engineer.evidence import StageScores, read_size_report
from engineer.decision import DecisionSummary
from policy.signal import SignalFigures, TrainingSignal
from simulator.atomic import atomic_write
from simulator.config import StageConfig
from simulator.documents import checked_int as _checked_int
from simulator.documents import checked_real as _checked_real
from simulator.documents import read_mapping, side_key
from simulator.errors import ConfigError
from simulator.files import load_json
from simulator.generator import SizeReport
from simulator.secrets import redacted_where_held

MAX_STAGE = 1000  # a run has at most 1,000 stages (RunConfig.stages)
MAX_FIGURE = 1e12  # bound of a trainer's figure or a phase's seconds: finite and printable as a float
# The trainer's figures the report prints (each a number when present; the trainer may add others).
TRAIN_FIGURES = ("step_seconds", "reward_mean", "zero_variance_share", "completion_tokens_mean")


OUTCOMES_FILE = "outcomes.json"
"""In a rejection-sampling stage's folder: each sampled instance's own ``[valid, samples]`` (the trainer writes it,
an engineer that scores instances reads it)."""
MAX_RECORD_BYTES = 64 * 2**20  # a run record (manifest, stage record, summary, decision) is kilobytes; a decision
# keeps the engineer's raw answer, so the bound is generous, but a file of gigabytes is not read into memory


def read_record(path: Path, what: str, keys: tuple[str, ...] = ()) -> dict:
    """The JSON object in the run record ``path`` (``what``: its name in words), with ``keys`` present; anything
    else (missing, not a regular file, over ``MAX_RECORD_BYTES``, truncated, empty, not a JSON object) raises
    ConfigError naming the file, so a damaged folder stops a resume with one line, not a traceback."""
    allowed = f"the {what} mapf-lake train writes, a JSON object (restore it, or start a new run)"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # checked before opening: a FIFO would block the open
            raise ConfigError(str(path), "not a regular file", allowed)
        with open(path, "rb") as handle:
            # bounded even if the file grew since; sized by the file, since read(n) sets aside n bytes up front
            raw = handle.read(min(os.fstat(handle.fileno()).st_size, MAX_RECORD_BYTES) + 1)
    except OSError as exc:
        raise ConfigError(str(path), "unreadable", allowed, exc.strerror or type(exc).__name__) from None
    if len(raw) > MAX_RECORD_BYTES:
        raise ConfigError(str(path), f"over {MAX_RECORD_BYTES} bytes", allowed)
    if not raw.strip():
        raise ConfigError(str(path), "empty", allowed)
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark dropped, as simulator.files does
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "not UTF-8 text", allowed, " ".join(str(exc).split())[:200]) from None
    return parse_record(text, path, what, keys)


def parse_record(text: str, path: Path | str, what: str, keys: tuple[str, ...] = ()) -> dict:
    """The JSON object ``text`` (the run record ``path``) as :func:`read_record` takes it: a JSON object with
    ``keys`` present, by the documents' rules; anything else is a ConfigError naming the file."""
    allowed = f"the {what} mapf-lake train writes, a JSON object (restore it, or start a new run)"
    try:
        json.loads(text)  # the shape first: a truncated or garbled file is named as such
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        reason = " ".join(str(exc).split())[:200] if not isinstance(exc, RecursionError) else "nested too deeply"
        raise ConfigError(str(path), "truncated or not JSON", allowed, reason) from None
    # then the documents' rules (no duplicate keys, finite numbers of at most 40 digits, nesting at most 64 deep):
    # a refusal names the file, the line and the value
    data = load_json(text, str(path), f"the {what}")
    if not isinstance(data, dict):
        raise ConfigError(str(path), f"a JSON {type(data).__name__}", allowed)
    missing = [key for key in keys if key not in data]
    if missing:
        raise ConfigError(str(path), "incomplete", allowed, f"no {missing[0]!r}")
    return data


def write_record(path: Path, document: Any, what: str, read: Callable[[dict, str], Any] | None = None,
                 keys: tuple[str, ...] = ()) -> None:
    """Write the run record ``document`` to ``path`` (atomically) only if the project's own reader takes it back:
    its text goes through :func:`parse_record` and ``read`` (the record type's ``from_dict(data, where)``) first,
    so nothing the project writes is refused when a resume or ``report`` reads it. A record the reader refuses
    (a bug, or a damaged state handed in by a trainer) raises ConfigError naming the file and the field, and the
    file is left as it was."""
    try:
        text = redacted_where_held(json.dumps(document, indent=2, sort_keys=True, default=str, allow_nan=False))
    except ValueError as exc:  # NaN or an infinity: strict JSON has no such number
        raise ConfigError(f"{path}: {what}", "a NaN or infinite number", "finite numbers (nothing was written)",
                          " ".join(str(exc).split())[:200]) from None
    if len(text.encode()) > MAX_RECORD_BYTES:
        raise ConfigError(f"{path}: {what}", f"over {MAX_RECORD_BYTES} bytes", "a record its reader takes back "
                          "(nothing was written)")
    data = parse_record(text, path, what, keys)
    if read is not None:
        read(data, str(path))
    atomic_write(path, text)


def _at(where: str, key: str) -> str:
    """The dotted name of ``key`` under ``where`` (``key`` alone when ``where`` is empty)."""
    return f"{where}.{key}" if where else key


def _optional_str(data: Mapping, key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(_at(where, key), value, "a string")
    return value


def _str_list(data: Mapping, key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(_at(where, key), value, "a list of strings")
    return tuple(value)


def _mapping(data: Mapping, key: str, where: str) -> dict:
    """``data[key]``, a mapping ({} when missing or null)."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(_at(where, key), value, "a mapping")
    return dict(value)


@dataclass(frozen=True)
class TrainingReport:
    """What a trainer reports of one training run (a warm start, a stage, a sampling round's fine-tuning): typed
    in memory, a dict only in ``stage.json``'s ``train`` and the checkpoint's ``checkpoint_done.json``."""

    steps: int | None = None
    """Optimizer steps the run took (the stage's configured steps for GRPO)."""
    seconds: float | None = None
    """Wall time of the training."""
    step_seconds: float | None = None
    """Mean seconds per optimizer step."""
    reward_mean: float | None = None
    """Mean training reward (GRPO), or the sampled valid rate (rejection sampling)."""
    zero_variance_share: float | None = None
    """Share of groups whose rewards were all equal: no learning signal."""
    completion_tokens_mean: float | None = None
    """Mean completion length in tokens (GRPO)."""
    signal: TrainingSignal | None = None
    """The stage's own training signal per map side, for the engineer (None: the trainer samples none)."""
    figures: Mapping[str, Any] = field(default_factory=dict)
    """The trainer's other figures as it wrote them (losses, parameter counts, sampling rounds, ...)."""

    def figure(self, name: str) -> Any:
        """A figure by name, whether a field (``reward_mean``) or one of the trainer's others (``last_loss``);
        None when the trainer did not report it."""
        if name in ("steps", "seconds", *TRAIN_FIGURES):
            return getattr(self, name)
        return self.figures[name] if name in self.figures else None

    def to_dict(self) -> dict[str, Any]:
        """The document (a figure that is None is left out, as a trainer that does not measure it writes it)."""
        named = {name: getattr(self, name) for name in ("steps", "seconds", *TRAIN_FIGURES)
                 if getattr(self, name) is not None}
        return {**named, **self.figures, **({"signal": self.signal.to_dict()} if self.signal is not None else {})}

    @classmethod
    def from_dict(cls, data: Any, where: str = "train") -> "TrainingReport":
        """Read :meth:`to_dict`'s document (an absent or null figure reads as None); a figure that is not a finite
        number in range, or a malformed ``signal``, raises ConfigError naming ``where.<figure>``."""
        if not isinstance(data, Mapping):
            raise ConfigError(where, data, "a mapping (the trainer's figures)")
        named: dict[str, Any] = {}
        for name in ("seconds", *TRAIN_FIGURES):
            if data.get(name) is not None:
                named[name] = _checked_real(data[name], _at(where, name), -MAX_FIGURE, MAX_FIGURE)
        steps = _checked_int(data["steps"], _at(where, "steps"), 0, 10**9) if data.get("steps") is not None else None
        signal = data.get("signal")
        figures = {key: value for key, value in data.items()
                   if key not in ("steps", "signal", "seconds", *TRAIN_FIGURES)}
        return cls(steps=steps, **named, figures=figures,
                    signal=TrainingSignal.from_dict(signal, _at(where, "signal")) if signal else None)

    @classmethod
    def from_log(cls, log_history: Sequence[Mapping[str, Any]], *, steps: int, since_step: int = 0,
                 signal: TrainingSignal | None = None, seconds: float | None = None,
                 step_seconds: float | None = None, figures: Mapping[str, Any] | None = None) -> "TrainingReport":
        """A TRL trainer's report from its ``log_history``: the entries logged after step ``since_step`` (a stage's
        boundary step's own included), the mean reward, share of groups without signal and completion length
        over the entries that log them (``mapf-lake train``'s GRPO stages and the TRL plug-in read it alike)."""
        entries = log_entries(log_history, since_step)
        return cls(steps=steps, seconds=seconds, step_seconds=step_seconds,
                   reward_mean=logged_mean(entries, "reward"),
                   zero_variance_share=logged_mean(entries, "frac_reward_zero_std"),
                   completion_tokens_mean=logged_mean(entries, "completions/mean_length"),
                   signal=signal, figures=dict(figures or {}))


def log_entries(log_history: Sequence[Mapping[str, Any]], since_step: int = 0) -> list[Mapping[str, Any]]:
    """A TRL ``log_history``'s entries logged after step ``since_step``."""
    return [entry for entry in log_history if entry.get("step", 0) > since_step]


def logged_mean(entries: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """The mean of ``key`` over the log entries that hold a number for it (None: none does)."""
    values = [entry[key] for entry in entries if isinstance(entry.get(key), (int, float))]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class RoundFigures:
    """One rejection-sampling round, as the trainer measured it: typed in memory, a dict only in the round's
    ``checkpoint_done.json`` and in the stage report's ``rounds`` (a figure a file leaves out reads as None)."""

    sampled_valid_rate: float | None = None
    """Share of the round's samples that are valid (the reward mean of a 0/1 reward)."""
    zero_variance_share: float | None = None
    """Share of instances whose samples all agree (all valid or none): a group without signal."""
    solved_share: float | None = None
    """Share of instances with at least one valid sample (the ones that teach anything)."""
    needs_wait: int | None = None
    """Instances that need a wait among the round's (None: none did)."""
    needs_wait_sampled_valid_rate: float | None = None
    needs_wait_kept: int | None = None
    """Of those, how many kept a valid plan."""
    signal_by_size: Mapping[int, SignalFigures] | None = None
    """The round's own groups per map side (None: fewer than two samples per instance)."""
    round: int | None = None
    """1-based round number."""
    prompts: int | None = None
    kept: int | None = None
    """Instances whose best valid sample was kept for fine-tuning."""
    sample_seconds: float | None = None
    sft_steps: int | None = None
    """Fine-tuning steps on the kept plans (0: too few kept, the checkpoint stays)."""
    last_loss: float | None = None

    _RATES = ("sampled_valid_rate", "zero_variance_share", "solved_share", "needs_wait_sampled_valid_rate")
    _COUNTS = ("needs_wait", "needs_wait_kept", "round", "prompts", "kept", "sft_steps")
    _OPTIONAL = ("needs_wait", "needs_wait_sampled_valid_rate", "needs_wait_kept", "signal_by_size")

    def to_dict(self) -> dict[str, Any]:
        """The document: the wait figures and ``signal_by_size`` only when measured, the others always."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "signal_by_size" and value is not None:
                value = TrainingSignal(by_size=value).to_dict()["by_size"]
            if value is not None or item.name not in self._OPTIONAL:
                out[item.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "round") -> "RoundFigures":
        """Read :meth:`to_dict`'s document (an absent or null figure reads as None); a rate outside [0, 1], a count
        that is not an integer >= 0 or another figure that is not a finite number raises ConfigError naming it."""
        if not isinstance(data, Mapping):
            raise ConfigError(where, data, "the round's figures, a mapping (the file mapf-lake train writes)")
        values: dict[str, Any] = {}
        for name in cls._RATES:
            values[name] = _checked_real(data[name], _at(where, name), 0.0, 1.0) if data.get(name) is not None else None
        for name in cls._COUNTS:
            values[name] = _checked_int(data[name], _at(where, name), 0, 10**9) if data.get(name) is not None else None
        for name in ("sample_seconds", "last_loss"):
            values[name] = (_checked_real(data[name], _at(where, name), -MAX_FIGURE, MAX_FIGURE)
                            if data.get(name) is not None else None)
        if data.get("signal_by_size"):
            values["signal_by_size"] = TrainingSignal.from_dict({"by_size": data["signal_by_size"]}, where).by_size
        return cls(**values)


def mean_figure(rounds: Sequence[RoundFigures], name: str) -> float | None:
    """The mean of a figure over the rounds that measured it (None: none did)."""
    values = [value for value in (getattr(figures, name) for figures in rounds) if value is not None]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class StageTimings:
    """Seconds per phase of a stage (None: the phase was not timed, e.g. ``judging`` when validation did not split
    its time); a dict only in ``stage.json``'s ``timings``, where an untimed phase is left out."""

    instances: float | None = None
    """Generating (or reading) the stage's instances."""
    train: float | None = None
    """The trainer's optimisation."""
    validation: float | None = None
    """The model answering the evidence set."""
    judging: float | None = None
    """Judging and scoring those answers and writing their replays."""
    records: float | None = None
    """The stage's records: summaries, replays of failures, churn."""
    engineer: float | None = None
    """The engineer's decision."""

    def seconds(self) -> dict[str, float]:
        """The timed phases and their seconds, in :data:`PHASES` order."""
        return {name: value for name in PHASES for value in [getattr(self, name)] if value is not None}

    def to_dict(self) -> dict[str, float]:
        return self.seconds()

    @classmethod
    def from_dict(cls, data: Any, where: str = "timings") -> "StageTimings":
        """Read :meth:`to_dict`'s document; a phase not in :data:`PHASES` or a value that is not a number of
        seconds in range raises ConfigError naming ``where.<phase>``."""
        table = data if data is not None else {}
        if not isinstance(table, Mapping):
            raise ConfigError(where, table, "a mapping of phases to seconds")
        for name in table:
            if name not in PHASES:
                raise ConfigError(f"{where}.{name}", table[name], f"a phase: one of {', '.join(PHASES)}")
        return cls(**{name: _checked_real(seconds, _at(where, name), 0.0, MAX_FIGURE)
                      for name, seconds in table.items()})


PHASES = tuple(item.name for item in fields(StageTimings))
"""A stage's timed phases, in the order they run (:class:`StageTimings`' fields)."""


@dataclass(frozen=True)
class AnswerChurn:
    """How far a stage moved the greedy answers on the evidence set against the previous checkpoint
    (``curriculum.loop.validation.answer_churn``)."""

    episodes: int | None = None
    """Evidence instances answered (None in records written before it was kept)."""
    changed: float | None = None
    """Share of them whose answer text changed; None when the two replays cannot be paired."""
    gained: int | None = None
    """Instances whose answer became valid."""
    lost: int | None = None
    """Instances whose answer stopped being valid."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"changed": self.changed, "gained": self.gained, "lost": self.lost}
        if self.episodes is not None:  # records written before it was kept stay as they were
            out["episodes"] = self.episodes
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "churn") -> "AnswerChurn | None":
        """The record's ``churn`` ({} or absent in records of stages that had none: None)."""
        if not isinstance(data, Mapping):
            raise ConfigError(where, data, "a mapping {changed, gained, lost, episodes}")
        if not data:
            return None
        episodes = (_checked_int(data["episodes"], _at(where, "episodes"), 0, 10**9)
                    if data.get("episodes") is not None else None)
        changed = data.get("changed")
        if changed is not None:
            _checked_real(changed, _at(where, "changed"), 0.0, 1.0)
        counts = {name: _checked_int(data[name], _at(where, name), 0, 10**9) if data.get(name) is not None else None
                  for name in ("gained", "lost")}
        return cls(episodes=episodes, changed=changed, **counts)


@dataclass(frozen=True)
class StageRecord:
    """One finished stage: what it trained on, what it measured, what the engineer decided."""

    stage: int
    """1-based stage number."""
    config: StageConfig
    """The config the stage trained on (its seed is the stage's own)."""
    next_config: StageConfig
    """The config the engineer chose for the next stage."""
    model: str
    """Folder of the stage's checkpoint."""
    scores: StageScores
    decision: DecisionSummary
    """What the engineer decided after the stage (its whole decision: the stage's ``decision.json``)."""
    train: TrainingReport = field(default_factory=TrainingReport)
    """The trainer's own figures (``step_seconds``, ``reward_mean``, ``zero_variance_share``,
    ``completion_tokens_mean``, the per-size training ``signal``, ...), as the trainer reported them."""
    generation: Mapping[int, SizeReport] = field(default_factory=dict)
    """Per map side, the generator's report of what it achieved (holes, waits, attempts, skips)."""
    churn: AnswerChurn | None = None
    """How far the greedy answers moved against the previous checkpoint; None: not measured."""
    timings: StageTimings = field(default_factory=StageTimings)
    """Seconds per phase of the stage: ``instances``, ``train``, ``validation``, ``judging``, ``records``,
    ``engineer``."""
    shared_from: str | None = None
    """The run folder whose stage 1 this stage copied (``train --compare`` trains stage 1 once per seed): its
    training and validation happened there, so this record's timings hold only the copy's own work."""
    run_id: str | None = None
    """The id of the run that wrote the record (its ``manifest.json``'s); None in records written before run ids.
    The run folder refuses a record of another run (``RunFolder.read_stage``)."""

    def to_dict(self) -> dict[str, Any]:
        out = {"stage": self.stage, "config": self.config.to_dict(), "next_config": self.next_config.to_dict(),
               "model": self.model,
               "generation": {str(side): asdict(report) for side, report in self.generation.items()},
               "churn": self.churn.to_dict() if self.churn is not None else {}, "timings": self.timings.to_dict(),
               "train": self.train.to_dict(), "scores": self.scores.to_dict(), "decision": self.decision.to_dict()}
        if self.shared_from is not None:
            out["shared_from"] = self.shared_from
        if self.run_id is not None:
            out["run_id"] = self.run_id
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "stage record") -> "StageRecord":
        """Read a ``stage.json`` document; a missing required part, or a part of the wrong type or out of range
        (a stage number that is not an integer in [1, 1000], a rate outside [0, 1], NaN, a list where a mapping
        belongs), raises ConfigError naming ``where.<part>`` (``where`` empty: the part alone)."""
        if not isinstance(data, dict):
            raise ConfigError(where or "stage record", type(data).__name__,
                              "a mapping (the stage record mapf-lake train writes)")
        for key in ("stage", "config", "scores", "decision"):
            if key not in data:
                raise ConfigError(_at(where, key), None, "present (the stage record mapf-lake train writes)")
        stage = _checked_int(data["stage"], _at(where, "stage"), 1, MAX_STAGE)
        scores = data["scores"]
        if not isinstance(scores, dict) or not all(key in scores for key in ("valid_rate", "optimal_rate")):
            raise ConfigError(_at(where, "scores"), scores, "a mapping with valid_rate and optimal_rate")
        config = _config(data["config"], _at(where, "config"))
        next_config = _config(data["next_config"], _at(where, "next_config")) if data.get("next_config") else config
        train = TrainingReport.from_dict(_mapping(data, "train", where), _at(where, "train"))
        timings = StageTimings.from_dict(data.get("timings"), _at(where, "timings"))
        try:
            stage_scores = StageScores(  # valid_rate and optimal_rate are present (checked above)
                valid_rate=scores["valid_rate"], optimal_rate=scores["optimal_rate"],
                reward_mean=scores.get("reward_mean"), sampled_valid_rate=scores.get("sampled_valid_rate"),
                zero_variance_share=scores.get("zero_variance_share", train.zero_variance_share))
        except ConfigError as error:
            raise ConfigError(_at(where, error.field), error.value, error.allowed) from None
        return cls(
            stage=stage, config=config, next_config=next_config,
            model=_optional_str(data, "model", where) or "", scores=stage_scores,
            decision=DecisionSummary.from_dict(data["decision"], _at(where, "decision")),
            train=train, generation=read_mapping(_mapping(data, "generation", where), _at(where, "generation"),
                                                 read_size_report, side_key),
            churn=AnswerChurn.from_dict(_mapping(data, "churn", where), _at(where, "churn")),
            timings=timings, shared_from=_optional_str(data, "shared_from", where),
            run_id=_optional_str(data, "run_id", where))

    def history_entry(self) -> HistoryEntry:
        """The stage as an engineer's history lists it: number, config and validation scores."""
        return HistoryEntry(self.stage, self.config, self.scores)


def _config(document: Any, where: str) -> StageConfig:
    """A stage config document as a StageConfig; its errors name their field under ``where``."""
    if not isinstance(document, Mapping):
        raise ConfigError(where, document, "a mapping (a stage config)")
    try:
        return StageConfig.from_dict(document)
    except ConfigError as error:
        raise ConfigError(f"{where}.{error.field}", error.value, error.allowed) from None


__all__ = ["MAX_RECORD_BYTES", "OUTCOMES_FILE", "PHASES", "AnswerChurn", "RoundFigures", "StageRecord", "StageTimings", "StageScores",
           "TrainingReport", "log_entries", "logged_mean", "mean_figure", "parse_record", "read_record", "write_record"]
