"""What an engineer that writes instances reads besides the context: the stage's instances and the evidence's episodes.

Most engineers edit the stage config, a distribution, from the evidence's figures (:mod:`engineer.context`). Two
hand the next stage explicit instances (``EngineerDecision.instances``): ``replay`` replays instances the stage
trained on (:mod:`engineer.replay`), ``failures`` cuts new ones from the evidence set's failed episodes
(:mod:`engineer.failures`). They need the instances themselves, which the context does not carry, and the content
a training instance must never have. An engineer that wants them has a ``load_material(material)`` method; the stage
loop (``curriculum.loop.run``) calls it with a :class:`StageMaterial` before each proposal. Without it (``mapf-lake
engineer`` on replays alone) such an engineer proposes no instances and says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replays.types import Episode
from simulator.generator import LabelledInstance


@dataclass(frozen=True)
class StageMaterial:
    """The instances behind one decision."""

    stage: int
    """The stage just trained (0: the decision before stage 1, from the warm start's or untrained model's evidence)."""
    bank: tuple[LabelledInstance, ...] = ()
    """The instances the stage trained on (generated and replayed; empty before stage 1)."""
    evidence: tuple[Episode, ...] = ()
    """The evidence set's episodes, as the stage's validation replays hold them (the policy's greedy answers)."""
    protected: frozenset[bytes] = field(default_factory=frozenset)
    """Content keys (``Instance.content_key``) no training instance may have: the run's test and evidence sets."""


__all__ = ["StageMaterial"]
