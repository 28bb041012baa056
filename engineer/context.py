"""The engineer's input: evidence of how the policy behaved, in named sections that can each be switched off.

Sections (:data:`CONTEXT_SECTIONS`, always rendered in this order, whatever order they are asked in):

``behavior``
    valid and optimal rates overall, per map size, per agent count and per agents x size; reward mean/std and
    tokens per answer overall and (when the evidence carries ``size_stats``, see :mod:`engineer.evidence`) per
    size.
``failures``
    failure category counts and rates overall and per map size, when failures happen (steps), and a few exemplar
    failed episodes in compact text (at most ``max_exemplars``, spread over the most frequent categories first,
    each cut to ``exemplar_chars`` characters).
``env_stats``
    the current config; when the evidence carries ``generation`` (the generator's report per size for the
    stage just trained, as the run passes it), what the generator made of that config: instances, requested vs
    achieved hole and wait ratios, candidates drawn and why some were rejected; per size, what the episodes'
    own instances were like (hole ratio, share that need a wait, optimal makespans, from ``size_stats``: for a
    run's validation replays these describe the validation set, and are labelled so); the failed-vs-succeeded
    instance statistics; and, when the
    evidence carries ``training_signal`` (the stage's own groups, ``policy.rewards.StageReward.signal``: GRPO's,
    or a rejection-sampling stage's samples of each instance; the text says which), per
    size the groups trained on, their mean reward and sampled valid rate, the share with zero reward variance
    (no gradient) and the mean absolute advantage.
``history``
    the last ``history_limit`` previous stages: their configs and the scores they led to.

:func:`build_context` reads a :class:`~engineer.evidence.StageEvidence` and a list of :class:`HistoryEntry` and
returns an :class:`EngineerContext`: ``text`` for an LLM (markdown-ish, one ``## name`` heading per section),
``data``, the same as JSON (``{"sections": [...], "<name>": {...}}`` with one dict per selected section, structures
in each builder's docstring), and the typed evidence that rule-based engineers read (``context.behavior``,
``context.signal``). A switched-off section is absent from all three, so an ablation really hides it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engineer.evidence import StageEvidence, StageScores
from policy.signal import SIGNAL_FIGURES, SIGNAL_TRAINERS, TrainingSignal
from replays.mining import CATEGORIES, Exemplar, FailureSummary, GroupStats, InstanceStats
from simulator.config import StageConfig
from simulator.documents import is_python_int, key_text, read_key
from simulator.errors import ConfigError
from simulator.text import counted, figure, percent

CONTEXT_SECTIONS = ("behavior", "failures", "env_stats", "history")
DEFAULT_MAX_EXEMPLARS = 3  # exemplar episodes shown: enough to show what a failure looks like, cheap in tokens
DEFAULT_EXEMPLAR_CHARS = 1200  # a 10x10 map with 4 agents and its plan fits; pathological answers do not
DEFAULT_HISTORY_LIMIT = 5  # previous stages shown; older ones rarely change the next decision

_GROUP_KEYS = ("episodes", "valid", "optimal", "valid_rate", "optimal_rate")
_SIZE_EXTRAS = ("reward_mean", "reward_std", "completion_tokens_mean")
_ACHIEVED_KEYS = (
    "episodes", "hole_ratio_mean", "needs_wait_share", "optimal_makespan_mean", "optimal_makespan_min",
    "optimal_makespan_max",
)
_GENERATED_KEYS = ("count", "requested_hole_ratio", "achieved_hole_ratio", "requested_wait_ratio",
                   "achieved_wait_ratio", "candidates", "rejected_unsolvable", "rejected_solver_limit",
                   "rejected_wait_label", "rejected_makespan")
_HISTORY_SCORES = ("valid_rate", "optimal_rate", "zero_variance_share")


@dataclass(frozen=True)
class HistoryEntry:
    """One previous stage as the engineer's history lists it: its number, the config it trained on and the
    validation scores it led to (:class:`~engineer.evidence.StageScores`, the stage record's own; None: not
    measured). The scores read as attributes too (``entry.valid_rate``: None without scores)."""

    stage: int
    """1-based stage number (0: the warm start)."""
    config: StageConfig | None
    """The config the stage trained on; None when there is none to show (the warm start)."""
    scores: StageScores | None = None

    @property
    def valid_rate(self) -> float | None:
        return self.scores.valid_rate if self.scores is not None else None

    @property
    def optimal_rate(self) -> float | None:
        return self.scores.optimal_rate if self.scores is not None else None

    @property
    def reward_mean(self) -> float | None:
        return self.scores.reward_mean if self.scores is not None else None

    @property
    def sampled_valid_rate(self) -> float | None:
        return self.scores.sampled_valid_rate if self.scores is not None else None

    @property
    def zero_variance_share(self) -> float | None:
        return self.scores.zero_variance_share if self.scores is not None else None

    def to_dict(self) -> dict[str, Any]:
        """``{stage, config, valid_rate, optimal_rate[, reward_mean][, sampled_valid_rate], zero_variance_share}``
        (the two in brackets only when known; the others null without scores), ``config`` as its document or None."""
        scores: dict[str, Any] = (self.scores.to_dict() if self.scores is not None else
                                  {"valid_rate": None, "optimal_rate": None, "zero_variance_share": None})
        return {"stage": self.stage, "config": self.config.to_dict() if self.config is not None else None, **scores}

    @classmethod
    def from_dict(cls, data: Any, where: str = "history entry") -> "HistoryEntry":
        """Read :meth:`to_dict`'s document: ``stage`` is required, a missing (or null) ``config`` reads as None, and
        the scores as None when ``valid_rate`` and ``optimal_rate`` are both missing (or null). A bad key raises
        ConfigError naming it under ``where`` (``history[2].valid_rate``)."""
        stage = read_key(data, "stage", where, "int")
        document = read_key(data, "config", where, "mapping", optional=True)
        try:
            config = StageConfig.from_dict(document) if document is not None else None
        except ConfigError as error:
            raise ConfigError(f"{where}.config" if error.field == "config" else f"{where}.config.{error.field}",
                              error.value, error.allowed) from None
        values = {name: read_key(data, name, where, "number", optional=True) for name in _SCORE_NAMES}
        if values["valid_rate"] is None and values["optimal_rate"] is None:
            known = [name for name, value in values.items() if value is not None]
            if known:
                raise ConfigError(f"{where}.valid_rate", None, f"present beside {known[0]} (a stage's scores)")
            return cls(stage, config)
        try:
            return cls(stage, config, StageScores(**values))
        except ConfigError as error:  # named scores.<field>: named under where instead
            raise ConfigError(f"{where}.{error.field.rsplit('.', 1)[-1]}", error.value, error.allowed) from None


_SCORE_NAMES = ("valid_rate", "optimal_rate", "reward_mean", "sampled_valid_rate", "zero_variance_share")


@dataclass(frozen=True)
class ContextOptions:
    """Sizes of the context's parts (all bounded so the prompt stays bounded)."""

    max_exemplars: int = DEFAULT_MAX_EXEMPLARS
    exemplar_chars: int = DEFAULT_EXEMPLAR_CHARS
    history_limit: int = DEFAULT_HISTORY_LIMIT

    def __post_init__(self) -> None:
        for name in ("max_exemplars", "exemplar_chars", "history_limit"):
            value = getattr(self, name)
            if not is_python_int(value) or value < 0:
                raise ConfigError(f"context.{name}", value, "an integer >= 0")


@dataclass
class EngineerContext:
    """What an engineer reads: the evidence as text (for an LLM), as JSON-able data (the LLM's JSON, the
    decision file) and typed (for rules: :attr:`behavior`, :attr:`signal`), each holding only the sections
    switched on."""

    sections: tuple[str, ...]
    """The sections it holds, in :data:`CONTEXT_SECTIONS` order."""
    data: dict = field(default_factory=dict)
    """``{"sections": [...], "<section>": {...}}``, JSON-able."""
    text: str = ""
    """The rendering for an LLM prompt."""
    evidence: StageEvidence | None = None
    """The typed evidence the sections were built from (None: a context without evidence)."""

    def section(self, name: str) -> dict | None:
        """The data of section ``name``, or None when it was switched off."""
        return self.data[name] if name in self.sections else None

    @property
    def behavior(self) -> FailureSummary | None:
        """The evidence's summary (rates overall, per size, per size and wait, per size and optimal makespan:
        typed :class:`~replays.mining.GroupStats`), or None when the behavior section is off."""
        return self.evidence.failures if self.evidence is not None and "behavior" in self.sections else None

    @property
    def signal(self) -> TrainingSignal | None:
        """The stage's training signal (per size, and per sampling round), or None when the env_stats section is
        off or the evidence has none."""
        return self.evidence.training_signal if self.evidence is not None and "env_stats" in self.sections else None


def parse_sections(sections: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"failures,behavior"`` or ``["failures", "behavior"]`` -> the sections in canonical order.

    None means all; ``"all"`` too; ``""`` or ``"none"`` means none (the no-evidence ablation). Unknown names raise
    ConfigError listing the known ones.
    """
    if sections is None:
        return CONTEXT_SECTIONS
    if isinstance(sections, str):
        if sections.strip().lower() == "all":
            return CONTEXT_SECTIONS
        if sections.strip().lower() == "none":
            return ()
        sections = [part for part in sections.split(",")]
    wanted = set()
    for name in sections:
        name = str(name).strip()
        if not name:
            continue
        if name not in CONTEXT_SECTIONS:
            raise ConfigError("context", name, f"a section name: one of {', '.join(CONTEXT_SECTIONS)} (or all, none)")
        wanted.add(name)
    return tuple(name for name in CONTEXT_SECTIONS if name in wanted)


# --- small renderers -----------------------------------------------------------------------------------------
def describe_config(config: StageConfig) -> str:
    """A stage config in one line: ``agents 2, samples 2000, slip 0.0; sizes 4 (data 0.5, holes 0.2, wait 0.3), ..``
    (read from the validated config's fields, not from its document: nothing is missing to guess at)."""
    sizes = ", ".join(
        f"{side} (data {figure(spec.data_ratio, 3)}, holes {figure(spec.hole_ratio, 3)}, "
        f"wait {figure(spec.wait_ratio, 3)})"
        for side, spec in config.sizes.items()
    )
    agents = config.agents
    agents_text = f"{agents[0]}-{agents[1]}" if isinstance(agents, tuple) else str(agents)
    return f"agents {agents_text}, samples {config.samples}, slip {config.slip}; sizes {sizes}"


def _group(group: GroupStats | FailureSummary) -> dict:
    return {key: getattr(group, key) for key in _GROUP_KEYS}


# --- sections: data ------------------------------------------------------------------------------------------
def _behavior_data(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                   options: ContextOptions) -> dict:
    """``{episodes, valid, optimal, valid_rate, optimal_rate, reward: {mean, std}, completion_tokens_mean,
    by_size: {side: {episodes, valid, optimal, valid_rate, optimal_rate[, reward_mean, reward_std,
    completion_tokens_mean]}}, by_agents: {k: {...}}, by_agents_size: {"KxS": {...}}, by_wait: {"needs_wait" |
    "no_wait": {...}}, by_size_wait: {"S:needs_wait" | "S:no_wait": {...}}, by_size_makespan: {"S:M": {...}}}``
    (the wait split and the split by optimal makespan ``M``: labelled episodes only, a group without episodes
    absent; empty for summaries written before they existed)."""
    summary = evidence.failures
    by_size = {}
    for side in sorted(summary.by_size):
        entry = _group(summary.by_size[side])
        if side in evidence.size_stats:
            entry.update({key: getattr(evidence.size_stats[side], key) for key in _SIZE_EXTRAS})
        by_size[str(side)] = entry
    return {
        **_group(summary),
        "reward": {"mean": summary.reward_mean, "std": summary.reward_std},
        "completion_tokens_mean": summary.completion_tokens_mean,
        "by_size": by_size,
        "by_agents": {str(k): _group(summary.by_agents[k]) for k in sorted(summary.by_agents)},
        "by_agents_size": {key_text(key, "x"): _group(group) for key, group in summary.by_agents_size.items()},
        "by_wait": {key: _group(group) for key, group in summary.by_wait.items()},
        "by_size_wait": {key_text(key): _group(group) for key, group in summary.by_size_wait.items()},
        "by_size_makespan": {key_text(key): _group(group) for key, group in summary.by_size_makespan.items()},
    }


def _failures_data(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                   options: ContextOptions) -> dict:
    """``{failures: {category: count}, failure_rates: {category: share}, by_size: {side: {category: count}},
    fail_steps: {category: {step: count}}, exemplars: [{category, size, agents, source, text}]}``."""
    summary = evidence.failures
    failures = _category_counts(summary.failures)
    exemplars = _pick_exemplars(summary.exemplars, failures, options)
    return {
        "failures": failures,
        "failure_rates": _category_rates(summary),
        "by_size": {str(side): _category_counts(summary.by_size[side].failures) for side in sorted(summary.by_size)},
        "fail_steps": {name: {str(step): count for step, count in steps.items()}
                       for name, steps in summary.fail_steps.items()},
        "exemplars": exemplars,
    }


def _category_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """Every failure category's count, in :data:`CATEGORIES` order (0 for one not seen)."""
    return {name: int(counts[name]) if name in counts else 0 for name in CATEGORIES}


def _category_rates(summary: FailureSummary) -> dict[str, float]:
    """Every failure category's share of the episodes, in :data:`CATEGORIES` order (0 for one not seen)."""
    return {name: summary.failure_rates[name] if name in summary.failure_rates else 0.0 for name in CATEGORIES}


def _kept_history(history: list[HistoryEntry], options: ContextOptions) -> list[HistoryEntry]:
    """The last ``history_limit`` entries (none when the limit is 0)."""
    return history[-options.history_limit:] if options.history_limit else []


def _pick_exemplars(exemplars: Iterable[Exemplar], failures: Mapping[str, int], options: ContextOptions) -> list[dict]:
    """Up to ``max_exemplars``, one per category in turn, most frequent category first (so the few shown
    cover the failures that matter most)."""
    by_category: dict[str, list[Exemplar]] = {}
    for example in exemplars:
        by_category.setdefault(example.category, []).append(example)
    order = sorted(by_category, key=lambda name: (-failures.get(name, 0), name))
    picked: list[dict] = []
    round_index = 0
    while len(picked) < options.max_exemplars and any(round_index < len(by_category[name]) for name in order):
        for name in order:
            if len(picked) >= options.max_exemplars:
                break
            if round_index < len(by_category[name]):
                example = by_category[name][round_index]
                text = example.text
                if len(text) > options.exemplar_chars:
                    text = text[: options.exemplar_chars] + "\n... (cut)"
                picked.append({
                    "category": name,
                    "size": example.size,
                    "agents": example.agents,
                    "source": example.source,
                    "text": text,
                })
        round_index += 1
    return picked


def _env_stats_data(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                    options: ContextOptions) -> dict:
    """``{config: StageConfig.to_dict(), generated: {side: {count, requested_hole_ratio, achieved_hole_ratio,
    requested_wait_ratio, achieved_wait_ratio, candidates, rejected_unsolvable, rejected_solver_limit,
    rejected_wait_label}}, achieved: {side: {episodes, hole_ratio_mean, needs_wait_share, optimal_makespan_mean,
    optimal_makespan_min, optimal_makespan_max}}, instance_stats: {failed, succeeded}, training_signal: {side:
    {groups, reward_mean, valid_rate, zero_variance_share, abs_advantage_mean}}, training_signal_trainer,
    training_signal_rounds: [{side: valid_rate}]}``; ``generated``, ``achieved`` and ``training_signal`` are empty
    when the evidence has no generator's report, ``size_stats`` or training signal; ``training_signal_trainer``
    (``grpo`` or ``rft``: whose groups) is then None; ``training_signal_rounds`` (each sampling round's own valid
    rate per side, in order) is empty unless the trainer samples in rounds."""
    size_stats = evidence.size_stats
    signal = evidence.training_signal.by_size if evidence.training_signal is not None else {}
    generation = evidence.generation or {}
    return {
        "config": config.to_dict(),
        "generated": {
            str(side): {key: getattr(generation[side], key) for key in _GENERATED_KEYS} for side in sorted(generation)
        },
        "achieved": {
            str(side): {key: getattr(size_stats[side], key) for key in _ACHIEVED_KEYS} for side in sorted(size_stats)
        },
        "instance_stats": {name: stats.to_dict() for name, stats in evidence.failures.instance_stats.items()},
        "training_signal": {
            str(side): {key: _score(getattr(signal[side], key)) for key in SIGNAL_FIGURES} for side in sorted(signal)
        },
        "training_signal_trainer": evidence.training_signal.trainer if evidence.training_signal is not None else None,
        "training_signal_rounds": [
            {str(side): _score(by_size[side].valid_rate) for side in sorted(by_size)}
            for by_size in (evidence.training_signal.rounds if evidence.training_signal is not None else ())
        ],
    }


def _history_data(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                  options: ContextOptions) -> dict:
    """``{stages: [{stage, config, valid_rate, optimal_rate, zero_variance_share}]}``: the last
    ``history_limit`` entries (missing or non-finite scores are None; the config as its document, or None)."""
    kept = _kept_history(history, options)
    return {
        "stages": [
            {
                "stage": entry.stage,
                "config": entry.config.to_dict() if entry.config is not None else None,
                **{key: _score(getattr(entry, key)) for key in _HISTORY_SCORES},
            }
            for entry in kept
        ]
    }


def _score(value: Any) -> float | None:
    """A history score as a finite float, or None (missing, not a number, NaN): the data stays strict JSON."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


# --- sections: text ------------------------------------------------------------------------------------------
# Each reads the typed evidence, as its data twin does: neither reads the other's output.
def _group_line(label: str, group: GroupStats | FailureSummary) -> str:
    return (
        f"  {label}: {counted(group.episodes, 'episode')}, valid {percent(group.valid_rate)}, "
        f"optimal {percent(group.optimal_rate)}"
    )


_WAIT_LABELS = {"needs_wait": "needs a wait", "no_wait": "no wait needed"}


def _behavior_text(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                   options: ContextOptions) -> list[str]:
    summary = evidence.failures
    lines = [
        "## behavior: how the policy did on this stage's validation instances",
        f"{counted(summary.episodes, 'episode')}: valid {percent(summary.valid_rate)} ({summary.valid}), "
        f"optimal {percent(summary.optimal_rate)} ({summary.optimal}); reward mean {figure(summary.reward_mean)}, "
        f"std {figure(summary.reward_std)}; {figure(summary.completion_tokens_mean, 1)} tokens per answer",
        "per map size:",
    ]
    for side in sorted(summary.by_size):
        line = _group_line(f"{side}x{side}", summary.by_size[side])
        if side in evidence.size_stats:
            extra = evidence.size_stats[side]
            line += (
                f", reward {figure(extra.reward_mean)} +- {figure(extra.reward_std)}, "
                f"{figure(extra.completion_tokens_mean, 1)} tokens"
            )
        lines.append(line)
    lines.append("per agent count:")
    lines += [_group_line(counted(k, "agent"), summary.by_agents[k]) for k in sorted(summary.by_agents)]
    if len(summary.by_agents_size) > 1:
        lines.append("per agents x size:")
        lines += [_group_line(key_text(key, "x"), group) for key, group in summary.by_agents_size.items()]
    if summary.by_wait:
        lines.append("instances that need a wait (no plan of shortest paths solves them) vs those that do not:")
        lines += [_group_line(_WAIT_LABELS[kind] if kind in _WAIT_LABELS else kind, group)
                  for kind, group in summary.by_wait.items()]
        for side in sorted({side for side, _ in summary.by_size_wait}):
            parts = [f"{_WAIT_LABELS[kind]} {percent(group.valid_rate)} of {group.episodes}"
                     for kind in ("needs_wait", "no_wait") if (side, kind) in summary.by_size_wait
                     for group in [summary.by_size_wait[side, kind]]]
            lines.append(f"  {side}x{side}: valid " + ", ".join(parts))
    if summary.by_size_makespan:
        lines.append("valid per optimal makespan (the plan length asked; makespan valid/episodes):")
        by_side: dict[int, list[str]] = {}
        for (side, makespan), group in summary.by_size_makespan.items():
            by_side.setdefault(side, []).append(f"{makespan} {group.valid}/{group.episodes}")
        lines += [f"  {side}x{side}: " + ", ".join(parts) for side, parts in by_side.items()]
    return lines


def _failures_text(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                   options: ContextOptions) -> list[str]:
    lines = ["## failures: what went wrong (categories, per size, when, examples)"]
    summary = evidence.failures
    seen = {name: count for name, count in _category_counts(summary.failures).items() if count}
    if not seen:
        return lines + ["no failures"]
    rates = _category_rates(summary)
    lines.append("failures: " + ", ".join(f"{name} {count} ({percent(rates[name])})" for name, count in seen.items()))
    lines.append("per map size:")
    for side in sorted(summary.by_size):
        counts = _category_counts(summary.by_size[side].failures)
        shown = ", ".join(f"{name} {count}" for name, count in counts.items() if count) or "none"
        lines.append(f"  {side}x{side}: {shown}")
    for name, steps in summary.fail_steps.items():
        lines.append(f"{name} at steps (step:count): " + ", ".join(f"{step}:{n}" for step, n in steps.items()))
    exemplars = _pick_exemplars(summary.exemplars, _category_counts(summary.failures), options)
    if exemplars:
        lines.append("examples of failed episodes:")
        for example in exemplars:
            lines += [example["text"], ""]
        lines.pop()
    return lines


def _env_stats_text(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                    options: ContextOptions) -> list[str]:
    lines = [
        "## env_stats: the current config, what the generator made of it, the evaluated instances",
        "current config: " + describe_config(config),
    ]
    generation = evidence.generation or {}
    if generation:
        lines.append("what the generator made of the current config (the stage's training instances):")
        for side in sorted(generation):
            made = generation[side]
            rejected = ", ".join(f"{count} {key.removeprefix('rejected_').replace('_', ' ')}"
                                 for key in ("rejected_unsolvable", "rejected_solver_limit", "rejected_wait_label",
                                             "rejected_makespan")
                                 for count in [getattr(made, key)] if count)
            lines.append(
                f"  {side}x{side}: {counted(made.count, 'instance')}; holes {figure(made.achieved_hole_ratio, 3)} "
                f"(asked {figure(made.requested_hole_ratio, 3)}), needs-wait share "
                f"{figure(made.achieved_wait_ratio, 3)} (asked {figure(made.requested_wait_ratio, 3)}); "
                f"{counted(made.candidates, 'candidate')} drawn" + (f", rejected: {rejected}" if rejected else "")
            )
    size_stats = evidence.size_stats
    if size_stats:
        lines.append("the evaluated episodes' instances per size (for a run: the validation set, not the config):")
    for side in sorted(size_stats):
        achieved = size_stats[side]
        lines.append(
            f"  {side}x{side}: {counted(achieved.episodes, 'episode')}; holes {figure(achieved.hole_ratio_mean, 3)}, "
            f"needs-wait share {figure(achieved.needs_wait_share, 3)}, optimal makespan mean "
            f"{figure(achieved.optimal_makespan_mean, 1)} (range {achieved.optimal_makespan_min}.."
            f"{achieved.optimal_makespan_max})"
        )
    stats = evidence.failures.instance_stats
    if "failed" in stats and "succeeded" in stats:
        failed, succeeded = stats["failed"], stats["succeeded"]

        def mean(group: InstanceStats, name: str) -> float | None:
            # a group without episodes has no means: n/a, not the 0.000 its record holds (all valid, or none valid)
            return getattr(group, name) if group.episodes else None

        lines.append(
            f"failed vs succeeded instances: holes {figure(mean(failed, 'hole_ratio_mean'), 3)} vs "
            f"{figure(mean(succeeded, 'hole_ratio_mean'), 3)}, needs-wait share "
            f"{figure(mean(failed, 'needs_wait_share'))} vs {figure(mean(succeeded, 'needs_wait_share'))}, optimal "
            f"makespan {figure(mean(failed, 'optimal_makespan_mean'), 1)} vs "
            f"{figure(mean(succeeded, 'optimal_makespan_mean'), 1)}, agents {figure(mean(failed, 'agents_mean'), 1)} "
            f"vs {figure(mean(succeeded, 'agents_mean'), 1)}"
        )
    signal = evidence.training_signal
    if signal is not None and signal.by_size:
        lines.append(f"training signal of the stage just trained ({SIGNAL_TRAINERS[signal.trainer]}):")
        for side in sorted(signal.by_size):
            figures = signal.by_size[side]
            groups = _score(figures.groups)
            lines.append(
                f"  {side}x{side}: {int(groups) if groups is not None else '-'} groups, reward "
                f"{figure(_score(figures.reward_mean))}, sampled valid {percent(_score(figures.valid_rate))}, "
                f"zero-variance {percent(_score(figures.zero_variance_share))}, mean |advantage| "
                f"{figure(_score(figures.abs_advantage_mean))}"
            )
        if len(signal.rounds) >= 2:
            lines.append("  sampled valid by round: " + ", ".join(
                f"{side}x{side} " + " -> ".join(
                    percent(_score(by_size[side].valid_rate) if side in by_size else None) for by_size in signal.rounds)
                for side in sorted({side for by_size in signal.rounds for side in by_size})))
    return lines


def _history_text(evidence: StageEvidence, config: StageConfig, history: list[HistoryEntry],
                  options: ContextOptions) -> list[str]:
    lines = ["## history: previous stages, their configs and the scores they led to"]
    kept = _kept_history(history, options)
    if not kept:
        return lines + ["no previous stages"]
    for entry in kept:
        scores = ", ".join(f"{key.replace('_', ' ')} {percent(value)}" for key in _HISTORY_SCORES
                           for value in [_score(getattr(entry, key))] if value is not None)
        lines.append(f"stage {entry.stage}: {scores or 'no scores'}")
        if entry.config is not None:
            lines.append("  config: " + describe_config(entry.config))
    return lines


@dataclass(frozen=True)
class _Section:
    data: Callable[[StageEvidence, StageConfig, list[HistoryEntry], ContextOptions], dict]
    text: Callable[[StageEvidence, StageConfig, list[HistoryEntry], ContextOptions], list[str]]


# The registry of sections: a new kind of evidence is one entry here (and a name in CONTEXT_SECTIONS).
SECTIONS: dict[str, _Section] = {
    "behavior": _Section(_behavior_data, _behavior_text),
    "failures": _Section(_failures_data, _failures_text),
    "env_stats": _Section(_env_stats_data, _env_stats_text),
    "history": _Section(_history_data, _history_text),
}


def build_context(
    evidence: StageEvidence | FailureSummary,
    config: StageConfig,
    history: Sequence[HistoryEntry] | None = None,
    sections: str | Iterable[str] | None = CONTEXT_SECTIONS,
    *,
    max_exemplars: int = DEFAULT_MAX_EXEMPLARS,
    exemplar_chars: int = DEFAULT_EXEMPLAR_CHARS,
    history_limit: int = DEFAULT_HISTORY_LIMIT,
) -> EngineerContext:
    """The engineer's context from a stage's evidence, its config and the run's history.

    ``evidence``: a :class:`StageEvidence` (see :mod:`engineer.evidence`; ``StageEvidence.from_dict`` reads a
    ``summary.json``), or a bare :class:`FailureSummary` (no per-size figures). ``history``: the previous stages,
    oldest first (``HistoryEntry.from_dict`` reads a history document). ``sections``: which sections to include
    (names, a comma-separated string, or None for all; see :func:`parse_sections`).
    """
    if not isinstance(config, StageConfig):
        raise ConfigError("config", config, "a StageConfig")
    if isinstance(evidence, FailureSummary):
        evidence = StageEvidence(evidence)
    if not isinstance(evidence, StageEvidence):
        raise ConfigError("evidence", evidence, "a StageEvidence or a FailureSummary (StageEvidence.from_dict reads "
                          "a summary document)")
    history_list = list(history or [])
    for index, entry in enumerate(history_list):
        if not isinstance(entry, HistoryEntry):
            raise ConfigError(f"history[{index}]", entry, "a HistoryEntry (HistoryEntry.from_dict reads a history "
                              "document)")
    options = ContextOptions(max_exemplars, exemplar_chars, history_limit)
    chosen = parse_sections(sections)
    data: dict[str, Any] = {"sections": list(chosen)}
    blocks = []
    for name in chosen:
        section = SECTIONS[name]
        data[name] = section.data(evidence, config, history_list, options)
        blocks.append("\n".join(section.text(evidence, config, history_list, options)))
    text = "\n\n".join(blocks) if blocks else "(no evidence: every context section is switched off)"
    return EngineerContext(sections=chosen, data=data, text=text + "\n", evidence=evidence)


__all__ = [
    "CONTEXT_SECTIONS",
    "ContextOptions",
    "EngineerContext",
    "HistoryEntry",
    "SECTIONS",
    "build_context",
    "describe_config",
    "parse_sections",
]
