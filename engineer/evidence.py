"""Evidence from a stage's replays: the failure summary plus the per-size figures the engineer also reads.

:func:`collect_evidence` reads replay files once and returns :class:`Evidence`, whose ``summary`` is a
:class:`StageEvidence`: the failure summary of :mod:`replays.mining` (``failures``) and

``size_stats``
    ``{side: SizeStats}`` keyed by map side as a string (``"6"``): reward and answer length per size, and the
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
from replays.mining import FailureSummary, NumberRecord, check_value, read_key, read_mapping, read_table, summarize
from replays.reader import ReplayReader, replay_files
from simulator.errors import ConfigError
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
class SignalFigures(NumberRecord):
    """The groups of one map side (or agents x size pair) a stage trained on (see :class:`TrainingSignal`)."""

    groups: int
    """Groups (prompts, each sampled ``generations`` times)."""
    reward_mean: float
    """Mean reward of the groups' completions."""
    valid_rate: float
    """Share of the sampled completions that are valid plans."""
    zero_variance_share: float
    """Share of the groups whose rewards were all equal (no gradient)."""
    abs_advantage_mean: float
    """Mean over the groups of their completions' mean absolute advantage."""


SIGNAL_FIGURES = tuple(item.name for item in fields(SignalFigures))
"""A training signal's figures per group of sizes (:class:`SignalFigures`' fields; the context shows them in this order)."""


# What a stage's groups were, by the trainer that sampled them (the engineer's context says it in these words).
SIGNAL_TRAINERS = {
    "grpo": "its GRPO groups",
    "rft": "its rejection-sampling groups: each instance's samples, scored as a 0/1 valid reward",
}


def _check_trainer(trainer: str, where: str) -> str:
    if trainer not in SIGNAL_TRAINERS:
        raise ConfigError(f"{where}.trainer", trainer, f"one of {', '.join(SIGNAL_TRAINERS)}")
    return trainer


@dataclass(frozen=True)
class TrainingSignal:
    """A stage's own training signal (``policy.rewards.StageReward.signal``): a GRPO stage's groups, or a
    rejection-sampling stage's samples of each instance scored as GRPO would score a 0/1 valid reward."""

    by_size: Mapping[str, SignalFigures]
    """Keyed by map side (``"6"``)."""
    by_agents_size: Mapping[str, SignalFigures] = field(default_factory=dict)
    """Keyed by ``"<agents>x<size>"`` (``"3x6"``)."""
    trainer: str = "grpo"
    """Whose groups: a key of :data:`SIGNAL_TRAINERS` (records without it are GRPO's)."""
    rounds: tuple[Mapping[str, SignalFigures], ...] = ()
    """A trainer that samples in rounds (rejection sampling): each round's own groups per map side, in order;
    empty when not recorded (GRPO, and earlier records)."""

    def __post_init__(self) -> None:
        _check_trainer(self.trainer, "training_signal")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by_size": {side: figures.to_dict() for side, figures in self.by_size.items()},
               "by_agents_size": {key: figures.to_dict() for key, figures in self.by_agents_size.items()}}
        if self.trainer != "grpo":  # GRPO's records stay as they were written before the field existed
            out["trainer"] = self.trainer
        if self.rounds:
            out["rounds"] = [{side: figures.to_dict() for side, figures in by_size.items()} for by_size in self.rounds]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "training_signal") -> "TrainingSignal":
        """``by_size`` is required; ``by_agents_size`` and ``rounds`` read as empty and ``trainer`` as ``grpo``
        when absent."""
        by_agents_size = (read_table(data, "by_agents_size", where, SignalFigures.from_dict)
                          if read_key(data, "by_agents_size", where, "mapping", optional=True) is not None else {})
        trainer = _check_trainer(read_key(data, "trainer", where, "str", optional=True) or "grpo", where)
        rounds = tuple(read_mapping(by_size, f"{where}.rounds[{index}]", SignalFigures.from_dict)
                       for index, by_size in enumerate(read_key(data, "rounds", where, "list", optional=True) or []))
        return cls(by_size=read_table(data, "by_size", where, SignalFigures.from_dict), by_agents_size=by_agents_size,
                   trainer=trainer, rounds=rounds)


@dataclass(frozen=True)
class SampledPass:
    """Sampled pass@1 on the validation set: ``k`` samples per instance at the training temperature."""

    k: int
    temperature: float
    valid_rate: float
    """Share of the samples that are valid plans."""
    optimal_rate: float
    """Share of the samples that are valid and optimal."""
    by_size: Mapping[str, float]
    """Per map side (``"6"``), the share of its samples that are valid."""

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "temperature": self.temperature, "valid_rate": self.valid_rate,
                "optimal_rate": self.optimal_rate, "by_size": dict(self.by_size)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "sampled") -> "SampledPass":
        return cls(k=read_key(data, "k", where, "int"),
                   **{name: read_key(data, name, where, "number") for name in ("temperature", "valid_rate",
                                                                                "optimal_rate")},
                   by_size=read_table(data, "by_size", where, _number))


@dataclass(frozen=True)
class StageEvidence:
    """What the engineer reads about a stage: the failure summary of its validation episodes, per-size figures and,
    when the stage loop has them, how the validation ran and what the stage trained on. :meth:`to_dict` writes the
    failure summary's keys, then the others (absent ones are left out)."""

    failures: FailureSummary
    size_stats: Mapping[str, SizeStats] = field(default_factory=dict)
    """Keyed by map side (``"6"``), ascending; empty when the episodes were not at hand."""
    sampled: SampledPass | None = None
    """Sampled pass@1 (``validation.sampled_k``); None: not measured."""
    seconds: Mapping[str, float] | None = None
    """Seconds of the validation: ``generation`` (the model answering) and ``judging_and_records`` (parsing,
    judging and scoring the answers, writing their replays); None: not recorded."""
    generation: Mapping[str, SizeReport] | None = None
    """Per map side, what the generator made of the config the stage trained on; None: not known."""
    training_signal: TrainingSignal | None = None
    """The groups the stage trained on; None: not known, or a trainer without groups."""

    def to_dict(self) -> dict[str, Any]:
        out = self.failures.to_dict()
        out["size_stats"] = {side: stats.to_dict() for side, stats in self.size_stats.items()}
        if self.sampled is not None:
            out["sampled"] = self.sampled.to_dict()
        if self.seconds is not None:
            out["seconds"] = dict(self.seconds)
        if self.generation is not None:
            out["generation"] = {side: asdict(made) for side, made in self.generation.items()}
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
            size_stats=part("size_stats", lambda value, at: read_mapping(value, at, SizeStats.from_dict)) or {},
            sampled=part("sampled", SampledPass.from_dict),
            seconds=part("seconds", lambda value, at: read_mapping(value, at, _number)),
            generation=part("generation", lambda value, at: read_mapping(value, at, read_size_report)),
            training_signal=part("training_signal", TrainingSignal.from_dict),
        )


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

    def result(self) -> dict[str, SizeStats]:
        out: dict[str, SizeStats] = {}
        for side in sorted(self.columns):
            column = {name: np.asarray(values, dtype=np.float64) for name, values in self.columns[side].items()}
            makespans = column["makespan"]
            out[str(side)] = SizeStats(
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


def size_stats(episodes: Iterable[Any]) -> dict[str, SizeStats]:
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


__all__ = ["SIGNAL_FIGURES", "Evidence", "SampledPass", "SignalFigures", "SizeStats", "StageEvidence", "TrainingSignal",
           "collect_evidence", "size_stats", "summarize_episodes", "read_size_report"]
