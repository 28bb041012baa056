"""The learnability engineer: train where the policy succeeds about half the time.

A size whose success rate is ``p`` gives GRPO groups whose reward varies with probability rising in ``p(1 - p)``
(a group of ``G`` samples carries no signal with probability ``p^G + (1-p)^G``); a solved size (``p = 1``) and a
hopeless one (``p = 0``) teach nothing. Per prompt this is the sampling rule of learning at the frontier of
learnability; here it is applied per map size, from the stage's validation rates:

1. Every used size with at least ``min_episodes`` validation episodes gets the score ``p(1 - p)``, ``p`` its
   ``metric`` (``valid_rate`` by default, or ``optimal_rate``). Sizes without enough episodes keep their weight.
2. The scored sizes share the weight they had between them: ``floor`` each (so no used size drops out, and a
   size that becomes learnable again is still seen), the rest in proportion to the scores. When every score is 0
   (all solved or all hopeless) nothing moves: there is no evidence of where the signal is.
3. ``smoothing`` in [0, 1) keeps that share of the previous weights: ``w = smoothing * old + (1 - smoothing) * new``.

Hole and wait ratios, agents, samples, seed, slip and horizon never change: this engineer decides only what the
next stage sees how often. Ratios are rounded to 4 decimals (the largest absorbs the rounding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.options import DeclaredOptions, choice, integer, number
from engineer.rule import RULE_METRICS, behavior_rates, rounded_shares
from simulator.config import StageConfig
from simulator.errors import ConfigError


def learnability_weights(rates: dict[int, float], previous: dict[int, float], floor: float,
                         smoothing: float) -> dict[int, float] | None:
    """The new weights of the sizes in ``rates`` (the mass they held in ``previous`` is redistributed by
    ``p(1 - p)`` above ``floor`` each), or None when every score is 0. Sizes of ``previous`` without a rate keep
    their weight. Not rounded."""
    scores = {side: rate * (1.0 - rate) for side, rate in rates.items()}
    total = math.fsum(scores.values())
    if total <= 0.0:
        return None
    mass = math.fsum(previous[side] for side in rates)
    floor_each = min(floor, 1.0 / len(rates)) * mass
    spread = mass - floor_each * len(rates)
    weights = dict(previous)
    for side, score in scores.items():
        fresh = floor_each + spread * score / total
        weights[side] = smoothing * previous[side] + (1.0 - smoothing) * fresh
    return weights


@dataclass
class LearnabilityEngineer(DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("learnability", floor=0.1, smoothing=0.5)``."""

    floor: float = number(0.05, 0, 1.0)
    """Least share of the scored sizes' weight each keeps (times their total weight)."""
    smoothing: float = number(0.0, 0, 0.99)
    """Share of the previous weights kept, in [0, 1)."""
    min_episodes: int = integer(4, 0)
    """Fewer validation episodes of a size than this: no evidence, the size keeps its weight."""
    metric: str = choice("valid_rate", RULE_METRICS)
    """The evidence's rate it reads per size: ``valid_rate`` or ``optimal_rate``."""
    name: str = "learnability"

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """The next config's weights by ``p(1 - p)``; ``seed`` is unused (the rule is deterministic)."""
        decider = Decider(self, context.text, config)
        notes, decide = decider.notes, decider.decide

        rates = behavior_rates(decider, context, "keeps its weight")
        if rates is None:
            return decider.without_behavior()
        previous = {side: spec.data_ratio for side, spec in config.sizes.items()}
        weights = learnability_weights(rates, previous, self.floor, self.smoothing) if rates else None
        if weights is None:
            notes.append("every scored size is solved or hopeless (p(1-p) = 0): no weight moves" if rates
                         else "no size has enough episodes: no weight moves")
            return decide(config, "learnability: nothing to change")
        shares = rounded_shares(weights)
        sizes = {side: replace(spec, data_ratio=shares[side]) for side, spec in config.sizes.items()}
        for side, rate in sorted(rates.items()):
            notes.append(f"size {side}: {self.metric} {rate:.3f}, p(1-p) {rate * (1 - rate):.3f}: data_ratio "
                         f"{previous[side]!r} -> {shares[side]!r}")
        try:
            proposal = replace(config, sizes=sizes)
        except ConfigError as error:  # not expected (shares of used sizes stay positive); keep the config, say why
            return decide(None, f"rejected: the learnability proposal was invalid: {error}")
        return decide(proposal, "learnability: accepted" if proposal != config else "learnability: nothing to change")


__all__ = ["LearnabilityEngineer", "learnability_weights"]
