"""The bandit engineer: a non-stationary multi-armed bandit over map sizes, valued by the training signal.

Each size of the config is an arm. After a stage, every arm that was trained on (it had groups: GRPO's, or a
rejection-sampling stage's samples of one instance, scored as GRPO groups of the 0/1 valid reward) moves its
value toward that stage's mean absolute advantage of its groups (``training_signal`` of the context's
``env_stats`` section, from :class:`policy.rewards.StageReward`): ``value += step_size * (signal - value)``, an
exponential recency-weighted average, so the values follow a policy that keeps changing. Arms not trained keep
their value; an arm never valued starts at the mean of the valued ones. The next stage's ``data_ratio`` per
size is a softmax (Boltzmann) over the values at ``temperature``, at least ``floor`` each, so no arm is
abandoned. Zero-variance groups have no advantage at all, so a solved or a hopeless size loses value, and a size
where the policy's samples disagree gains it: the self-evolving curriculum rule, per size.

The state (``values``, ``counts`` of groups seen) is in every decision record (``details["state"]``); the run
hands the previous decision's state to :meth:`BanditEngineer.load_state` before the next proposal, so a
resumed run continues the same bandit. Hole and wait ratios, agents, samples, seed, slip and horizon never
change. Ratios are rounded to 4 decimals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.options import DeclaredOptions, SideTableState, number, side_state
from engineer.rule import filled_values, floored_shares, reweighted
from simulator.config import StageConfig


def softmax_shares(values: dict[int, float], temperature: float, floor: float) -> dict[int, float]:
    """``values`` -> shares ``floor + (1 - n * floor) * softmax(values / temperature)`` (not rounded)."""
    top = max(values.values())
    return floored_shares({side: math.exp((value - top) / temperature) for side, value in values.items()}, floor)


@dataclass
class BanditEngineer(SideTableState, DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("bandit", temperature=0.2, step_size=0.5)``."""

    step_size: float = number(0.5, 1e-6, 1.0)
    """How far a trained arm's value moves toward the stage's signal, in (0, 1]."""
    temperature: float = number(0.2, 1e-3, 100.0)
    """Softmax temperature over the values (mean absolute advantages, about 0..1)."""
    floor: float = number(0.05, 0.0, 1.0)
    """Least data ratio of every arm."""
    name: str = "bandit"
    values: dict = side_state(low=0.0)
    counts: dict = side_state(integer=True, low=0, high=10**15)  # groups seen: far past any run, within 64 bits

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Update the values from the stage's training signal, then the softmax weights; ``seed`` is unused."""
        decider = Decider(self, context.text, config)
        signal = context.signal.by_size if context.signal is not None else {}
        notes = decider.notes
        for side in sorted(config.sizes):
            figures = signal.get(side)
            if figures is None or figures.groups <= 0 or not math.isfinite(figures.abs_advantage_mean):
                continue
            groups, advantage = figures.groups, figures.abs_advantage_mean
            old = self.values.get(side)
            self.values[side] = advantage if old is None else old + self.step_size * (advantage - old)
            self.counts[side] = self.counts.get(side, 0) + groups
            notes.append(f"size {side}: {groups} groups, mean |advantage| {advantage:.3f}: value "
                         f"{'new' if old is None else f'{old:.3f}'} -> {self.values[side]:.3f}")

        decide = decider.decide

        arms = filled_values(self.values, config.sizes)
        if arms is None:
            notes.append("no training signal in the context (env_stats.training_signal): no weight moves")
            return decide(config, "bandit: nothing to change")
        proposal, shares = reweighted(config, softmax_shares(arms, self.temperature, self.floor))
        notes.append(f"softmax at temperature {self.temperature:g}: {shares}")
        return decide(proposal, "bandit: accepted" if proposal != config else "bandit: nothing to change")


__all__ = ["BanditEngineer", "softmax_shares"]
