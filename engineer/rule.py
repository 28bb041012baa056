"""The transparent rule-based engineer: every change it makes follows from a threshold you can read.

Per map size in use, with at least ``min_episodes`` validation episodes, the size's success rate (``metric``:
``valid_rate`` by default, or ``optimal_rate``) puts it in one class:

* *hopeless*: rate < ``low``; *solved*: rate > ``high``; *mid-range*: ``low <= rate <= high``.

Then, in this order:

1. **Weights.** Each solved or hopeless size gives up ``shift`` of its ``data_ratio``; the pool is shared among
   the mid-range sizes in proportion to their current weights. Mid-range sizes keep what they had and gain. When
   no size is mid-range nothing moves (there is nowhere the signal is known to be good). Sizes without enough
   episodes, and unused sizes, keep their weight.
2. **Difficulty.** Where the policy copes (rate >= ``cope``), ``hole_ratio`` rises by ``hole_step`` (at most to
   ``max_hole_ratio``, and never so far that fewer free cells than agents remain) and ``wait_ratio`` by
   ``wait_step`` (at most 1; only with 2+ agents, since a lone agent never waits). Elsewhere they stay.

Ratios are rounded to 4 decimals (the largest data ratio absorbs the rounding, so they still sum to 1).
``agents``, ``samples``, ``seed``, ``slip`` and ``horizon`` never change. Without a ``behavior`` section in the
context there is no evidence, and the config is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.options import DeclaredOptions, choice, integer, number
from replays.mining import GroupStats
from simulator.config import MAX_HOLE_RATIO, SizeSpec, StageConfig
from simulator.errors import ConfigError
from simulator.text import counted

RULE_METRICS = ("valid_rate", "optimal_rate")
_DIGITS = 4  # ratios written by the rule engineer: readable, and far finer than any sampling noise


def rounded_shares(weights: dict[int, float], digits: int = _DIGITS) -> dict[int, float]:
    """``weights`` scaled to sum to 1 and rounded to ``digits`` decimals; the largest absorbs the rounding."""
    total = math.fsum(weights.values())
    shares = {side: round(weight / total, digits) for side, weight in weights.items()}
    largest = max(shares, key=lambda side: (shares[side], -side))
    rest = math.fsum(share for side, share in shares.items() if side != largest)
    shares[largest] = round(1.0 - rest, digits)
    return shares


def floored_shares(weights: dict[int, float], floor: float) -> dict[int, float]:
    """``floor`` each (at most an even share) plus the rest in proportion to ``weights`` (non-negative, summing to
    more than 0); not rounded."""
    total = math.fsum(weights.values())
    floor = min(floor, 1.0 / len(weights))
    spread = 1.0 - floor * len(weights)
    return {side: floor + spread * weight / total for side, weight in weights.items()}


def filled_values(values: dict[int, float], sides) -> dict[int, float] | None:
    """The value of each of ``sides``, a side never valued at the mean of the valued ones; None when none is."""
    valued = [values[side] for side in sides if side in values]
    if not valued:
        return None
    start = math.fsum(valued) / len(valued)
    return {side: values.get(side, start) for side in sides}


def reweighted(config: StageConfig, shares: dict[int, float]) -> tuple[StageConfig, str]:
    """``config`` with each size's data ratio from ``shares`` (rounded to 4 decimals, the largest absorbing the
    rounding; holes, waits and everything else kept), and the new ratios as text (``3x3 0.2500, 4x4 ...``)."""
    shares = rounded_shares(shares)
    sizes = {side: replace(spec, data_ratio=shares[side]) for side, spec in config.sizes.items()}
    return replace(config, sizes=sizes), ", ".join(f"{side}x{side} {shares[side]:.4f}" for side in sorted(shares))


def hole_ratio_cap(side: int, agents: int, digits: int = _DIGITS) -> float:
    """The largest hole ratio (``digits`` decimals, rounded down, at most ``MAX_HOLE_RATIO``) that leaves at least
    ``agents`` free cells."""
    cells = side * side
    ratio = math.floor(min(Fraction(cells - agents, cells), Fraction(MAX_HOLE_RATIO)) * 10**digits) / 10**digits
    while ratio > 0 and SizeSpec(0.0, ratio, 0.0).free_cells(side) < agents:  # guard the half-up rounding
        ratio = round(ratio - 10**-digits, digits)
    return max(ratio, 0.0)


def behavior_rates(decider: Decider, context: EngineerContext, left: str = "left alone") -> dict[int, float] | None:
    """Each used size's rate in the behavior evidence (the engineer's ``metric``, for sizes with at least its
    ``min_episodes`` episodes; the others get a note ending in ``left``, what the engineer does with them); None
    when the context has no behavior section."""
    if context.behavior is None:
        return None
    engineer = decider.engineer
    return size_rates(context.behavior.by_size, decider.config, engineer.min_episodes, engineer.metric,
                      decider.notes, left)


def size_rates(by_size: Mapping[int, GroupStats], config: StageConfig, min_episodes: int, metric: str,
               notes: list[str], left: str = "left alone") -> dict[int, float]:
    """Each used size's ``metric`` from the evidence's ``by_size``, for sizes with at least ``min_episodes``
    episodes; the others get a note ending in ``left`` (what the engineer does with them)."""
    rates: dict[int, float] = {}
    for side in config.used_sizes():
        group = by_size.get(side)
        episodes = group.episodes if group is not None else 0
        if group is None or episodes < min_episodes:
            notes.append(f"size {side}: {counted(episodes, 'episode')} (< {min_episodes}), {left}")
            continue
        rates[side] = float(getattr(group, metric))
    return rates


@dataclass
class RateBand(DeclaredOptions):
    """The options the ``rule`` and ``mutate`` engineers share: a band of success rates, how far they raise a
    size's holes and waits, and which evidence they read."""

    low: float = number(0.2, 0, 1)
    """Lower end of the band of success rates (rule: below it a size is hopeless; mutate: only sizes inside the
    band are edited)."""
    high: float = number(0.8, 0, 1)
    """Upper end of the band (rule: above it a size is solved)."""
    hole_step: float = number(0.05, 0, 1)
    """Hole ratio added to a size whose holes are raised."""
    wait_step: float = number(0.1, 0, 1)
    """Wait ratio added to a size whose waits are raised."""
    max_hole_ratio: float = number(0.5, 0, MAX_HOLE_RATIO)
    """Holes are never raised past this ratio (the benchmark goes up to 0.5), nor so far that fewer free cells than
    agents remain."""
    min_episodes: int = integer(4, 0)
    """Fewer validation episodes of a size than this: no evidence, the size is left alone."""
    metric: str = choice("valid_rate", RULE_METRICS)
    """The evidence's rate it reads per size: ``valid_rate`` or ``optimal_rate``."""
    name: str = "band"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.low > self.high:
            raise ConfigError(f"{self.name}.low", self.low, f"at most {self.name}.high ({self.high})")


@dataclass
class RuleEngineer(RateBand):
    """See the module docstring. Thresholds are options (``make_engineer("rule", low=0.1, ...)``)."""

    shift: float = number(0.5, 0, 1)
    """Share of a solved or hopeless size's weight moved to mid-range sizes per stage."""
    cope: float = number(0.6, 0, 1)
    """Rate at or above which holes and waits are raised."""
    name: str = "rule"

    def classify(self, rate: float) -> str:
        """``"hopeless"``, ``"mid"`` or ``"solved"`` for a success rate."""
        if rate < self.low:
            return "hopeless"
        if rate > self.high:
            return "solved"
        return "mid"

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """The next config by the rules above; ``seed`` is unused (the rules are deterministic)."""
        decider = Decider(self, context.text, config)
        notes = decider.notes
        rates = behavior_rates(decider, context)
        if rates is None:
            return decider.without_behavior()
        classes = {side: self.classify(rate) for side, rate in rates.items()}

        weights = {side: spec.data_ratio for side, spec in config.sizes.items()}
        mid = [side for side, kind in classes.items() if kind == "mid"]
        movers = [side for side, kind in classes.items() if kind != "mid"]
        if mid and movers and self.shift > 0:
            pool = math.fsum(self.shift * weights[side] for side in movers)
            mid_total = math.fsum(weights[side] for side in mid)
            for side in movers:
                weights[side] -= self.shift * weights[side]
            for side in mid:
                weights[side] += pool * weights[side] / mid_total
        elif movers and not mid:
            notes.append("no size is mid-range, so no weight moves")
        shares = rounded_shares(weights) if weights != {s: p.data_ratio for s, p in config.sizes.items()} else None

        sizes: dict[int, SizeSpec] = {}
        for side, spec in config.sizes.items():
            data_ratio = shares[side] if shares is not None else spec.data_ratio
            hole_ratio, wait_ratio = spec.hole_ratio, spec.wait_ratio
            if side in rates and rates[side] >= self.cope:
                cap = min(self.max_hole_ratio, hole_ratio_cap(side, config.agents_max))
                if hole_ratio < cap:
                    hole_ratio = round(min(hole_ratio + self.hole_step, cap), _DIGITS)
                if config.agents_max >= 2 and wait_ratio < 1.0:
                    wait_ratio = round(min(wait_ratio + self.wait_step, 1.0), _DIGITS)
            sizes[side] = replace(spec, data_ratio=data_ratio, hole_ratio=hole_ratio, wait_ratio=wait_ratio)
            if side in rates:
                notes.append(self._explain(side, rates[side], classes[side], spec, sizes[side]))
        try:
            proposal = replace(config, sizes=sizes)
        except ConfigError as error:  # not expected (every step keeps the rules); keep the config and say why
            return decider.decide(None, f"rejected: the rule's own proposal was invalid: {error}")
        return decider.decide(proposal, "rule: accepted" if proposal != config else "rule: nothing to change")

    def _explain(self, side: int, rate: float, kind: str, before: SizeSpec, after: SizeSpec) -> str:
        what = {"hopeless": f"< {self.low} (hopeless)", "solved": f"> {self.high} (solved)",
                "mid": f"in [{self.low}, {self.high}] (mid-range)"}[kind]
        changes = [
            f"{name} {getattr(before, name)!r} -> {getattr(after, name)!r}"
            for name in ("data_ratio", "hole_ratio", "wait_ratio")
            if getattr(before, name) != getattr(after, name)
        ]
        copes = f", copes (>= {self.cope})" if rate >= self.cope else ""
        return f"size {side}: {self.metric} {rate:.3f} {what}{copes}: " + (", ".join(changes) or "unchanged")


__all__ = ["RULE_METRICS", "RateBand", "RuleEngineer", "behavior_rates", "hole_ratio_cap", "rounded_shares",
           "size_rates"]
