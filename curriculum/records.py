"""The stage record (``stage-NN/stage.json``) as typed, frozen values.

A run writes one record per finished stage, last, so a stage is complete exactly when its file exists. Inside the
package the record travels as a :class:`StageRecord`; it becomes a dict only at the file boundary
(:meth:`StageRecord.to_dict` when written, :meth:`StageRecord.from_dict` when read back by a resumed run, the
report or ``compare``). Records written before a field existed read back with that field's default (the
``outcome`` of older decisions is derived from ``accepted`` and ``diff``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engineer.context import HistoryEntry
from engineer.decision import DECISION_OUTCOMES, decision_outcome
from simulator.config import StageConfig
from simulator.errors import ConfigError


@dataclass(frozen=True)
class StageScores:
    """What the stage's validation measured (shares in [0, 1], over the run's held-out validation instances)."""

    valid_rate: float
    """Greedy answers that are valid plans."""
    optimal_rate: float
    """Greedy answers that are valid and as short as the solver's optimum."""
    reward_mean: float | None = None
    """Mean reward of the greedy answers (the training reward's scale); None in records that lack it."""
    sampled_valid_rate: float | None = None
    """Sampled pass@1 at the training temperature (``validation.sampled_k`` samples each); None: not measured."""
    zero_variance_share: float | None = None
    """Share of the stage's GRPO groups whose rewards were all equal (no learning signal); None: no GRPO."""

    def to_dict(self) -> dict[str, float]:
        out = {"valid_rate": self.valid_rate, "optimal_rate": self.optimal_rate}
        for name in ("reward_mean", "sampled_valid_rate"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["zero_variance_share"] = self.zero_variance_share
        return out


@dataclass(frozen=True)
class StageDecision:
    """The engineer's decision after the stage: one outcome and what it changed."""

    outcome: str
    """``changed`` (a new config), ``kept`` (nothing to change) or ``rejected`` (its proposal failed; the
    previous config stands)."""
    engineer: str | None = None
    accepted: bool | None = None
    reason: str = ""
    diff: tuple[str, ...] = ()
    """One readable line per changed field (``sizes.6.data_ratio: 0.25 -> 0.14``)."""
    repairs: tuple[str, ...] = ()
    """What was repaired in the engineer's proposal to make it a valid config."""

    def __post_init__(self) -> None:
        if self.outcome not in DECISION_OUTCOMES:
            raise ConfigError("decision.outcome", self.outcome, f"one of {', '.join(DECISION_OUTCOMES)}")

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "engineer": self.engineer, "accepted": self.accepted, "reason": self.reason,
                "diff": list(self.diff), "repairs": list(self.repairs)}

    @classmethod
    def from_decision(cls, decision: dict) -> "StageDecision":
        """From the engineer's ``decision.json`` document (or a stage record's ``decision`` part)."""
        outcome = decision.get("outcome") or decision_outcome(decision.get("accepted"), decision.get("diff"))
        return cls(outcome=outcome, engineer=decision.get("engineer"), accepted=decision.get("accepted"),
                   reason=decision.get("reason") or "", diff=tuple(decision.get("diff") or ()),
                   repairs=tuple(decision.get("repairs") or ()))


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
    decision: StageDecision
    train: dict = field(default_factory=dict)
    """The trainer's own figures (``step_seconds``, ``reward_mean``, ``zero_variance_share``,
    ``completion_tokens_mean``, the per-size training ``signal``, ...), as the trainer reported them."""
    generation: dict = field(default_factory=dict)
    """Per map side (``"6"``), the generator's report of what it achieved (holes, waits, attempts, skips)."""
    churn: dict = field(default_factory=dict)
    """How far the greedy answers moved against the previous checkpoint: ``changed`` (share), ``gained``,
    ``lost`` (counts of validation instances)."""
    timings: dict = field(default_factory=dict)
    """Seconds per phase of the stage: ``instances``, ``train``, ``validation``, ``judging``, ``records``,
    ``engineer``."""
    shared_from: str | None = None
    """The run folder whose stage 1 this stage copied (``train --compare`` trains stage 1 once per seed): its
    training and validation happened there, so this record's timings hold only the copy's own work."""

    def to_dict(self) -> dict[str, Any]:
        out = {"stage": self.stage, "config": self.config.to_dict(), "next_config": self.next_config.to_dict(),
               "model": self.model, "generation": self.generation, "churn": self.churn, "timings": self.timings,
               "train": self.train, "scores": self.scores.to_dict(), "decision": self.decision.to_dict()}
        if self.shared_from is not None:
            out["shared_from"] = self.shared_from
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "stage record") -> "StageRecord":
        """Read a ``stage.json`` document; a missing required part raises ConfigError naming ``where``."""
        if not isinstance(data, dict):
            raise ConfigError(where, type(data).__name__, "a mapping (the stage record mapf-lake train writes)")
        for key in ("stage", "config", "scores", "decision"):
            if key not in data:
                raise ConfigError(f"{where}.{key}", None, "present (the stage record mapf-lake train writes)")
        scores = data["scores"]
        if not isinstance(scores, dict) or not all(key in scores for key in ("valid_rate", "optimal_rate")):
            raise ConfigError(f"{where}.scores", scores, "a mapping with valid_rate and optimal_rate")
        decision = data["decision"]
        if not isinstance(decision, dict):
            raise ConfigError(f"{where}.decision", decision, "a mapping")
        config = StageConfig.from_dict(data["config"])
        train = data.get("train") or {}
        return cls(
            stage=int(data["stage"]), config=config,
            next_config=StageConfig.from_dict(data["next_config"]) if data.get("next_config") else config,
            model=str(data.get("model") or ""),
            scores=StageScores(**{key: scores.get(key) for key in ("valid_rate", "optimal_rate", "reward_mean",
                                                                   "sampled_valid_rate")},
                               zero_variance_share=scores.get("zero_variance_share",
                                                              train.get("zero_variance_share"))),
            decision=StageDecision.from_decision(decision),
            train=train, generation=data.get("generation") or {}, churn=data.get("churn") or {},
            timings=data.get("timings") or {}, shared_from=data.get("shared_from"))

    def history_entry(self) -> HistoryEntry:
        """The stage as an engineer's history lists it: number, config and validation scores."""
        scores = self.scores
        return HistoryEntry(stage=self.stage, config=self.config, valid_rate=scores.valid_rate,
                            optimal_rate=scores.optimal_rate, reward_mean=scores.reward_mean,
                            sampled_valid_rate=scores.sampled_valid_rate,
                            zero_variance_share=scores.zero_variance_share)


__all__ = ["StageDecision", "StageRecord", "StageScores"]
