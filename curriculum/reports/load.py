"""Reading a run folder for ``report`` and ``compare``: :func:`load_run` reads every record a report needs into a
:class:`RunRecord` of typed records, each checked as it is read.

A record is read by :func:`curriculum.loop.records.read_record` (a regular file of at most ``MAX_RECORD_BYTES``: a
FIFO or a link to /dev/zero is refused before it is opened) and then by its record type's reader
(:class:`~curriculum.loop.manifest.RunManifest`, :class:`~curriculum.loop.records.StageRecord`,
:class:`~engineer.evidence.StageEvidence`, :class:`~policy.evaluation.EvalTable`,
:class:`~policy.evaluation.SampledPass1`); a missing, corrupt or ill-typed record raises one ConfigError naming the
file and the key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from curriculum.config import RunConfig
from curriculum.loop.manifest import RunManifest
from curriculum.loop.records import StageRecord, read_record
from engineer.evidence import StageEvidence
from policy.evaluation import EvalTable, SampledPass1
from simulator.documents import checked_real
from simulator.errors import ConfigError

Table = TypeVar("Table")


def _damaged(path: Path, what: str, error: ConfigError) -> ConfigError:
    """``error`` (naming a key inside the record) as one ConfigError that names the file first."""
    return ConfigError(str(path), "a damaged record", f"the {what} mapf-lake train writes (restore it, or start a "
                       "new run)", " ".join(str(error).split())[:300])


def _read_table(path: Path, what: str, keys: tuple[str, ...], read: Callable[[Any, str], Table]) -> Table:
    """The record at ``path`` read by :func:`curriculum.loop.records.read_record` (a regular file, bounded, a JSON
    object with ``keys``) as ``read(data, "")`` makes it: a ConfigError of ``read`` is re-raised naming the file."""
    data = read_record(path, what, keys)
    try:
        return read(data, "")
    except ConfigError as error:
        raise _damaged(path, what, error) from None


def _stage_record(path: Path) -> StageRecord:
    data = read_record(path, "stage record", ("stage", "scores", "train", "decision", "config"))
    try:
        record = StageRecord.from_dict(data, "")
    except ConfigError as error:
        raise _damaged(path, "stage record", error) from None
    except (TypeError, ValueError, OverflowError, RecursionError) as error:  # a shape from_dict does not check
        raise _damaged(path, "stage record", ConfigError("stage record", type(error).__name__, "readable",
                                                         str(error))) from None
    folder = path.parent.name[len("stage-"):]
    if folder.isdigit() and int(folder) != record.stage:  # stage-01/ holding another stage's record
        raise _damaged(path, "stage record", ConfigError("stage", record.stage, f"{int(folder)} (its folder's "
                                                         f"number, {path.parent.name})"))
    return record


def _validation_summary(path: Path) -> StageEvidence:
    data = read_record(path, "validation summary", ("valid_rate", "optimal_rate"))
    try:
        evidence = StageEvidence.from_dict(data, "")
        for key in ("valid_rate", "optimal_rate"):  # a share: a rate of 7 would print as 700%, NaN as nan
            checked_real(getattr(evidence.failures, key), key, 0.0, 1.0)
    except ConfigError as error:
        raise _damaged(path, "validation summary", error) from None
    return evidence


@dataclass(frozen=True)
class Rates:
    """A validation summary's headline rates on the evidence set (the untrained model's, or the warm start's)."""

    valid_rate: float
    optimal_rate: float


@dataclass
class RunRecord:
    """A run folder as :func:`load_run` reads it, every record typed and checked.

    Fields:
        dir: the run folder.
        manifest: ``manifest.json`` (:class:`~curriculum.loop.manifest.RunManifest`: the run config, versions,
            machine, extensions).
        stages: the finished stages in order, 1..N (:class:`curriculum.loop.records.StageRecord`).
        untrained, warm_start: the evidence-set rates before training and after the warm start, where recorded.
        final: ``final/table.json``, the test set's table (:class:`policy.evaluation.EvalTable`); None before the
            final evaluation.
        final_sampled: ``final/sampled.json``, the test set's sampled pass@1 (:class:`SampledPass1`), where
            recorded.
    """

    dir: str
    manifest: RunManifest
    stages: list[StageRecord]
    untrained: Rates | None = None
    warm_start: Rates | None = None
    final: EvalTable | None = None
    final_sampled: SampledPass1 | None = None

    @property
    def run_config(self) -> RunConfig:
        """The run's config (the manifest's ``run_config``)."""
        return self.manifest.run_config

    @property
    def start(self) -> Rates | None:
        """The rates the stages started from: the warm start's, else the untrained model's."""
        return self.warm_start or self.untrained


def _exists(path: Path) -> bool:
    """Whether there is something at ``path`` to read (a dangling link too: reading it names it)."""
    return path.exists() or path.is_symlink()


def _stages(run_dir: Path) -> list[StageRecord]:
    """The folder's stage records, numbered 1..N without a gap (the stages after a gap trained from a model not
    shown)."""
    stages = [_stage_record(path) for path in sorted(run_dir.glob("stage-*/stage.json"))]
    numbers = sorted(int(path.parent.name[len("stage-"):]) for path in run_dir.glob("stage-*/stage.json")
                     if path.parent.name[len("stage-"):].isdigit())
    if numbers != list(range(1, len(numbers) + 1)):
        gaps = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
        raise ConfigError("run", str(run_dir), "stages numbered 1..N without a gap (restore the missing stage)",
                          f"stage-{gaps[0]:02d}/stage.json is missing" if gaps else f"stage numbers {numbers}")
    return stages


def load_run(run_dir: str | Path) -> RunRecord:
    """Everything a report needs from a run folder: manifest, stages, untrained/warm-start scores, final table
    (the module docstring says how each record is read and checked)."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not _exists(manifest_path):
        raise ConfigError("run", str(run_dir), "a run folder made by mapf-lake train (with manifest.json)")
    manifest = _read_table(manifest_path, "run manifest", ("run_config",), RunManifest.from_dict)
    out = RunRecord(dir=str(run_dir), manifest=manifest, stages=_stages(run_dir))
    for part in ("untrained", "warm_start"):
        summary = run_dir / part / "summary.json"
        if _exists(summary):
            failures = _validation_summary(summary).failures
            setattr(out, part, Rates(failures.valid_rate, failures.optimal_rate))
    table = run_dir / "final" / "table.json"
    if _exists(table):
        out.final = _read_table(table, "final table", ("cells", "mean", "suite"), EvalTable.from_dict)
        sampled = run_dir / "final" / "sampled.json"
        if _exists(sampled):
            out.final_sampled = _read_table(sampled, "test-set sampled pass@1", ("cells", "k"), SampledPass1.from_dict)
    return out


__all__ = ["Rates", "RunRecord", "load_run"]
