"""A stage's own training signal: what its groups of samples looked like, per map side and per agents x side.

:class:`policy.rewards.StageReward` tallies the groups a GRPO trainer scores and returns them as a
:class:`TrainingSignal` (:meth:`~policy.rewards.StageReward.signal`); a rejection-sampling trainer records its
rounds' samples the same way. The engineer reads it (``engineer.context``: the ``env_stats`` section), the stage
record keeps it (``stage.json``'s ``train.signal``). Keys are ints and ``(agents, side)`` pairs in memory, text
only in :meth:`TrainingSignal.to_dict` / :meth:`TrainingSignal.from_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from simulator.documents import NumberRecord, key_text, pair_key, read_key, read_mapping, read_table, side_key
from simulator.errors import ConfigError


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
TRAINERS = tuple(SIGNAL_TRAINERS)
"""The stage trainers' names, declared once: ``training.trainer``'s choices and the keys of
``curriculum.training.trainers.STAGE_TRAINERS`` (a test holds the two to this)."""


def _check_trainer(trainer: str, where: str) -> str:
    if trainer not in SIGNAL_TRAINERS:
        raise ConfigError(f"{where}.trainer", trainer, f"one of {', '.join(SIGNAL_TRAINERS)}")
    return trainer


def _by_side(by_size: Mapping[int, SignalFigures]) -> dict[str, Any]:
    return {str(side): figures.to_dict() for side, figures in by_size.items()}


@dataclass(frozen=True)
class TrainingSignal:
    """A stage's own training signal (:meth:`policy.rewards.StageReward.signal`): a GRPO stage's groups, or a
    rejection-sampling stage's samples of each instance scored as GRPO would score a 0/1 valid reward."""

    by_size: Mapping[int, SignalFigures]
    """Keyed by map side (``6``; ``"6"`` in the document)."""
    by_agents_size: Mapping[tuple[int, int], SignalFigures] = field(default_factory=dict)
    """Keyed by ``(agents, side)`` (``"3x6"`` in the document)."""
    trainer: str = "grpo"
    """Whose groups: a key of :data:`SIGNAL_TRAINERS` (records without it are GRPO's)."""
    rounds: tuple[Mapping[int, SignalFigures], ...] = ()
    """A trainer that samples in rounds (rejection sampling): each round's own groups per map side, in order;
    empty when not recorded (GRPO, and earlier records)."""

    def __post_init__(self) -> None:
        _check_trainer(self.trainer, "training_signal")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by_size": _by_side(self.by_size),
                               "by_agents_size": {key_text(key, "x"): figures.to_dict()
                                                  for key, figures in self.by_agents_size.items()}}
        if self.trainer != "grpo":  # GRPO's records stay as they were written before the field existed
            out["trainer"] = self.trainer
        if self.rounds:
            out["rounds"] = [_by_side(by_size) for by_size in self.rounds]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "training_signal") -> "TrainingSignal":
        """``by_size`` is required; ``by_agents_size`` and ``rounds`` read as empty and ``trainer`` as ``grpo``
        when absent. A key that is not a side (``"6"``) or a pair (``"3x6"``) raises ConfigError naming it."""
        by_agents_size = (read_table(data, "by_agents_size", where, SignalFigures.from_dict, pair_key("x"))
                          if read_key(data, "by_agents_size", where, "mapping", optional=True) is not None else {})
        trainer = _check_trainer(read_key(data, "trainer", where, "str", optional=True) or "grpo", where)
        rounds = tuple(read_mapping(by_size, f"{where}.rounds[{index}]", SignalFigures.from_dict, side_key)
                       for index, by_size in enumerate(read_key(data, "rounds", where, "list", optional=True) or []))
        return cls(by_size=read_table(data, "by_size", where, SignalFigures.from_dict, side_key),
                   by_agents_size=by_agents_size, trainer=trainer, rounds=rounds)


__all__ = ["SIGNAL_FIGURES", "SIGNAL_TRAINERS", "TRAINERS", "SignalFigures", "TrainingSignal"]
