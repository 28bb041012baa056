"""Failure mining: from replays to the failure summary the environment engineer reads.

``summarize(episodes)`` builds a :class:`FailureSummary`, a frozen value the packages read by attribute (its
groups are :class:`GroupStats`, its instance statistics :class:`InstanceStats`, its examples :class:`Exemplar`);
``summary.to_dict()`` is its stable, documented JSON structure (``SUMMARY_VERSION``),
``FailureSummary.from_dict`` reads that structure back (a missing or ill-typed key is a ConfigError naming its
path, e.g. ``summary.by_size.6.valid_rate``) and ``render_summary(summary)`` is its plain-text rendering.

Structure of ``to_dict()`` (version 1):

``summary_version``
    int, 1.
``episodes``, ``valid``, ``optimal``, ``valid_rate``, ``optimal_rate``
    counts and shares over all episodes.
``failures``
    ``{category: count}`` for every category in ``constants.FAILURE_NAMES`` except ``none`` (zeros included);
    ``failure_rates`` the same divided by ``episodes``.
``by_size``, ``by_agents``, ``by_agents_size``
    group statistics keyed by map side (``"6"``), agent count (``"3"``) and ``"<agents>x<size>"``
    (``"3x6"``): ``{episodes, valid, optimal, valid_rate, optimal_rate, failures: {category: count}}``.
``by_wait``, ``by_size_wait``
    the same group statistics of the labelled episodes split by whether their instance needs a wait (no plan
    of shortest paths solves it): keys ``"needs_wait"`` and ``"no_wait"``, and per map side ``"6:needs_wait"``,
    ``"6:no_wait"`` (ascending by side; a kind with no episode is left out). Waiting is a skill of its own: a
    policy can solve most instances and none that need a wait. Optional when read (absent: empty).
``by_size_makespan``
    the same group statistics of the labelled episodes per map side and optimal makespan, keyed
    ``"<side>:<makespan>"`` (``"5:3"``), ascending by side, then makespan: how long a plan the policy can still
    write. Optional when read (absent: empty).
``fail_steps``
    ``{category: {step: count}}``: when failures happen (1-based step; 0 for parse errors and for a plan with
    no step at all).
``fail_cells``
    ``{size: [[count]] }`` an ``size x size`` heat map of the cell where the reported agent failed (its position
    after the failing step; for an illegal move, the cell it tried to leave).
``instance_stats``
    ``{"failed": s, "succeeded": s}`` with ``s = {episodes, hole_ratio_mean, needs_wait_share,
    optimal_makespan_mean, agents_mean}`` (label fields are means over episodes that carry labels).
``reward``
    ``{mean, std}`` of episode rewards; ``completion_tokens_mean``.
``exemplars``
    up to ``exemplars_per_category`` failed episodes per category, as ``{category, size, agents, source, text}``
    where ``text`` is the compact rendering (map, plan, the failing step's state with the failure marked).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from replays.types import Episode
from simulator import constants as C
from simulator.documents import (NumberRecord, check_value, is_python_int, key_text, pair_key, read_key,
                                 read_mapping, read_table, side_key)
from simulator.errors import ConfigError
from simulator.failures import Kind
from simulator.text import counted, format_plan, percent, render_instance, render_state
from simulator.types import Instance

SUMMARY_VERSION = 1
CATEGORIES = [kind.name for kind in C.FAILURES if kind.is_failure]


def failure_point(episode: Episode) -> tuple[int, int] | None:
    """``(fail_step, fail_agent)`` when both index the episode's recorded trace, else None. The reader checks
    that they are integers; whether they fit the trace is checked here, since mining must never trust a file
    (one flipped bit made them index past the trace). A step failure (illegal move, hole, conflict) happens
    during a step: its ``fail_step`` is 1..T, whose flags are ``events[fail_step - 1]`` (a step 0 would read the
    last step's flags, or none at all)."""
    outcome = episode.outcome
    t, k = outcome.fail_step, outcome.fail_agent
    if not 0 <= k < episode.instance.n_agents or not 0 <= t < len(episode.positions):
        return None
    if 0 <= outcome.failure < len(C.FAILURES) and C.FAILURES[outcome.failure].priority is not None and not (
            1 <= t <= len(episode.events)):
        return None
    return t, k


def describe_failure(episode: Episode) -> str:
    """One sentence on the episode's first failure (the ``summary`` template of its row of the failure table)."""
    outcome = episode.outcome
    kind = C.FAILURES[outcome.failure]
    if outcome.failure == C.PARSE_ERROR:  # no trace to point into
        return _summary(kind).format(error=episode.parse_error)
    point = failure_point(episode)
    if point is None:
        return (f"{kind.name.replace('_', ' ')} (the record's failing step {outcome.fail_step} and agent "
                f"{outcome.fail_agent} do not fit its trace)")
    t, k = point
    values = {
        "step": t,
        "steps": counted(t, "step"),
        "agent": k,
        "where": episode.positions[t][k].tolist(),
        "final": episode.positions[-1][k].tolist(),
        "goal": episode.instance.goals[k].tolist(),
    }
    if "{other}" in _summary(kind):  # another agent flagged with it at that step
        others = [j for j in range(episode.instance.n_agents) if j != k and episode.events[t - 1][j] & kind.event_bit]
        values["other"] = others[0] if others else "?"
    return _summary(kind).format(**values)


def _summary(kind: Kind) -> str:
    """The kind's ``summary`` template; TypeError for the ``none`` row (a valid episode has no failure to describe)."""
    if kind.summary is None:
        raise TypeError(f"{kind.name!r} is no failure: the failure table has no summary sentence for it")
    return kind.summary


def render_episode(episode: Episode, source: str = "") -> str:
    """Compact text of one episode: header, map, plan (or the raw answer), and the failing step marked."""
    outcome = episode.outcome
    inst = episode.instance
    name = C.FAILURE_NAMES[outcome.failure]
    head = f"[{name}] {inst.height}x{inst.width}, {counted(inst.n_agents, 'agent')}"
    if episode.labels:
        head += f", optimal makespan {episode.labels.optimal_makespan}, needs_wait {str(episode.labels.needs_wait).lower()}"
    if source:
        head += f" ({source})"
    lines = [head, render_instance(inst)]
    if episode.plan is not None:
        lines += ["plan:", format_plan(episode.plan.sequences())]
    elif episode.completion is not None:
        snippet = episode.completion.strip().replace("\n", " | ")
        lines += ["answer: " + (snippet[:160] + " ..." if len(snippet) > 160 else snippet)]
    if outcome.failure != C.NO_FAILURE:
        lines.append("failure: " + describe_failure(episode))
        point = failure_point(episode)
        t = point[0] if point else -1
        if outcome.failure != C.PARSE_ERROR and point is not None:
            flag = C.FAILURES[outcome.failure].event_bit
            marked = tuple(k for k in range(inst.n_agents) if t > 0 and episode.events[t - 1][k] & flag)
            lines += [f"state after step {t} (! marks the failure):",
                      render_state(inst, episode.positions[t], marked=marked or (outcome.fail_agent,))]
    return "\n".join(lines)


# --- the summary as typed values ------------------------------------------------------------------------------
# (the document readers, keys and NumberRecord live at the bottom, in simulator.documents)
WAIT_KINDS = ("needs_wait", "no_wait")
"""The two kinds of labelled instance the wait split keeps apart (``by_wait``'s keys)."""


def side_wait_key(text: str, where: str) -> tuple[int, str]:
    """A ``by_size_wait`` key (``"6:needs_wait"``) as ``(6, "needs_wait")``."""
    side, found, kind = text.partition(":")
    if not found or kind not in WAIT_KINDS:
        raise ConfigError(where, text[:40], f"a key <side>:<kind>, kind one of {', '.join(WAIT_KINDS)}")
    return side_key(side, where), kind


def wait_key(text: str, where: str) -> str:
    if text not in WAIT_KINDS:
        raise ConfigError(where, text[:40], f"one of {', '.join(WAIT_KINDS)}")
    return text


def _count(value: Any, where: str) -> int:
    count: int = check_value(value, where, "int")
    return count


def _share(value: Any, where: str) -> float:
    share: float = check_value(value, where, "number")
    return share


def _heat_map(rows: Any, where: str) -> tuple[tuple[int, ...], ...]:
    return tuple(
        tuple(_count(count, f"{where}[{r}][{c}]") for c, count in enumerate(check_value(row, f"{where}[{r}]", "list")))
        for r, row in enumerate(check_value(rows, where, "list"))
    )


@dataclass(frozen=True)
class GroupStats:
    """One group of episodes (a map side, an agent count or an agents x size pair)."""

    episodes: int
    valid: int
    """Episodes whose plan is valid."""
    optimal: int
    """Episodes whose plan is valid and as short as the solver's optimum."""
    valid_rate: float
    """``valid / episodes`` (0 when the group is empty)."""
    optimal_rate: float
    """``optimal / episodes`` (0 when the group is empty)."""
    failures: Mapping[str, int]
    """Failed episodes per category of ``CATEGORIES`` (zeros included)."""

    def to_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "valid": self.valid, "optimal": self.optimal, "valid_rate": self.valid_rate,
                "optimal_rate": self.optimal_rate, "failures": dict(self.failures)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "group") -> "GroupStats":
        return cls(**{name: read_key(data, name, where, "int") for name in ("episodes", "valid", "optimal")},
                   **{name: read_key(data, name, where, "number") for name in ("valid_rate", "optimal_rate")},
                   failures=read_table(data, "failures", where, _count))


@dataclass(frozen=True)
class InstanceStats(NumberRecord):
    """What the instances of a set of episodes were like (means over its episodes; label fields over those that
    carry labels, 0 when none do)."""

    episodes: int
    hole_ratio_mean: float
    """Share of the map's cells that are holes."""
    needs_wait_share: float
    """Share of instances no plan of shortest paths solves without a wait."""
    optimal_makespan_mean: float
    """The solver's optimal makespan, in steps."""
    agents_mean: float


@dataclass(frozen=True)
class Exemplar:
    """One failed episode shown as an example."""

    category: str
    """Its failure category (a name of ``CATEGORIES``)."""
    size: int
    """Map side."""
    agents: int
    source: str
    """Where the episode came from (``file.mlr#12``), or ``""``."""
    text: str
    """The compact rendering of :func:`render_episode` (map, plan, the failing step with the failure marked)."""

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "size": self.size, "agents": self.agents, "source": self.source,
                "text": self.text}

    @classmethod
    def from_dict(cls, data: Any, where: str = "exemplar") -> "Exemplar":
        return cls(category=read_key(data, "category", where, "str"), size=read_key(data, "size", where, "int"),
                   agents=read_key(data, "agents", where, "int"), source=read_key(data, "source", where, "str"),
                   text=read_key(data, "text", where, "str"))


@dataclass(frozen=True)
class FailureSummary(GroupStats):
    """The failure summary: what went wrong in a set of episodes, and where. It is the :class:`GroupStats` of all
    the episodes (``valid_rate`` and ``optimal_rate`` 0 when there are none; ``failures`` has every category of
    ``CATEGORIES``, zeros included) plus the breakdowns below. :meth:`to_dict` writes the version-1 structure of the
    module docstring; :meth:`from_dict` reads it back."""

    failure_rates: Mapping[str, float]
    """``failures`` divided by ``episodes``."""
    by_size: Mapping[int, GroupStats]
    """Keyed by map side (``6``; ``"6"`` in the document), ascending."""
    by_agents: Mapping[int, GroupStats]
    """Keyed by agent count (``3``), ascending."""
    by_agents_size: Mapping[tuple[int, int], GroupStats]
    """Keyed by ``(agents, size)`` (``"3x6"`` in the document), ascending by agents, then size."""
    by_wait: Mapping[str, GroupStats]
    """Labelled episodes keyed by ``"needs_wait"`` / ``"no_wait"`` (a kind without episodes is absent)."""
    by_size_wait: Mapping[tuple[int, str], GroupStats]
    """The same per map side, keyed ``(6, "needs_wait")`` / ``(6, "no_wait")`` (``"6:needs_wait"`` in the
    document), ascending by side."""
    by_size_makespan: Mapping[tuple[int, int], GroupStats]
    """Labelled episodes per map side and optimal makespan, keyed ``(5, 3)`` (``"5:3"``), ascending by side, then
    makespan."""
    fail_steps: Mapping[str, Mapping[int, int]]
    """``{category: {step: count}}``: the 1-based step of each failure (0 for parse errors and empty plans)."""
    fail_cells: Mapping[int, tuple[tuple[int, ...], ...]]
    """Per map side, a side x side heat map (rows of counts) of the cell where the reported agent failed."""
    instance_stats: Mapping[str, InstanceStats]
    """``failed`` and ``succeeded``: the instances of the failed and of the valid episodes."""
    reward_mean: float
    """Mean episode reward (the training reward's scale)."""
    reward_std: float
    completion_tokens_mean: float
    """Mean tokens per answer."""
    exemplars: tuple[Exemplar, ...]
    """Up to ``exemplars_per_category`` failed episodes per category, in the order met."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary_version": SUMMARY_VERSION,
            **super().to_dict(),
            "failure_rates": dict(self.failure_rates),
            "by_size": {str(side): group.to_dict() for side, group in self.by_size.items()},
            "by_agents": {str(agents): group.to_dict() for agents, group in self.by_agents.items()},
            "by_agents_size": {key_text(key, "x"): group.to_dict() for key, group in self.by_agents_size.items()},
            "by_wait": {key: group.to_dict() for key, group in self.by_wait.items()},
            "by_size_wait": {key_text(key): group.to_dict() for key, group in self.by_size_wait.items()},
            "by_size_makespan": {key_text(key): group.to_dict() for key, group in self.by_size_makespan.items()},
            "fail_steps": {name: {str(step): count for step, count in steps.items()}
                           for name, steps in self.fail_steps.items()},
            "fail_cells": {str(side): [list(row) for row in heat] for side, heat in self.fail_cells.items()},
            "instance_stats": {name: stats.to_dict() for name, stats in self.instance_stats.items()},
            "reward": {"mean": self.reward_mean, "std": self.reward_std},
            "completion_tokens_mean": self.completion_tokens_mean,
            "exemplars": [example.to_dict() for example in self.exemplars],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "summary") -> "FailureSummary":
        """Read the structure :meth:`to_dict` writes (other keys are ignored). A missing or ill-typed key raises
        ConfigError naming its path under ``where`` (``summary.by_size.6.valid_rate``)."""
        version = read_key(data, "summary_version", where, "int")
        if version != SUMMARY_VERSION:
            raise ConfigError(f"{where}.summary_version", version, f"{SUMMARY_VERSION} (the version this reader knows)")
        overall = GroupStats.from_dict(data, where)
        failure_rates = read_table(data, "failure_rates", where, _share)
        # read_table's dict[str, Any]: the keyword arguments of the by_* fields
        keys: dict[str, Callable[[str, str], Any]] = {
            "by_size": side_key, "by_agents": side_key, "by_agents_size": pair_key("x"), "by_wait": wait_key,
            "by_size_wait": side_wait_key, "by_size_makespan": pair_key(":")}
        groups: dict[str, Any] = {name: read_table(data, name, where, GroupStats.from_dict, keys[name]) for name in (
            "by_size", "by_agents", "by_agents_size")}
        for name in ("by_wait", "by_size_wait", "by_size_makespan"):  # optional: older summaries lack them
            groups[name] = read_table(data, name, where, GroupStats.from_dict, keys[name]) if isinstance(
                data, Mapping) and name in data else {}
        fail_steps = read_table(data, "fail_steps", where, lambda steps, at: read_mapping(steps, at, _count, side_key))
        fail_cells = read_table(data, "fail_cells", where, _heat_map, side_key)
        stats = read_key(data, "instance_stats", where, "mapping")
        instance_stats = {
            name: InstanceStats.from_dict(read_key(stats, name, f"{where}.instance_stats", "mapping"),
                                          f"{where}.instance_stats.{name}")
            for name in ("failed", "succeeded")
        }
        reward = read_key(data, "reward", where, "mapping")
        return cls(
            **vars(overall), failure_rates=failure_rates, **groups, fail_steps=fail_steps,
            fail_cells=fail_cells, instance_stats=instance_stats,
            reward_mean=read_key(reward, "mean", f"{where}.reward", "number"),
            reward_std=read_key(reward, "std", f"{where}.reward", "number"),
            completion_tokens_mean=read_key(data, "completion_tokens_mean", where, "number"),
            exemplars=tuple(Exemplar.from_dict(example, f"{where}.exemplars[{index}]") for index, example in
                            enumerate(read_key(data, "exemplars", where, "list"))),
        )


def summarize(episodes: Iterable[Episode | tuple[str, Episode]], exemplars_per_category: int = 2) -> FailureSummary:
    """Build the failure summary of ``episodes``: Episodes, or ``(source, episode)`` pairs where ``source``
    names the episode (e.g. ``file.mlr#12``) in the exemplars.

    One pass collects a few scalars per episode (and the heat map and exemplars from failed ones); the
    grouping is then done with NumPy, so the pass is the only per-episode Python work.
    """
    columns: dict[str, list[Any]] = {name: [] for name in (
        "size", "agents", "failure", "valid", "optimal", "holes", "labelled", "needs_wait", "makespan", "reward",
        "tokens", "fail_step")}
    fail_cells: dict[int, np.ndarray] = {}
    exemplars: list[Exemplar] = []
    per_category: Counter[str] = Counter()
    hole_ratios: dict[int, tuple[Instance, float]] = {}  # id(instance) -> (instance, share of holes)
    for entry in episodes:
        source, episode = entry if isinstance(entry, tuple) else ("", entry)
        inst = episode.instance
        outcome = episode.outcome
        labels = episode.labels
        size = labels.size if labels else inst.height
        columns["size"].append(size)
        columns["agents"].append(inst.n_agents)
        columns["failure"].append(outcome.failure)
        columns["valid"].append(outcome.valid)
        columns["optimal"].append(outcome.optimal)
        holes = hole_ratios.get(id(inst))
        if holes is None or holes[0] is not inst:  # readers share one Instance among a group's episodes
            if len(hole_ratios) > 4096:  # bounded: this is a cache, not a record of every instance
                hole_ratios.clear()
            holes = hole_ratios[id(inst)] = (inst, np.count_nonzero(inst.grid) / inst.grid.size)  # tiles are 0 or 1
        columns["holes"].append(holes[1])
        columns["labelled"].append(labels is not None)
        columns["needs_wait"].append(bool(labels.needs_wait) if labels else False)
        columns["makespan"].append(labels.optimal_makespan if labels else 0)
        columns["reward"].append(episode.reward)
        columns["tokens"].append(episode.completion_tokens)
        point = failure_point(episode)
        columns["fail_step"].append(min(max(outcome.fail_step, 0), 1 << 30))  # bounded: a corrupt 2**64-1 fits
        if outcome.valid:
            continue
        name = C.FAILURE_NAMES[outcome.failure]
        if outcome.failure != C.PARSE_ERROR and point is not None:
            r, c = (int(v) for v in episode.positions[point[0]][point[1]])
            heat = fail_cells.setdefault(size, np.zeros((inst.height, inst.width), np.int64))
            if heat.shape == inst.grid.shape:
                heat[r, c] += 1
        if per_category[name] < exemplars_per_category:
            per_category[name] += 1
            exemplars.append(Exemplar(category=name, size=size, agents=inst.n_agents, source=source,
                                      text=render_episode(episode, source)))
    col = {name: np.asarray(values) for name, values in columns.items()}
    total = len(col["size"])
    n_categories = len(C.FAILURE_NAMES)

    def group(mask: np.ndarray) -> GroupStats:
        n = int(mask.sum())
        counts = np.bincount(col["failure"][mask & ~col["valid"].astype(bool)], minlength=n_categories) if n else np.zeros(n_categories, int)
        valid = int(col["valid"][mask].sum()) if n else 0
        optimal = int(col["optimal"][mask].sum()) if n else 0
        return GroupStats(
            episodes=n,
            valid=valid,
            optimal=optimal,
            valid_rate=valid / n if n else 0.0,
            optimal_rate=optimal / n if n else 0.0,
            failures={name: int(counts[C.FAILURE_NAMES.index(name)]) for name in CATEGORIES},
        )

    def stats(mask: np.ndarray) -> InstanceStats:
        n = int(mask.sum())
        labelled = mask & col["labelled"].astype(bool) if total else mask
        n_labelled = int(labelled.sum())
        return InstanceStats(
            episodes=n,
            hole_ratio_mean=float(col["holes"][mask].mean()) if n else 0.0,
            needs_wait_share=float(col["needs_wait"][labelled].mean()) if n_labelled else 0.0,
            optimal_makespan_mean=float(col["makespan"][labelled].mean()) if n_labelled else 0.0,
            agents_mean=float(col["agents"][mask].mean()) if n else 0.0,
        )

    everything = np.ones(total, bool)
    valid = col["valid"].astype(bool) if total else everything
    overall = group(everything)
    pairs = sorted(set(zip(col["agents"].tolist(), col["size"].tolist())))
    labelled = col["labelled"].astype(bool) if total else everything
    waits = col["needs_wait"].astype(bool) if total else everything
    kinds = {"needs_wait": labelled & waits, "no_wait": labelled & ~waits}
    by_size_wait = {(s, kind): group((col["size"] == s) & mask) for s in sorted(set(col["size"].tolist()))
                    for kind, mask in kinds.items() if (mask & (col["size"] == s)).any()}
    lengths = sorted(set(zip(col["size"][labelled].tolist(), col["makespan"][labelled].tolist()))) if total else []
    by_size_makespan = {(s, m): group(labelled & (col["size"] == s) & (col["makespan"] == m)) for s, m in lengths}
    fail_steps = {}
    for code in sorted(set(col["failure"][~valid].tolist())) if total else []:
        steps = col["fail_step"][(col["failure"] == code) & ~valid]
        values, counts = np.unique(steps, return_counts=True)
        fail_steps[C.FAILURE_NAMES[code]] = {int(v): int(n) for v, n in zip(values, counts)}
    return FailureSummary(
        **vars(overall),
        failure_rates={name: (count / total if total else 0.0) for name, count in overall.failures.items()},
        by_size={s: group(col["size"] == s) for s in sorted(set(col["size"].tolist()))},
        by_agents={k: group(col["agents"] == k) for k in sorted(set(col["agents"].tolist()))},
        by_agents_size={(k, s): group((col["agents"] == k) & (col["size"] == s)) for k, s in pairs},
        by_wait={kind: group(mask) for kind, mask in kinds.items() if mask.any()},
        by_size_wait=by_size_wait,
        by_size_makespan=by_size_makespan,
        fail_steps=dict(sorted(fail_steps.items())),
        fail_cells={size: tuple(map(tuple, heat.tolist())) for size, heat in sorted(fail_cells.items())},
        instance_stats={"failed": stats(~valid), "succeeded": stats(valid)},
        reward_mean=float(col["reward"].mean()) if total else 0.0,
        reward_std=float(col["reward"].std()) if total else 0.0,
        completion_tokens_mean=float(col["tokens"].mean()) if total else 0.0,
        exemplars=tuple(exemplars),
    )


def render_summary(summary: FailureSummary, exemplars: bool = True) -> str:
    """Plain text of the summary, for people and for the engineer's prompt."""
    failures = summary.failures
    lines = [
        f"episodes {summary.episodes}: valid {percent(summary.valid_rate)}, "
        f"optimal {percent(summary.optimal_rate)}",
        "failures: " + ", ".join(f"{name} {count}" for name, count in failures.items() if count) or "failures: none",
    ]
    if not any(failures.values()):
        lines[-1] = "failures: none"
    lines.append("by agents x size (valid% / optimal%, top failure):")
    for key, group in summary.by_agents_size.items():
        top = max(group.failures.items(), key=lambda kv: kv[1])
        worst = f", most often {top[0]} ({top[1]})" if top[1] else ""
        lines.append(f"  {key_text(key, 'x')}: {counted(group.episodes, 'episode')}, {percent(group.valid_rate, 0)} / "
                     f"{percent(group.optimal_rate, 0)}{worst}")
    if summary.by_wait:
        lines.append("by need of a wait (valid%): " + ", ".join(
            f"{key} {percent(group.valid_rate, 0)} of {group.episodes}" for key, group in summary.by_wait.items()))
    failed, succeeded = summary.instance_stats["failed"], summary.instance_stats["succeeded"]

    def mean(stats: InstanceStats, value: float, digits: int) -> str:  # a group without episodes has no mean
        return f"{value:.{digits}f}" if stats.episodes else "n/a"

    lines.append(
        f"failed vs succeeded instances: holes {mean(failed, failed.hole_ratio_mean, 2)} vs "
        f"{mean(succeeded, succeeded.hole_ratio_mean, 2)}, needs_wait {mean(failed, failed.needs_wait_share, 2)} vs "
        f"{mean(succeeded, succeeded.needs_wait_share, 2)}, optimal makespan "
        f"{mean(failed, failed.optimal_makespan_mean, 1)} vs {mean(succeeded, succeeded.optimal_makespan_mean, 1)}"
    )
    for name, steps in summary.fail_steps.items():
        lines.append(f"{name} at steps: " + ", ".join(f"{step}:{n}" for step, n in steps.items()))
    if exemplars and summary.exemplars:
        lines.append("examples of failures:")
        for example in summary.exemplars:
            lines.append(example.text)
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def summarize_paths(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], exemplars_per_category: int = 2
) -> FailureSummary:
    """Summary of every episode in the replay files under ``paths`` (files or folders), each file read once
    however often it is named (:func:`replays.reader.replay_files`). ReplayError when there is no replay file
    to read (an empty folder would otherwise be a summary of 0 episodes); ConfigError when
    ``exemplars_per_category`` is negative."""
    from replays.container import FILE_SUFFIX
    from replays.errors import ReplayError
    from replays.reader import ReplayReader, replay_files

    if not is_python_int(exemplars_per_category) or (
            exemplars_per_category < 0):
        raise ConfigError("--exemplars", exemplars_per_category, "an integer >= 0 (failed examples per category)")
    named: Iterable[str | os.PathLike[str]] = (
        [paths] if isinstance(paths, (str, bytes)) or not isinstance(paths, Iterable) else paths)
    files = replay_files(named)
    if not files:
        raise ReplayError(", ".join(str(path) for path in named), "file",
                          f"no replay files (*{FILE_SUFFIX}) to read")

    def episodes_and_sources() -> Iterator[tuple[str, Episode]]:
        for file in files:
            with ReplayReader(file) as reader:
                for index, episode in enumerate(reader):
                    yield f"{file.name}#{index}", episode

    return summarize(episodes_and_sources(), exemplars_per_category)
