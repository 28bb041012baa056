"""The target engineer: each size trains near a target difficulty that follows the stage's own reward.

After AdaRFT (Shi et al., 2025, "Efficient Reinforcement Finetuning via Adaptive Curriculum Learning"): a target
difficulty ``T`` moves after every batch by

    T' = clip(T + eta * tanh(alpha * (R_avg - beta)), d_min, d_max)

where ``R_avg`` is the batch's mean reward and ``beta`` the reward the curriculum aims at; the next batch takes the
problems whose difficulty is nearest ``T'``. Above ``beta`` the target rises, below it falls, and ``tanh`` bounds a
step by ``eta``.

Here the difficulty score of an instance is its **optimal makespan** (the solver's, in steps: the plan length it
asks for), a batch is a stage, and there is one target per map size (a 6x6 map has longer plans than a 3x3 one).
Per used size:

* ``R_avg`` is the stage's sampled valid rate on that size, from its own training samples
  (``env_stats.training_signal``: GRPO's groups, or a rejection-sampling stage's samples, scored as a 0/1 valid
  reward), so it is the reward of the instances the previous target chose. A size the stage did not train on, and the
  decision before stage 1, leave the target where it is.
* ``d_min`` is 1 and ``d_max`` the longest optimal makespan among the evidence set's episodes of the size
  (``behavior.by_size_makespan``): the target never leaves the plan lengths the size is known to have. A size without
  such episodes is left alone.
* A size's first target is ``start``.
* The next stage samples the instances nearest the target through the size's makespan bounds: ``min_makespan`` /
  ``max_makespan`` = ``c - radius`` .. ``c + radius`` (within ``1..d_max``), ``c`` the target rounded half up. The
  band is written only when the generator can fill it (:func:`engineer.bands.fillable_band`: a band it cannot fill
  is widened upward, up to ``d_max``; one it still cannot fill keeps the previous bounds).

The targets (fractions of a step survive between stages) are the engineer's state, in every decision record
(``details["state"]``), handed back by the run through :meth:`TargetEngineer.load_state`, so a resumed run continues
the same targets. Data, hole and wait ratios, agents, samples, seed, slip and horizon never change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engineer.bands import fillable_band, makespan_levels
from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.evidence import SignalFigures
from engineer.options import DeclaredOptions, SideTableState, integer, number, side_state
from simulator.config import MAX_HORIZON, StageConfig
from simulator.text import percent


def next_target(target: float, reward: float, eta: float, alpha: float, beta: float, high: float) -> float:
    """AdaRFT's update: ``clip(target + eta * tanh(alpha * (reward - beta)), 1, high)``."""
    return min(max(target + eta * math.tanh(alpha * (reward - beta)), 1.0), high)


@dataclass
class TargetEngineer(SideTableState, DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("target", eta=1.0, alpha=2.0, beta=0.5, radius=1)``."""

    eta: float = number(1.0, 1e-6, 100.0)
    """Step size: the most the target moves per stage, in makespan steps (AdaRFT's ``eta``, on our scale)."""
    alpha: float = number(2.0, 1e-6, 100.0)
    """Sensitivity of the step to the reward's distance from ``beta``."""
    beta: float = number(0.5, 0.0, 1.0)
    """The sampled valid rate the curriculum aims at: above it the target rises, below it falls."""
    start: float = number(1.0, 1.0, float(MAX_HORIZON))
    """A size's first target (an optimal makespan)."""
    radius: int = integer(1, 0, MAX_HORIZON)
    """Half width of the makespan band around the target."""
    name: str = "target"
    targets: dict = side_state(low=1.0, high=float(MAX_HORIZON))

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Each used size's target moved by its training reward, then its band (see the module docstring);
        ``seed`` is unused."""
        decider = Decider(self, context.text, config)
        notes = decider.notes

        decide = decider.decide

        by_length = context.behavior.by_size_makespan if context.behavior is not None else {}
        if not by_length:
            return decider.keep("no evidence split by optimal makespan (behavior.by_size_makespan): the targets stay")
        signal = context.signal.by_size if context.signal is not None else {}
        sizes = dict(config.sizes)
        for side in config.used_sizes():
            levels = makespan_levels(by_length, side, "valid_rate")
            if not levels:
                notes.append(f"{side}x{side}: no evidence episodes of any makespan, the size is left alone")
                continue
            sizes[side] = self._aim(config, side, max(levels), _reward(signal.get(side)), notes)
        proposal = replace(config, sizes=sizes)
        return decide(proposal, "target: accepted" if proposal != config else "target: nothing to change")

    def _aim(self, config: StageConfig, side: int, longest: int, reward: float | None, notes: list[str]):
        """Move ``side``'s target by ``reward`` (None: stays) and band its spec around it."""
        spec = config.sizes[side]
        old = min(max(self.targets.get(side, self.start), 1.0), float(longest))
        new = old if reward is None else next_target(old, reward, self.eta, self.alpha, self.beta, float(longest))
        self.targets[side] = new
        moved = ("no training signal, it stays" if reward is None
                 else f"sampled valid {percent(reward)} vs beta {100 * self.beta:g}%: {old:.3f} -> {new:.3f}")
        centre = math.floor(new + 0.5)
        low, high = max(1, centre - self.radius), min(centre + self.radius, longest)
        band = fillable_band(config, side, spec, low, high, longest)
        if band is None:
            notes.append(f"{side}x{side}: target {moved}; band {low}..{high} cannot be filled by the generator, the "
                         "size keeps its bounds")
            return spec
        widened = f" (widened from {low}..{high}: too few instances)" if band != (low, high) else ""
        notes.append(f"{side}x{side}: target {moved}; makespans {band[0]}..{band[1]}{widened} "
                     f"(longest in the evidence {longest})")
        return replace(spec, min_makespan=band[0], max_makespan=band[1])


def _reward(figures: SignalFigures | None) -> float | None:
    """The sampled valid rate of a size's training signal, or None when it was not trained on."""
    if figures is None or figures.groups <= 0 or not 0.0 <= figures.valid_rate <= 1.0:
        return None
    return float(figures.valid_rate)


__all__ = ["TargetEngineer", "next_target"]
