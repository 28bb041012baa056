"""What an engineer that writes instances reads besides the context: the stage's instances and the evidence's episodes.

Most engineers edit the stage config, a distribution, from the evidence's figures (:mod:`engineer.context`). Two
hand the next stage explicit instances (``EngineerDecision.instances``): ``replay`` replays instances the stage
trained on (:mod:`engineer.replay`), ``failures`` cuts new ones from the evidence set's failed episodes
(:mod:`engineer.failure_cuts`). They need the instances themselves, which the context does not carry, and the content
a training instance must never have. An engineer that wants them derives :class:`ReadsMaterial`, whose
``load_material(material)`` the stage loop (``curriculum.loop.curriculum``) calls with a :class:`StageMaterial` before each
proposal. Without it (``mapf-lake engineer`` on replays alone) such an engineer proposes no instances and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.documents import read_key
from replays.types import Episode
from simulator.errors import ConfigError, short_repr
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
    outcomes: Mapping[bytes, tuple[int, int]] = field(default_factory=dict)
    """The stage's own samples of each instance it sampled, by content key: ``(valid samples, samples)``
    (a rejection-sampling stage's ``outcomes.json``; empty for a GRPO stage, which records outcomes per size)."""


def read_outcomes(document: Any, where: str = "outcomes") -> dict[bytes, tuple[int, int]]:
    """``{"outcomes": {hex content key: [valid, samples]}}`` (``curriculum.loop.records.OUTCOMES_FILE``) as
    ``{key: (valid, samples)}``; a malformed entry raises ConfigError naming it."""
    table = read_key(document, "outcomes", where, "mapping")
    out = {}
    for key, pair in table.items():
        name = f"{where}.outcomes.{short_repr(key, 24)}"
        try:
            content = bytes.fromhex(key)
        except ValueError:
            raise ConfigError(name, key, "an instance's content key in hex") from None
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(n, int) and not isinstance(n, bool)
                                                                  for n in pair) and 0 <= pair[0] <= pair[1]):
            raise ConfigError(name, pair, "[valid samples, samples] with 0 <= valid <= samples")
        out[content] = (pair[0], pair[1])
    return out


class ReadsMaterial:
    """Base of an engineer that reads the stage's material: ``material`` is None until the stage loop calls
    :meth:`load_material` (never, for ``mapf-lake engineer`` on replays alone)."""

    material: StageMaterial | None = None

    def load_material(self, material: StageMaterial) -> None:
        """The stage's instances, the evidence's episodes and the protected content, before ``propose``."""
        self.material = material


__all__ = ["ReadsMaterial", "StageMaterial", "read_outcomes"]
