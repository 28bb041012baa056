"""The progress engineer: train where the policy is measurably learning (absolute learning progress per size).

Success (``rule``), disagreement (``learnability``'s ``p(1 - p)``) and advantage (``bandit``) say where a stage's
groups *could* teach; this engineer reads where the policy *did* change. Its evidence is the training signal's
sampled valid rate per map size, from training samples only (never the validation set):

* a trainer that samples in rounds (rejection sampling, ``env_stats.training_signal_rounds``) gives one rate per
  size per round;
* otherwise each stage gives one (``env_stats.training_signal``'s ``valid_rate``).

The rates of a size, in order across rounds and stages, make a series; each step of it is one observation of
that size's learning progress, measured on the ``scale`` option: ``logit`` (the default) ``|logit(rate) -
logit(previous rate)|``, rates clipped to [0.01, 0.99]; ``absolute`` ``|rate - previous rate|``. Both are
absolute values, so forgetting counts as much as learning: a size the policy loses needs data as much as one
it gains. On a logistic learning curve the absolute change is ``p(1 - p)`` times the change of the log-odds,
so ``absolute`` progress favours the sizes near a 50% rate whatever their speed (what ``learnability`` already
does); the log-odds change measures how fast a size is learned apart from how often it already succeeds.
A size's value moves toward each observation,
``value += step_size * (observation - value)``, an exponential recency-weighted average, so an early spurt
fades when a size stops moving. The next stage's ``data_ratio`` per size is ``floor`` each plus the rest in
proportion to the values; a size never valued gets the mean of the valued ones. When no size has a value, or
every value is 0, nothing moves.

The state (``values``; ``rates``: each size's last rate, so the step from one stage's last round to the next
stage's first counts too) is in every decision record (``details["state"]``); the run hands the previous
decision's state to :meth:`ProgressEngineer.load_state`, so a resumed run continues the same series. Hole and
wait ratios, agents, samples, seed, slip and horizon never change. Ratios are rounded to 4 decimals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from policy.signal import TrainingSignal
from engineer.options import DeclaredOptions, SideTableState, choice, number, side_state
from engineer.rule import filled_values, floored_shares, reweighted
from simulator.config import StageConfig
from simulator.text import percent


def _rate(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def rate_series(signal: TrainingSignal | None, side: int) -> list[float]:
    """The sampled valid rates of ``side`` in the stage just trained (``signal``: the context's
    :attr:`~engineer.context.EngineerContext.signal`), in order: one per sampling round when the trainer recorded
    rounds, else the stage's one rate; [] when the size was not trained on."""
    if signal is None:
        return []
    if signal.rounds:
        return [rate for by_size in signal.rounds for figures in [by_size.get(side)] if figures is not None
                for rate in [_rate(figures.valid_rate)] if rate is not None]
    figures = signal.by_size.get(side)
    rate = _rate(figures.valid_rate) if figures is not None and figures.groups > 0 else None
    return [rate] if rate is not None else []


# Rates are clipped to [LOGIT_CLIP, 1 - LOGIT_CLIP] before the log-odds: a size at 0% or 100% has a finite value.
LOGIT_CLIP = 0.01
PROGRESS_SCALES = ("logit", "absolute")


def scaled(rate: float, scale: str) -> float:
    """``rate`` on the progress ``scale``: its log-odds (clipped) or itself."""
    if scale == "absolute":
        return rate
    rate = min(max(rate, LOGIT_CLIP), 1.0 - LOGIT_CLIP)
    return math.log(rate / (1.0 - rate))


def progress_shares(values: dict[int, float], floor: float) -> dict[int, float] | None:
    """``floor`` each plus the rest in proportion to ``values`` (not rounded); None when every value is 0."""
    return floored_shares(values, floor) if math.fsum(values.values()) > 0.0 else None


@dataclass
class ProgressEngineer(SideTableState, DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("progress", floor=0.1, step_size=0.5, scale="logit")``."""

    step_size: float = number(0.5, 1e-6, 1.0)
    """How far a size's value moves toward each new observation of its progress, in (0, 1]."""
    floor: float = number(0.1, 0.0, 1.0)
    """Least data ratio of every size."""
    scale: str = choice("logit", PROGRESS_SCALES)
    """What a change of rate is measured on: ``logit`` (log-odds) or ``absolute``."""
    name: str = "progress"
    values: dict = side_state(low=0.0)
    rates: dict = side_state(low=0.0, high=1.0)

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Update each size's progress from the stage's sampled rates, then the weights; ``seed`` is unused."""
        decider = Decider(self, context.text, config)
        notes = decider.notes
        for side in sorted(config.sizes):
            series = rate_series(context.signal, side)
            if not series:
                continue
            previous = self.rates.get(side)
            old = self.values.get(side)
            for rate in series:
                if previous is not None:
                    observed = abs(scaled(rate, self.scale) - scaled(previous, self.scale))
                    current = self.values.get(side)
                    self.values[side] = observed if current is None else current + self.step_size * (observed - current)
                previous = rate
            self.rates[side] = previous
            steps = " -> ".join(percent(rate) for rate in series)
            value = self.values.get(side)
            before = "new" if old is None else f"{old:.4f}"
            after = "none yet" if value is None else f"{value:.4f}"
            notes.append(f"size {side}: sampled valid {steps}; progress {before} -> {after}")

        decide = decider.decide

        values = filled_values(self.values, config.sizes)
        if values is None:
            notes.append("no sampled rate moved yet (env_stats.training_signal[_rounds]): no weight moves")
            return decide(config, "progress: nothing to change")
        shares = progress_shares(values, self.floor)
        if shares is None:
            notes.append("no size's sampled rate moved: no weight moves")
            return decide(config, "progress: nothing to change")
        proposal, text = reweighted(config, shares)
        notes.append(f"floor {self.floor:g}, the rest by progress ({self.scale}): {text}")
        return decide(proposal, "progress: accepted" if proposal != config else "progress: nothing to change")


__all__ = ["PROGRESS_SCALES", "ProgressEngineer", "progress_shares", "rate_series", "scaled"]
