"""Evidence from a stage's replays: the failure summary plus the per-size figures the engineer also reads.

:func:`collect_evidence` reads replay files once and returns :class:`Evidence`, whose ``summary`` is a
:class:`StageEvidence`: the failure summary of :mod:`replays.mining` (``failures``) and

``size_stats``
    ``{side: SizeStats}`` keyed by map side (``6``; ``"6"`` in the document): reward and answer length per size, and the
    hole and wait ratios the generator actually achieved (means over that size's episodes; label fields over the
    episodes that carry labels, 0 when none do).

The stage loop adds what the replays cannot say (each None when absent): ``sampled`` (sampled pass@1),
``seconds`` (how long the validation took), ``generation`` (the generator's report per size of the config the
stage trained on) and ``training_signal`` (the stage's own groups per size). ``StageEvidence.to_dict()`` is
the failure summary's dict extended with these keys (``size_stats``, then ``sampled``, ``seconds``,
``generation``, ``training_signal``, each when present); a stage's ``summary.json`` is that document before the
last two are added, and ``StageEvidence.from_dict`` reads either back. ``stage_config`` is the config recorded
in the replays' headers. :func:`size_stats` computes the per-size figures from episodes alone, for callers that
already hold them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from replays.errors import ReplayError
from policy.signal import SIGNAL_FIGURES, SignalFigures, TrainingSignal
from replays.mining import FailureSummary, summarize
from simulator.documents import NumberRecord, check_value, read_key, read_mapping, read_table, side_key
from replays.reader import ReplayReader, replay_files
from simulator.fields import REQUIRED, check_fields, number
from simulator.generator import SizeReport


def _number(value: Any, where: str) -> float:
    return check_value(value, where, "number")


@dataclass(frozen=True)
class SizeStats(NumberRecord):
    """One map side's episodes: reward and answer length, and what their instances were like (means over the
    side's episodes; label fields over the episodes that carry labels, 0 when none do)."""

    episodes: int
    reward_mean: float
    reward_std: float
    completion_tokens_mean: float
    """Tokens per answer."""
    hole_ratio_mean: float
    """Share of the map's cells that are holes."""
    needs_wait_share: float
    """Share of instances that need a wait (no plan of shortest paths solves them)."""
    optimal_makespan_mean: float
    """The solver's optimal makespan, in steps."""
    optimal_makespan_min: int
    optimal_makespan_max: int


def read_size_report(data: Any, where: str = "generation") -> SizeReport:
    """The generator's own report of one map side (``simulator.generator.SizeReport``) from its document
    (``dataclasses.asdict(report)``, as the stage record holds it); a missing or ill-typed field names its path
    (``rejected_makespan`` and ``rejected_protected`` may be missing: records written before makespan bounds or
    protected sets existed lack them)."""
    optional = ("rejected_makespan", "rejected_protected")
    return SizeReport(**{item.name: read_key(data, item.name, where, "number" if "ratio" in item.name else "int")
                         for item in fields(SizeReport)
                         if item.name not in optional or (isinstance(data, Mapping) and item.name in data)})


@dataclass(frozen=True)
class SampledPass:
    """Sampled pass@1 on the validation set: ``k`` samples per instance at the training temperature."""

    k: int
    temperature: float
    valid_rate: float
    """Share of the samples that are valid plans."""
    optimal_rate: float
    """Share of the samples that are valid and optimal."""
    by_size: Mapping[int, float]
    """Per map side (``6``), the share of its samples that are valid."""

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "temperature": self.temperature, "valid_rate": self.valid_rate,
                "optimal_rate": self.optimal_rate, "by_size": {str(side): rate for side, rate in self.by_size.items()}}

    @classmethod
    def from_dict(cls, data: Any, where: str = "sampled") -> "SampledPass":
        return cls(k=read_key(data, "k", where, "int"),
                   **{name: read_key(data, name, where, "number") for name in ("temperature", "valid_rate",
                                                                                "optimal_rate")},
                   by_size=read_table(data, "by_size", where, _number, side_key))


@dataclass(frozen=True)
class StageEvidence:
    """What the engineer reads about a stage: the failure summary of its validation episodes, per-size figures and,
    when the stage loop has them, how the validation ran and what the stage trained on. :meth:`to_dict` writes the
    failure summary's keys, then the others (absent ones are left out)."""

    failures: FailureSummary
    size_stats: Mapping[int, SizeStats] = field(default_factory=dict)
    """Keyed by map side (``6``), ascending; empty when the episodes were not at hand."""
    sampled: SampledPass | None = None
    """Sampled pass@1 (``validation.sampled_k``); None: not measured."""
    seconds: Mapping[str, float] | None = None
    """Seconds of the validation: ``generation`` (the model answering) and ``judging_and_records`` (parsing,
    judging and scoring the answers, writing their replays); None: not recorded."""
    generation: Mapping[int, SizeReport] | None = None
    """Per map side, what the generator made of the config the stage trained on; None: not known."""
    training_signal: TrainingSignal | None = None
    """The groups the stage trained on; None: not known, or a trainer without groups."""

    def to_dict(self) -> dict[str, Any]:
        out = self.failures.to_dict()
        out["size_stats"] = {str(side): stats.to_dict() for side, stats in self.size_stats.items()}
        if self.sampled is not None:
            out["sampled"] = self.sampled.to_dict()
        if self.seconds is not None:
            out["seconds"] = dict(self.seconds)
        if self.generation is not None:
            out["generation"] = {str(side): asdict(made) for side, made in self.generation.items()}
        if self.training_signal is not None:
            out["training_signal"] = self.training_signal.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "summary") -> "StageEvidence":
        """Read :meth:`to_dict`'s document (a ``summary.json``); a plain failure summary reads with empty
        ``size_stats``. A missing or ill-typed key raises ConfigError naming its path under ``where``."""
        failures = FailureSummary.from_dict(data, where)

        def part(key: str, read: Callable[[Any, str], Any]) -> Any:
            present = read_key(data, key, where, "mapping", optional=True) is not None
            return read(data[key], f"{where}.{key}") if present else None

        return cls(
            failures,
            size_stats=part("size_stats", lambda value, at: read_mapping(value, at, SizeStats.from_dict, side_key)) or {},
            sampled=part("sampled", SampledPass.from_dict),
            seconds=part("seconds", lambda value, at: read_mapping(value, at, _number)),
            generation=part("generation", lambda value, at: read_mapping(value, at, read_size_report, side_key)),
            training_signal=part("training_signal", TrainingSignal.from_dict),
        )


MAX_FIGURE = 1e12  # bound of a mean reward or a trainer's figure: finite and printable as a float


@dataclass(frozen=True)
class StageScores:
    """What a stage's validation measured (shares in [0, 1], over the run's evidence set): the stage record's
    ``scores`` and the engineer's history entry hold this one record."""

    valid_rate: float = number(REQUIRED, 0, 1)
    """Greedy answers that are valid plans."""
    optimal_rate: float = number(REQUIRED, 0, 1)
    """Greedy answers that are valid and as short as the solver's optimum."""
    reward_mean: float | None = number(None, -MAX_FIGURE, MAX_FIGURE, optional=True)
    """Mean reward of the greedy answers (the training reward's scale); None in records that lack it."""
    sampled_valid_rate: float | None = number(None, 0, 1, optional=True)
    """Sampled pass@1 at the training temperature (``validation.sampled_k`` samples each); None: not measured."""
    zero_variance_share: float | None = number(None, 0, 1, optional=True)
    """Share of the stage's groups whose rewards were all equal (no learning signal); None: no groups."""

    def __post_init__(self) -> None:
        """Shares are finite numbers in [0, 1] (a rate of 7 would print as 700%), the reward a finite number;
        ConfigError names ``scores.<field>``."""
        check_fields(self, "scores")

    @classmethod
    def of(cls, evidence: StageEvidence, zero_variance_share: float | None = None) -> "StageScores":
        """The scores of a stage's evidence (its greedy rates and reward, sampled pass@1 when measured) and of its
        training signal (``zero_variance_share``)."""
        failures = evidence.failures
        return cls(valid_rate=failures.valid_rate, optimal_rate=failures.optimal_rate, reward_mean=failures.reward_mean,
                   sampled_valid_rate=evidence.sampled.valid_rate if evidence.sampled is not None else None,
                   zero_variance_share=zero_variance_share)

    def to_dict(self) -> dict[str, float | None]:
        """``{valid_rate, optimal_rate[, reward_mean][, sampled_valid_rate], zero_variance_share}`` (the two in
        brackets only when known)."""
        out: dict[str, float | None] = {"valid_rate": self.valid_rate, "optimal_rate": self.optimal_rate}
        for name in ("reward_mean", "sampled_valid_rate"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["zero_variance_share"] = self.zero_variance_share
        return out


class _SizeStatsCollector:
    """Per-size columns gathered while the summary's own pass runs (so the files are read once)."""

    def __init__(self) -> None:
        self.columns: dict[int, dict[str, list[float]]] = {}

    def add(self, episode: Any) -> None:
        inst = episode.instance
        labels = episode.labels
        side = int(labels.size) if labels else int(inst.height)
        column = self.columns.setdefault(
            side, {"reward": [], "tokens": [], "holes": [], "needs_wait": [], "makespan": []}
        )
        column["reward"].append(float(episode.reward))
        column["tokens"].append(float(episode.completion_tokens))
        column["holes"].append(float(np.count_nonzero(inst.grid)) / inst.grid.size)
        if labels is not None:
            column["needs_wait"].append(float(bool(labels.needs_wait)))
            column["makespan"].append(float(labels.optimal_makespan))

    def result(self) -> dict[int, SizeStats]:
        out: dict[int, SizeStats] = {}
        for side in sorted(self.columns):
            column = {name: np.asarray(values, dtype=np.float64) for name, values in self.columns[side].items()}
            makespans = column["makespan"]
            out[int(side)] = SizeStats(
                episodes=int(column["reward"].size),
                reward_mean=float(column["reward"].mean()),
                reward_std=float(column["reward"].std()),
                completion_tokens_mean=float(column["tokens"].mean()),
                hole_ratio_mean=float(column["holes"].mean()),
                needs_wait_share=float(column["needs_wait"].mean()) if column["needs_wait"].size else 0.0,
                optimal_makespan_mean=float(makespans.mean()) if makespans.size else 0.0,
                optimal_makespan_min=int(makespans.min()) if makespans.size else 0,
                optimal_makespan_max=int(makespans.max()) if makespans.size else 0,
            )
        return out


def size_stats(episodes: Iterable[Any]) -> dict[int, SizeStats]:
    """The ``size_stats`` part (see the module docstring) of ``episodes`` (Episodes or ``(source, episode)``)."""
    collector = _SizeStatsCollector()
    for entry in episodes:
        collector.add(entry[1] if isinstance(entry, tuple) else entry)
    return collector.result()


def summarize_episodes(episodes: Iterable[Any], exemplars_per_category: int = 2) -> StageEvidence:
    """The failure summary and ``size_stats`` of ``episodes`` (Episodes or ``(source, episode)`` pairs), in one
    pass."""
    collector = _SizeStatsCollector()

    def tapped() -> Iterator[Any]:
        for entry in episodes:
            collector.add(entry[1] if isinstance(entry, tuple) else entry)
            yield entry

    failures = summarize(tapped(), exemplars_per_category)
    return StageEvidence(failures, collector.result())


@dataclass
class Evidence:
    """What a stage's replays say: the extended summary, the config that produced them, and where they came from."""

    summary: StageEvidence
    """The failure summary and ``size_stats`` of the episodes read."""
    stage_config: dict | None
    """The ``stage_config`` of the first file's header that has one (the config that produced the episodes'
    instances), or None when no header records one."""
    trained_config: dict | None = None
    """The config the policy was trained on (``extra["trained_config"]`` of the first header that records one,
    as a run's validation replays do), or None. For validation replays this, not ``stage_config``, is the
    config an engineer edits."""
    files: list[str] = field(default_factory=list)
    """The replay files read, in order."""
    notes: list[str] = field(default_factory=list)
    """Things worth saying to the user: files skipped by the split filter, headers that disagree on the config."""


def collect_evidence(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    split: str | None = None,
    exemplars_per_category: int = 2,
) -> Evidence:
    """Read every replay file under ``paths`` (files or folders, see ``iter_replay_files``) into :class:`Evidence`.

    ``split`` keeps only files whose header has that split (e.g. ``"validation"``); None keeps all. Raises
    ReplayError when no file is left to read, or when a file is not a valid replay.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = replay_files(paths)  # each file once, however often it is named
    notes: list[str] = []
    chosen: list[Path] = []
    configs: list[dict] = []
    trained: list[dict] = []
    for file in files:
        with ReplayReader(file) as reader:
            header = reader.header
        if split is not None and header.split != split:
            notes.append(f"skipped {file.name}: split {header.split!r}, not {split!r}")
            continue
        chosen.append(file)
        if header.stage_config is not None:
            configs.append(header.stage_config)
        if isinstance(header.extra.get("trained_config"), dict):
            trained.append(header.extra["trained_config"])
    if not chosen:
        where = ", ".join(str(path) for path in paths)
        wanted = f" with split {split!r}" if split else ""
        raise ReplayError(where, "file", f"no replay files{wanted} to read")
    if any(config != configs[0] for config in configs[1:]):
        notes.append("the replay headers record different stage configs; the first one is used")

    def episodes() -> Iterator[tuple[str, Any]]:
        for file in chosen:
            with ReplayReader(file) as reader:
                for index, episode in enumerate(reader):
                    yield f"{file.name}#{index}", episode

    summary = summarize_episodes(episodes(), exemplars_per_category)
    if any(config != trained[0] for config in trained[1:]):
        notes.append("the replay headers record different trained configs; the first one is used")
    return Evidence(summary, configs[0] if configs else None, trained_config=trained[0] if trained else None,
                    files=[str(file) for file in chosen], notes=notes)


__all__ = ["SIGNAL_FIGURES", "Evidence", "SampledPass", "SignalFigures", "SizeStats", "StageEvidence", "StageScores",
           "TrainingSignal",
           "collect_evidence", "size_stats", "summarize_episodes", "read_size_report"]
