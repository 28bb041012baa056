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

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engineer.evidence import StageEvidence, StageScores
from policy.signal import SIGNAL_FIGURES, SIGNAL_TRAINERS, TrainingSignal
from replays.mining import CATEGORIES, Exemplar, FailureSummary, GroupStats
from simulator.documents import key_text, read_key
from simulator.config import StageConfig
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
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
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
        return self.data.get(name) if name in self.sections else None

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
def _side_order(keys: Iterable[str]) -> list[str]:
    """Size or agent keys ("4", "10") in numeric order; odd keys last, as text."""
    return sorted(keys, key=lambda key: (0, int(key)) if str(key).isdigit() else (1, str(key)))


def describe_config(config: Mapping[str, Any]) -> str:
    """A config document in one line: ``agents 2, samples 2000, slip 0.0; sizes 4 (data 0.5, holes 0.2, wait 0.3), ..``.

    Anything that is not a well-formed document is shown as (cut) JSON instead.
    """
    try:
        sizes = ", ".join(
            f"{side} (data {figure(spec['data_ratio'], 3)}, holes {figure(spec['hole_ratio'], 3)}, "
            f"wait {figure(spec['wait_ratio'], 3)})"
            for side, spec in config["sizes"].items()
        )
        agents = config["agents"]
        agents_text = f"{agents[0]}-{agents[1]}" if isinstance(agents, list) else str(agents)
        return f"agents {agents_text}, samples {config['samples']}, slip {config.get('slip', 0.0)}; sizes {sizes}"
    except (KeyError, TypeError, IndexError, AttributeError):
        shown = json.dumps(config, default=repr)
        return shown if len(shown) <= 400 else shown[:397] + "..."


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
        extra = evidence.size_stats.get(side)
        if extra is not None:
            entry.update({key: getattr(extra, key) for key in _SIZE_EXTRAS})
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
    failures = {name: int(summary.failures.get(name, 0)) for name in CATEGORIES}
    exemplars = _pick_exemplars(summary.exemplars, failures, options)
    return {
        "failures": failures,
        "failure_rates": {name: summary.failure_rates.get(name, 0.0) for name in CATEGORIES},
        "by_size": {
            str(side): {name: int(summary.by_size[side].failures.get(name, 0)) for name in CATEGORIES}
            for side in sorted(summary.by_size)
        },
        "fail_steps": {name: {str(step): count for step, count in steps.items()}
                       for name, steps in summary.fail_steps.items()},
        "exemplars": exemplars,
    }


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
    kept = history[-options.history_limit:] if options.history_limit else []
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
def _group_line(label: str, group: Mapping) -> str:
    return (
        f"  {label}: {counted(group['episodes'], 'episode')}, valid {percent(group['valid_rate'])}, "
        f"optimal {percent(group['optimal_rate'])}"
    )


_WAIT_LABELS = {"needs_wait": "needs a wait", "no_wait": "no wait needed"}


def _behavior_text(data: Mapping) -> list[str]:
    lines = [
        "## behavior: how the policy did on this stage's validation instances",
        f"{counted(data['episodes'], 'episode')}: valid {percent(data['valid_rate'])} ({data['valid']}), "
        f"optimal {percent(data['optimal_rate'])} ({data['optimal']}); reward mean {figure(data['reward']['mean'])}, "
        f"std {figure(data['reward']['std'])}; {figure(data['completion_tokens_mean'], 1)} tokens per answer",
        "per map size:",
    ]
    for side, group in data["by_size"].items():
        line = _group_line(f"{side}x{side}", group)
        if "reward_mean" in group:
            line += (
                f", reward {figure(group['reward_mean'])} +- {figure(group['reward_std'])}, "
                f"{figure(group['completion_tokens_mean'], 1)} tokens"
            )
        lines.append(line)
    lines.append("per agent count:")
    lines += [_group_line(counted(int(k), "agent"), group) for k, group in data["by_agents"].items()]
    if len(data["by_agents_size"]) > 1:
        lines.append("per agents x size:")
        lines += [_group_line(key, group) for key, group in data["by_agents_size"].items()]
    by_wait, by_size_wait = data.get("by_wait") or {}, data.get("by_size_wait") or {}
    if by_wait:
        lines.append("instances that need a wait (no plan of shortest paths solves them) vs those that do not:")
        lines += [_group_line(_WAIT_LABELS.get(key, key), group) for key, group in by_wait.items()]
        sides = sorted({key.partition(":")[0] for key in by_size_wait}, key=lambda side: int(side))
        for side in sides:
            parts = [f"{_WAIT_LABELS.get(kind, kind)} {percent(group['valid_rate'])} of {group['episodes']}"
                     for kind in ("needs_wait", "no_wait") for group in [by_size_wait.get(f"{side}:{kind}")] if group]
            lines.append(f"  {side}x{side}: valid " + ", ".join(parts))
    by_length = data.get("by_size_makespan") or {}
    if by_length:
        lines.append("valid per optimal makespan (the plan length asked; makespan valid/episodes):")
        by_side: dict[str, list[str]] = {}
        for key, group in by_length.items():
            side, _, makespan = key.partition(":")
            by_side.setdefault(side, []).append(f"{makespan} {group['valid']}/{group['episodes']}")
        lines += [f"  {side}x{side}: " + ", ".join(parts) for side, parts in by_side.items()]
    return lines


def _failures_text(data: Mapping) -> list[str]:
    lines = ["## failures: what went wrong (categories, per size, when, examples)"]
    seen = {name: count for name, count in data["failures"].items() if count}
    if not seen:
        return lines + ["no failures"]
    lines.append("failures: " + ", ".join(
        f"{name} {count} ({percent(data['failure_rates'].get(name, 0.0))})" for name, count in seen.items()
    ))
    lines.append("per map size:")
    for side, counts in data["by_size"].items():
        shown = ", ".join(f"{name} {count}" for name, count in counts.items() if count) or "none"
        lines.append(f"  {side}x{side}: {shown}")
    for name, steps in data["fail_steps"].items():
        lines.append(f"{name} at steps (step:count): " + ", ".join(f"{step}:{n}" for step, n in steps.items()))
    if data["exemplars"]:
        lines.append("examples of failed episodes:")
        for example in data["exemplars"]:
            lines += [example["text"], ""]
        lines.pop()
    return lines


def _env_stats_text(data: Mapping) -> list[str]:
    lines = [
        "## env_stats: the current config, what the generator made of it, the evaluated instances",
        "current config: " + describe_config(data["config"]),
    ]
    if data.get("generated"):
        lines.append("what the generator made of the current config (the stage's training instances):")
        for side, made in data["generated"].items():
            rejected = ", ".join(f"{made[key]} {key.removeprefix('rejected_').replace('_', ' ')}"
                                 for key in ("rejected_unsolvable", "rejected_solver_limit", "rejected_wait_label",
                                             "rejected_makespan")
                                 if made.get(key))
            lines.append(
                f"  {side}x{side}: {counted(made['count'], 'instance')}; holes {figure(made['achieved_hole_ratio'], 3)} "
                f"(asked {figure(made['requested_hole_ratio'], 3)}), needs-wait share "
                f"{figure(made['achieved_wait_ratio'], 3)} (asked {figure(made['requested_wait_ratio'], 3)}); "
                f"{counted(made['candidates'], 'candidate')} drawn" + (f", rejected: {rejected}" if rejected else "")
            )
    if data["achieved"]:
        lines.append("the evaluated episodes' instances per size (for a run: the validation set, not the config):")
    for side, achieved in data["achieved"].items():
        lines.append(
            f"  {side}x{side}: {counted(achieved['episodes'], 'episode')}; holes {figure(achieved['hole_ratio_mean'], 3)}, "
            f"needs-wait share {figure(achieved['needs_wait_share'], 3)}, optimal makespan mean "
            f"{figure(achieved['optimal_makespan_mean'], 1)} (range {achieved['optimal_makespan_min']}.."
            f"{achieved['optimal_makespan_max']})"
        )
    failed, succeeded = data["instance_stats"].get("failed"), data["instance_stats"].get("succeeded")
    if failed and succeeded:
        # a group without episodes has no means: n/a, not the 0.000 its record holds (all valid, or none valid)
        failed, succeeded = ({key: (value if group.get("episodes") else None) for key, value in group.items()}
                             for group in (failed, succeeded))
        lines.append(
            f"failed vs succeeded instances: holes {figure(failed.get('hole_ratio_mean'), 3)} vs "
            f"{figure(succeeded.get('hole_ratio_mean'), 3)}, needs-wait share {figure(failed.get('needs_wait_share'))} vs "
            f"{figure(succeeded.get('needs_wait_share'))}, optimal makespan {figure(failed.get('optimal_makespan_mean'), 1)}"
            f" vs {figure(succeeded.get('optimal_makespan_mean'), 1)}, agents {figure(failed.get('agents_mean'), 1)} vs "
            f"{figure(succeeded.get('agents_mean'), 1)}"
        )
    if data.get("training_signal"):
        lines.append(f"training signal of the stage just trained "
                     f"({SIGNAL_TRAINERS[data.get('training_signal_trainer') or 'grpo']}):")
        for side, figures in data["training_signal"].items():
            groups = figures["groups"]
            lines.append(
                f"  {side}x{side}: {int(groups) if groups is not None else '-'} groups, reward "
                f"{figure(figures['reward_mean'])}, sampled valid {percent(figures['valid_rate'])}, zero-variance "
                f"{percent(figures['zero_variance_share'])}, mean |advantage| {figure(figures['abs_advantage_mean'])}"
            )
        rounds = data.get("training_signal_rounds") or []
        if len(rounds) >= 2:
            lines.append("  sampled valid by round: " + ", ".join(
                f"{side}x{side} " + " -> ".join(percent(by_size.get(side)) for by_size in rounds)
                for side in _side_order({side: None for by_size in rounds for side in by_size})))
    return lines


def _history_text(data: Mapping) -> list[str]:
    lines = ["## history: previous stages, their configs and the scores they led to"]
    if not data["stages"]:
        return lines + ["no previous stages"]
    for entry in data["stages"]:
        scores = ", ".join(
            f"{key.replace('_', ' ')} {percent(entry[key])}" for key in _HISTORY_SCORES if entry.get(key) is not None
        )
        lines.append(f"stage {entry['stage']}: {scores or 'no scores'}")
        if isinstance(entry.get("config"), Mapping):
            lines.append("  config: " + describe_config(entry["config"]))
    return lines


@dataclass(frozen=True)
class _Section:
    data: Callable[[StageEvidence, StageConfig, list[HistoryEntry], ContextOptions], dict]
    text: Callable[[Mapping], list[str]]


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
        blocks.append("\n".join(section.text(data[name])))
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
