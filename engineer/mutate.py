"""The mutate engineer: levels the policy can just about solve get a little harder, by small random edits.

In the spirit of ACCEL (evolving curricula by editing levels at the frontier): every used size whose success
rate (``metric``, from the context's ``behavior`` section, at least ``min_episodes`` episodes) lies in the
learnable band ``low <= rate <= high`` gets one edit, drawn with the stage's seed among those that apply:

* ``holes``: ``hole_ratio`` up by ``hole_step`` (at most ``max_hole_ratio``, and never so far that fewer free
  cells than agents remain);
* ``waits``: ``wait_ratio`` up by ``wait_step`` (at most 1; only with 2+ agents, since a lone agent never waits);
* ``bigger``: ``grow`` of the size's data ratio moves to the next side up (added with the size's hole and wait
  ratios when the config lacks it; at most ``MAX_SIZE``).

Solved, hopeless and unevidenced sizes keep their settings. The same evidence and seed give the same config.
Ratios are rounded to 4 decimals. Agents, samples, seed, slip and horizon never change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.options import number
from engineer.rule import RateBand, behavior_rates, hole_ratio_cap, rounded_shares
from simulator.config import MAX_SIZE, SizeSpec, StageConfig
from simulator.errors import ConfigError

MUTATIONS = ("holes", "waits", "bigger")
_DIGITS = 4


@dataclass
class MutateEngineer(RateBand):
    """See the module docstring; the band and the steps are :class:`engineer.rule.RateBand`'s. Options:
    ``make_engineer("mutate", low=0.3, grow=0.25)``."""

    grow: float = number(0.5, 0, 1)
    """Share of a size's data ratio that a ``bigger`` edit moves to the next side."""
    name: str = "mutate"

    def _edits(self, side: int, spec: SizeSpec, agents: int) -> list[str]:
        """The edits that change something for this size."""
        out = []
        if spec.hole_ratio < min(self.max_hole_ratio, hole_ratio_cap(side, agents)) and self.hole_step > 0:
            out.append("holes")
        if agents >= 2 and spec.wait_ratio < 1.0 and self.wait_step > 0:
            out.append("waits")
        if side < MAX_SIZE and self.grow > 0 and (side + 1) ** 2 >= agents:
            out.append("bigger")
        return out

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """One seeded edit per size in the learnable band (see the module docstring)."""
        decider = Decider(self, context.text, config)
        notes, decide = decider.notes, decider.decide

        rates = behavior_rates(decider, context)
        if rates is None:
            return decider.without_behavior()
        rng = np.random.default_rng([seed % (2**63), 0xACCE1])
        agents = config.agents_max
        specs = {side: spec for side, spec in config.sizes.items()}
        weights = {side: spec.data_ratio for side, spec in specs.items()}
        edited = 0
        for side, rate in rates.items():
            if not self.low <= rate <= self.high:
                notes.append(f"size {side}: {self.metric} {rate:.3f} outside [{self.low}, {self.high}], left alone")
                continue
            edits = self._edits(side, specs[side], agents)
            if not edits:
                notes.append(f"size {side}: {self.metric} {rate:.3f} in the band, but no edit applies")
                continue
            edit = edits[int(rng.integers(len(edits)))]
            spec = specs[side]
            if edit == "holes":
                cap = min(self.max_hole_ratio, hole_ratio_cap(side, agents))
                specs[side] = replace(spec, hole_ratio=round(min(spec.hole_ratio + self.hole_step, cap), _DIGITS))
                change = f"hole_ratio {spec.hole_ratio!r} -> {specs[side].hole_ratio!r}"
            elif edit == "waits":
                specs[side] = replace(spec, wait_ratio=round(min(spec.wait_ratio + self.wait_step, 1.0), _DIGITS))
                change = f"wait_ratio {spec.wait_ratio!r} -> {specs[side].wait_ratio!r}"
            else:
                moved = weights[side] * self.grow
                weights[side] -= moved
                bigger = side + 1
                if bigger not in specs:
                    cap = min(spec.hole_ratio, hole_ratio_cap(bigger, agents))
                    specs[bigger] = SizeSpec(0.0, cap, spec.wait_ratio)
                    weights[bigger] = 0.0
                weights[bigger] += moved
                change = f"{moved:.4f} of its data ratio to size {bigger}"
            notes.append(f"size {side}: {self.metric} {rate:.3f} in [{self.low}, {self.high}]: {edit}, {change}")
            edited += 1
        if not edited:
            return decide(config, "mutate: nothing to change")
        positive = {side: weight for side, weight in weights.items() if weight > 0}
        shares = rounded_shares(positive) if not math.isclose(math.fsum(positive.values()), 0.0) else {}
        sizes = {side: replace(spec, data_ratio=shares.get(side, 0.0)) for side, spec in sorted(specs.items())}
        try:
            proposal = replace(config, sizes=sizes)
        except ConfigError as error:  # not expected (every edit keeps the rules); keep the config and say why
            return decide(None, f"rejected: the mutate proposal was invalid: {error}")
        return decide(proposal, "mutate: accepted" if proposal != config else "mutate: nothing to change")


__all__ = ["MUTATIONS", "MutateEngineer"]
