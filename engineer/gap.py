"""The gap engineer: train the skill the policy lacks, waiting.

An instance either needs a wait (no plan in which every agent walks a shortest path is free of conflicts: one of
them has to stand still or go round) or it does not, and the two are separate skills. A policy can solve half of
the instances that need no wait and none of those that need one (the ``small`` preset's policies, README "Where
the held-out failures are"); no reweighting of map sizes reaches that half. The validation replays' split
(``behavior.by_size_wait``, see :mod:`replays.mining`) gives each used size's valid rate on both kinds. Per used
size with at least ``min_episodes`` episodes of each kind (rates ``w`` on those that need a wait, ``n`` on the
others; ``metric`` as for ``rule``):

* **gap** (``n > 0`` and ``w < ratio * n``): the size's ``wait_ratio`` rises by ``wait_step``, at most to
  ``max_wait``, so the next stage samples more of the instances the policy fails;
* **closed** (``w >= ratio * n``): ``wait_ratio`` steps back by ``wait_step`` toward the ratio the run started
  with (never below it): the skill is there, the rest of the data matters again;
* nothing solved at all (``n == 0``): no evidence of which skill is missing; the size is left alone.

Configs with one agent (nothing ever waits) and sizes without the evidence keep their settings. Data ratios,
hole ratios, agents, samples, seed, slip and horizon never change. The starting ratios (``start``) are the
engineer's state, in every decision record (``details["state"]``), handed back by the run through
:meth:`GapEngineer.load_state` so a resumed run steps back to the same floor. Ratios are rounded to 4 decimals.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from engineer.context import EngineerContext
from engineer.decision import EngineerDecision, make_decision
from engineer.rule import RULE_METRICS, check_number_options, side_table
from simulator.config import SizeSpec, StageConfig
from simulator.errors import ConfigError

_DIGITS = 4


def wait_rates(by_size_wait: dict, side: int, min_episodes: int, metric: str) -> tuple[float, float] | None:
    """``(rate on instances that need a wait, rate on the others)`` of ``side`` from the behavior section's
    ``by_size_wait``; None when either kind has fewer than ``min_episodes`` episodes."""
    groups = [by_size_wait.get(f"{side}:{kind}") for kind in ("needs_wait", "no_wait")]
    if any(not isinstance(group, dict) or group.get("episodes", 0) < max(min_episodes, 1) for group in groups):
        return None
    return float(groups[0][metric]), float(groups[1][metric])


@dataclass
class GapEngineer:
    """See the module docstring. Options: ``make_engineer("gap", ratio=0.5, wait_step=0.3, max_wait=0.6)``."""

    ratio: float = 0.5
    """A size has a gap when its rate on instances that need a wait is below this share of its other rate."""
    wait_step: float = 0.3
    """How far a wait ratio moves per stage."""
    max_wait: float = 0.6
    """The highest wait ratio this engineer sets (the rest of the stage keeps the skills the policy has)."""
    min_episodes: int = 10
    """Fewer validation episodes of either kind of a size than this: no evidence, the size is left alone."""
    metric: str = "valid_rate"
    name: str = "gap"
    start: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_number_options("gap", self, (("ratio", 0.0, 1.0), ("wait_step", 0.0, 1.0), ("max_wait", 0.0, 1.0)))
        if isinstance(self.min_episodes, bool) or not isinstance(self.min_episodes, int) or self.min_episodes < 0:
            raise ConfigError("gap.min_episodes", self.min_episodes, "an integer >= 0")
        if self.metric not in RULE_METRICS:
            raise ConfigError("gap.metric", self.metric, f"one of {', '.join(RULE_METRICS)}")
        self.load_state({"start": self.start})

    def load_state(self, state: dict | None) -> None:
        """Continue from a previous decision's ``details["state"]`` (None or {}: a fresh engineer)."""
        state = state or {}
        try:
            self.start = side_table(state, "start", float)
        except (TypeError, ValueError, AttributeError) as error:
            raise ConfigError("gap state", state, f"{{start: {{side: wait ratio}}}} ({error})")

    def state(self) -> dict:
        return {"start": {str(side): value for side, value in sorted(self.start.items())}}

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Each size's wait ratio up where the policy fails the instances that need a wait, back where it does
        not; ``seed`` is unused (the rule is deterministic)."""
        started = time.perf_counter()
        for side, spec in config.sizes.items():
            self.start.setdefault(side, spec.wait_ratio)
        notes: list[str] = []

        def decide(proposal: StageConfig, reason: str) -> EngineerDecision:
            return make_decision(self.name, config, proposal, reason, proposal=proposal.to_dict(),
                                 rationale="\n".join(notes), context_text=context.text,
                                 seconds=time.perf_counter() - started, details={"state": self.state()})

        behavior = context.section("behavior")
        by_size_wait = (behavior or {}).get("by_size_wait") or {}
        if config.agents_max < 2:
            notes.append("one agent: nothing ever waits")
            return decide(config, "gap: nothing to change")
        if not by_size_wait:
            notes.append("no validation split by need of a wait (behavior.by_size_wait): no evidence")
            return decide(config, "gap: nothing to change")
        sizes = dict(config.sizes)
        for side in config.used_sizes():
            spec = config.sizes[side]
            rates = wait_rates(by_size_wait, side, self.min_episodes, self.metric)
            if rates is None:
                notes.append(f"size {side}: fewer than {self.min_episodes} episodes of a kind, left alone")
                continue
            waits, others = rates
            seen = f"size {side}: {self.metric} {100 * waits:.1f}% when a wait is needed, {100 * others:.1f}% otherwise"
            if others <= 0.0:
                notes.append(f"{seen}: nothing solved, no evidence of which skill is missing; left alone")
                continue
            if waits < self.ratio * others:
                new = min(max(self.max_wait, spec.wait_ratio), spec.wait_ratio + self.wait_step)
                kind = f"gap (below {self.ratio:g} x): wait ratio up"
            else:
                floor = min(self.start.get(side, spec.wait_ratio), spec.wait_ratio)
                new = max(floor, spec.wait_ratio - self.wait_step)
                kind = "no gap: wait ratio back toward the run's start"
            new = round(new, _DIGITS)
            notes.append(f"{seen}; {kind}, {spec.wait_ratio:g} -> {new:g}")
            sizes[side] = SizeSpec(spec.data_ratio, spec.hole_ratio, new)
        proposal = replace(config, sizes=sizes)
        return decide(proposal, "gap: accepted" if proposal != config else "gap: nothing to change")


__all__ = ["GapEngineer", "wait_rates"]
