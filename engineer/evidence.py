"""Evidence from a stage's replays: the failure summary plus the per-size figures the engineer also reads.

:func:`collect_evidence` reads replay files once and returns :class:`Evidence`: ``summary`` is the failure
summary of :mod:`replays.mining` (``FailureSummary.to_dict()``, version 1) extended with one key,

``size_stats``
    ``{side: {episodes, reward_mean, reward_std, completion_tokens_mean, hole_ratio_mean, needs_wait_share,
    optimal_makespan_mean, optimal_makespan_min, optimal_makespan_max}}`` keyed by map side as a string
    (``"6"``): reward and answer length per size, and the hole and wait ratios the generator actually achieved
    (means over that size's episodes; label fields over the episodes that carry labels, 0 when none do).

so the extended dict is accepted everywhere a summary dict is (``build_context`` uses ``size_stats`` when
present and does without it otherwise). ``stage_config`` is the config recorded in the replays' headers.
:func:`size_stats` computes the extra key from episodes alone, for callers that already hold them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replays.errors import ReplayError
from replays.mining import summarize
from replays.reader import ReplayReader, iter_replay_files


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

    def result(self) -> dict[str, dict[str, float | int]]:
        out: dict[str, dict[str, float | int]] = {}
        for side in sorted(self.columns):
            column = {name: np.asarray(values, dtype=np.float64) for name, values in self.columns[side].items()}
            makespans = column["makespan"]
            out[str(side)] = {
                "episodes": int(column["reward"].size),
                "reward_mean": float(column["reward"].mean()),
                "reward_std": float(column["reward"].std()),
                "completion_tokens_mean": float(column["tokens"].mean()),
                "hole_ratio_mean": float(column["holes"].mean()),
                "needs_wait_share": float(column["needs_wait"].mean()) if column["needs_wait"].size else 0.0,
                "optimal_makespan_mean": float(makespans.mean()) if makespans.size else 0.0,
                "optimal_makespan_min": int(makespans.min()) if makespans.size else 0,
                "optimal_makespan_max": int(makespans.max()) if makespans.size else 0,
            }
        return out


def size_stats(episodes: Iterable[Any]) -> dict[str, dict[str, float | int]]:
    """The ``size_stats`` key (see the module docstring) of ``episodes`` (Episodes or ``(source, episode)``)."""
    collector = _SizeStatsCollector()
    for entry in episodes:
        collector.add(entry[1] if isinstance(entry, tuple) else entry)
    return collector.result()


def summarize_episodes(episodes: Iterable[Any], exemplars_per_category: int = 2) -> dict:
    """The extended summary dict of ``episodes`` (Episodes or ``(source, episode)`` pairs), in one pass."""
    collector = _SizeStatsCollector()

    def tapped() -> Iterator[Any]:
        for entry in episodes:
            collector.add(entry[1] if isinstance(entry, tuple) else entry)
            yield entry

    summary = dict(summarize(tapped(), exemplars_per_category).to_dict())
    summary["size_stats"] = collector.result()
    return summary


@dataclass
class Evidence:
    """What a stage's replays say: the extended summary, the config that produced them, and where they came from."""

    summary: dict
    """``FailureSummary.to_dict()`` plus ``size_stats`` (module docstring)."""
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
    files = [file for path in paths for file in iter_replay_files(path)]
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


__all__ = ["Evidence", "collect_evidence", "size_stats", "summarize_episodes"]
