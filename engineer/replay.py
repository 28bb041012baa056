"""The replay engineer: the next stage replays the instances with the most learning potential.

After Prioritized Level Replay (Jiang, Grefenstette and Rocktäschel, 2021, "Prioritized Level Replay", ICML): the
curriculum keeps a buffer of the levels it has trained on, each with a score of its learning potential and the time
it was last trained on, and replays levels from it drawn by

    P = (1 - rho) * P_S + rho * P_C,   P_S(i) ~ (1 / rank(S_i)) ** (1 / beta),   P_C(i) ~ c - C_i

(rank 1 is the highest score ``S``; ``C_i`` is when level ``i`` was last trained on and ``c`` is now): the most
promising levels first, and levels left alone for a while come back, since a score measured long ago is stale.

Here a level is an instance and time is the stage:

* **Buffer.** The instances the stage trained on (``StageMaterial.bank``, which the stage loop hands over) join the
  buffer, each last trained at this stage; the buffer then keeps the ``buffer_size`` highest-scoring instances
  (ties: the more recently trained first).
* **Score.** PLR scores a level by the agent's own returns on it (its value loss or positive advantage). An
  instance the stage sampled at least ``min_samples`` times (a rejection-sampling stage records each instance's own
  samples: ``StageMaterial.outcomes``) is scored by its own learning potential ``p(1 - p)``, ``p`` the share of its
  samples that were valid; the buffer remembers the last such count of each instance. Any other instance (a GRPO
  stage records outcomes per map size only) is scored by the learning potential of the evidence set's instances
  like it: ``p`` is the ``metric`` on that size's instances of the same optimal makespan
  (``behavior.by_size_makespan``) when they have ``min_episodes`` episodes, else on the size (``behavior.by_size``).
  Every instance is rescored at every decision. One without a score, or scoring 0 (always solved, or never), leaves
  the buffer.
* **Replay.** ``min(round(share * samples), len(buffer), samples - 1)`` instances, drawn without replacement by ``P``
  with the stage's seed (when every instance was trained at this stage, ``P_C`` is undefined and ``P_S`` alone
  draws). They are the decision's ``instances``: the next stage trains on them plus ``samples - n`` generated from
  the config (``curriculum.loop.curriculum``), which this engineer keeps as it is.

Without material (``mapf-lake engineer`` on replays alone) or without the ``behavior`` section nothing is replayed.
The buffer (each instance and the stage it was last trained at) is the engineer's state, in every decision record
(``details["state"]``), handed back by the run through :meth:`ReplayEngineer.load_state`, so a resumed run replays
from the same buffer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.material import ReadsMaterial
from engineer.options import DeclaredOptions, choice, integer, number, state
from engineer.rule import RULE_METRICS
from replays.mining import FailureSummary
from simulator.config import StageConfig
from simulator.documents import is_python_int
from simulator.errors import ConfigError
from simulator.generator import LabelledInstance, certify_labelled
from simulator.text import counted

MAX_BUFFER = 5000  # instances a buffer may hold: every decision record (at most 64 MiB) keeps them, ~2 kB each on 10x10
MAX_STAGE = 1000  # the most stages a run has (curriculum.config: stages)


def _state_int(value: object, where: str, low: int, high: int) -> int:
    """``value`` when it is an integer (not a bool, not 4.0) in ``low..high``; else ConfigError naming ``where``."""
    if not is_python_int(value) or not low <= value <= high:
        raise ConfigError(where, value, f"an integer in [{low}, {high}]")
    return value


def learning_potential(behavior: FailureSummary, side: int, makespan: int, metric: str,
                       min_episodes: int) -> float | None:
    """``p(1 - p)`` of the evidence on ``side``'s instances of optimal makespan ``makespan`` (with at least
    ``min_episodes`` episodes), else on ``side``; None without such evidence."""
    for group in (behavior.by_size_makespan.get((side, makespan)), behavior.by_size.get(side)):
        if group is None or group.episodes < min_episodes:
            continue
        rate = float(getattr(group, metric))
        if 0.0 <= rate <= 1.0:
            return rate * (1.0 - rate)
    return None


def replay_probabilities(scores: list[float], seen: list[int], now: int, temperature: float,
                         staleness: float) -> np.ndarray:
    """PLR's ``(1 - rho) P_S + rho P_C`` over entries ordered best first (``scores`` descending: rank = position + 1);
    ``seen``: the stage each was last trained at, ``now`` the current one. ``P_C`` is left out when every staleness
    is 0."""
    ranks = np.arange(1, len(scores) + 1, dtype=np.float64)
    by_score = (1.0 / ranks) ** (1.0 / temperature)
    by_score /= by_score.sum()
    stale = np.maximum(now - np.asarray(seen, np.float64), 0.0)
    if stale.sum() <= 0.0:
        return by_score
    return (1.0 - staleness) * by_score + staleness * stale / stale.sum()


@dataclass
class ReplayEngineer(ReadsMaterial, DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("replay", share=0.25, buffer_size=1000)``."""

    share: float = number(0.25, 0.0, 0.9)
    """Share of the next stage's samples that are replayed, in [0, 0.9] (PLR's replay probability)."""
    buffer_size: int = integer(1000, 1, MAX_BUFFER)
    """Most instances kept in the buffer."""
    temperature: float = number(0.1, 0.05, 100.0)
    """PLR's rank temperature ``beta``: smaller replays the top ranks more."""
    staleness: float = number(0.1, 0.0, 1.0)
    """PLR's staleness weight ``rho``, in [0, 1]."""
    min_episodes: int = integer(4, 0, 10**9)
    """Least evidence episodes of an instance's kind (size and makespan, or size) to score it by them."""
    min_samples: int = integer(2, 1, 10**9)
    """Least samples of an instance itself (the stage's own, when it records them) to score it by them."""
    metric: str = choice("valid_rate", RULE_METRICS)
    """The evidence's rate it reads per size: ``valid_rate`` or ``optimal_rate``."""
    name: str = "replay"
    buffer: list = state(list)

    def load_state(self, state: dict | None) -> None:
        """Continue from a previous decision's ``details["state"]`` (None or {}: an empty buffer).

        The state comes from a file (the previous decision record), so it is checked before anything is replayed
        from it: at most ``MAX_BUFFER`` entries, each ``{instance, seen[, valid, samples]}`` with ``seen`` a stage
        number and ``0 <= valid <= samples`` integers, and each instance certified again by the generator's
        labelling (:func:`simulator.generator.certify_labelled`: about 0.1 ms an instance on 6x6 boards with 2
        agents: a full buffer of 5,000 reads in about 0.9 s). The first fault is a ConfigError naming
        ``replay state.buffer[i].KEY``, the value and what is allowed."""
        if state is not None and not isinstance(state, Mapping):
            raise ConfigError(f"{self.name} state", state, "a mapping {buffer: [...]}")
        entries = (state or {}).get("buffer") or []
        if not isinstance(entries, list) or len(entries) > MAX_BUFFER:
            raise ConfigError(f"{self.name} state.buffer", entries if not isinstance(entries, list) else
                              f"{len(entries):,} entries", f"a list of at most {MAX_BUFFER:,} entries "
                              "{instance: an instance record, seen: stage[, valid, samples]}")
        self.buffer = [self._entry(entry, f"{self.name} state.buffer[{index}]") for index, entry in enumerate(entries)]

    @staticmethod
    def _entry(entry: object, where: str) -> tuple[LabelledInstance, int, tuple[int, int] | None]:
        """One buffer entry of a state document, checked (see :meth:`load_state`)."""
        if not isinstance(entry, Mapping):
            raise ConfigError(where, entry, "a mapping {instance, seen[, valid, samples]}")
        if "instance" not in entry or "seen" not in entry:
            raise ConfigError(where, sorted(map(str, entry)), "a mapping with the keys instance and seen")
        try:
            item = LabelledInstance.from_dict(entry["instance"])
        except ConfigError as error:
            field = error.field.removeprefix("instance record")
            raise ConfigError(f"{where}.instance{field}", error.value, error.allowed) from None
        certify_labelled(item, f"{where}.instance")
        seen = _state_int(entry["seen"], f"{where}.seen", 0, MAX_STAGE)
        if "samples" not in entry and "valid" not in entry:
            return item, seen, None
        samples = _state_int(entry.get("samples"), f"{where}.samples", 0, 10**12)
        valid = _state_int(entry.get("valid"), f"{where}.valid", 0, samples)
        return item, seen, (valid, samples)

    def state(self) -> dict:
        return {"buffer": [{"instance": item.to_dict(), "seen": seen,
                            **({"valid": own[0], "samples": own[1]} if own is not None else {})}
                           for item, seen, own in self.buffer]}

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Update and rescore the buffer, then draw the replay list (see the module docstring)."""
        decider = Decider(self, context.text, config)
        notes = decider.notes
        replayed: list[LabelledInstance] = []

        def decide(reason: str) -> EngineerDecision:
            return decider.decide(config, reason, replayed)

        material, behavior = self.material, context.behavior
        if material is None:
            notes.append("no stage material (the stage loop hands over the instances trained on): nothing to replay")
            return decide("replay: nothing to replay")
        if behavior is None:
            notes.append("no behavior section in the context: no evidence to score instances by, nothing replayed")
            return decide("replay: nothing to replay")
        now = material.stage
        earlier = {item.instance.content_key(): (item, seen, own) for item, seen, own in self.buffer}
        entries = dict(earlier)
        for item in material.bank:
            key = item.instance.content_key()
            own = material.outcomes.get(key, earlier[key][2] if key in earlier else None)
            entries[key] = (item, now, own)
        scored = []
        by_own = 0
        for key, (item, seen, own) in entries.items():
            if own is not None and own[1] >= self.min_samples:
                rate = own[0] / own[1]
                score: float | None = rate * (1.0 - rate)
                by_own += 1
            else:
                score = learning_potential(behavior, item.size, item.optimal_makespan, self.metric, self.min_episodes)
            if score is not None and score > 0.0:
                scored.append((score, seen, key, item, own))
        scored.sort(key=lambda entry: (-entry[0], -entry[1], entry[2]))
        kept = scored[:self.buffer_size]
        self.buffer = [(item, seen, own) for _, seen, _, item, own in kept]
        notes.append(f"buffer: the {counted(len(material.bank), 'instance')} trained at stage {now} and {len(earlier)} kept from "
                     f"before ({len(entries)} distinct); {by_own} scored by their own samples, the others by the "
                     f"evidence on instances like them; {len(scored)} have learning potential, the best {len(kept)} "
                     "are kept")
        count = min(int(math.floor(self.share * config.samples + 0.5)), len(kept), config.samples - 1)
        if count <= 0:
            notes.append("nothing to replay: " + ("no instance has learning potential by the evidence" if not kept
                                                  else f"share {self.share:g} of {config.samples} samples is 0"))
            return decide("replay: nothing to replay")
        probabilities = replay_probabilities([score for score, *_ in kept], [seen for _, seen, *_ in kept], now,
                                             self.temperature, self.staleness)
        rng = np.random.default_rng([seed % (2**63), 0x9E1A])
        chosen = sorted(rng.choice(len(kept), size=count, replace=False, p=probabilities).tolist())
        replayed = [kept[index][3] for index in chosen]
        scores = [kept[index][0] for index in chosen]
        notes.append(f"replaying {count} of {config.samples} samples (share {self.share:g}), drawn by rank "
                     f"(temperature {self.temperature:g}) and staleness (weight {self.staleness:g}): learning "
                     f"potential {min(scores):.3f}..{max(scores):.3f}, "
                     f"{sum(now - kept[index][1] > 0 for index in chosen)} from earlier stages")
        return decide(f"replay: {counted(count, 'instance')} replayed")


__all__ = ["ReplayEngineer", "learning_potential", "replay_probabilities"]
