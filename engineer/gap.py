"""The gap engineer: when the policy lacks a skill, teach it where the policy's own samples can find it.

An instance either needs a wait (no plan in which every agent walks a shortest path is free of conflicts: one of
them has to stand still or go round) or it does not, and the two are separate skills. A policy can solve half of
the instances that need no wait and none of those that need one (the ``small`` preset's policies; docs/results/small.md,
"Where the held-out failures are"), and no reweighting of map sizes reaches the other half. Nor does sampling more of
them: a stage trained on its own valid samples learns from an instance only when a sample solves it, and on a map with a
fifth of its cells holes the samples rarely do, while on an open map of the same side they often do.

The evidence is the validation replays' split (``behavior.by_size_wait``, see :mod:`replays.mining`): each used
size's rate (``metric``, as for ``rule``) on the instances that need a wait (``w``) and on the others (``n``),
for sizes with at least ``min_episodes`` episodes of each kind. A size has a **gap** when ``n > 0`` and
``w < ratio * n`` (a size that solves nothing at all says nothing about which skill is missing).

* While some size has a gap, the smallest used size becomes the **lesson**: every instance needs a wait
  (``wait_ratio`` = ``lesson_wait``) on an open map (``hole_ratio`` = ``lesson_holes``); its data ratio and every
  other size keep their settings, so the skills the policy has keep their data.
* With ``hole_step`` > 0 the lesson moves toward the maps the policy fails on: a stage after one that trained
  the lesson, when the last sampling round's valid rate on the lesson size (``env_stats.training_signal_rounds``,
  the training samples only; every lesson instance needs a wait) reached ``advance``, the lesson's hole ratio
  rises by ``hole_step``, up to the size's start hole ratio (capped so that the agents still fit). Below
  ``advance``, or with no round recorded, it stays where it is. ``hole_step`` 0 (the default) keeps every lesson
  on the open map.
* Once no size has a gap, the lesson size gets back the settings it had when the run started.

With ``remedy="drop"`` the engineer gives no lesson: it stops spending samples on what the policy cannot yet
learn. Each size with a gap trains on instances that need no wait only (wait ratio 0, its holes and data ratio
kept), and a size whose gap has closed gets back its start wait ratio; sizes without evidence keep their settings.
On the ``small`` preset's policies the samples solve 0-3% of the holed instances that need a wait, so those
instances take a third of the sampling budget and give almost no kept plans (docs/results/small.md, "Where the held-out
failures are"). Asked before stage 1 (``engineer.plan_first``), it decides from the warm start's validation.

With ``weigh="yield"`` the engineer also moves data between sizes toward the frontier. A stage trained on its
own valid samples learns a size from the plans its samples solve there: at equal data a size solved 60% of the
time gives six times the kept plans of one solved 10%, so the stages keep teaching what the policy can already do
(``small-frontier``'s ``fixed`` rounds solve 37-52% of 3x3 and 1-16% of 5x5). Each used size's **yield** is its
sampled valid rate in the last training round (``env_stats.training_signal_rounds``, training samples only); before any
round (a plan asked before stage 1) its validation rate on the kind of instances it will train on (the no-wait
rate when it trains without waits; a size that solves nothing has the yield 0, one with fewer than
``min_episodes`` episodes of a kind has none and keeps its data ratio). A size whose yield is at least ``reach``
gets the score ``1 / yield``, so the kept plans per size even out; one below ``reach`` (its samples solve almost
nothing: more data there buys no plans) scores 0. The sizes with a yield then share the data ratio they held:
``floor`` each, the rest in proportion to the scores; when no size reaches ``reach`` nothing moves. Hole and wait
ratios are decided first, as above, and like them the weights move only when some size has evidence of a gap or
of none.

With ``lengths="frontier"`` the engineer also sets how long a plan each size asks for. The validation replays
split by optimal makespan (``behavior.by_size_makespan``) show that the plan's length, more than the map's side,
is where the policy stops (``small-frontier``'s warm starts solve 94% of the 4x4 instances of makespan 1, 19% of
makespan 4 and none of 7; 56% of the 5x5 ones of makespan 1). For each used size that trains without waits,
among the makespans with at least ``min_length_episodes`` validation episodes, the band's top ``max_makespan``
is the longest one whose rate reaches ``reach`` (longer plans are almost never solved: samples there keep no
plan) and its bottom ``min_makespan`` the shortest one up to the top whose rate is below ``solved`` (shorter
plans are solved already: samples there teach nothing new). A size with no makespan reaching ``reach``, or one
that trains with waits, gets no bounds (a band with waits may not exist on a small map). The next stage's
validation moves the band.

Configs with one agent (nothing ever waits) and contexts without the split (the ``behavior`` section switched
off, or summaries written before the split existed) change nothing. Agents, samples, seed, slip and horizon never
change, nor the data ratios unless ``weigh="yield"``, nor the makespan bounds unless ``lengths="frontier"``. The
starting settings (``start``: each size's hole and wait ratio) and the hole ratio of the lesson last given
(``lesson``, None when none is in place) are the engineer's state, in every decision record (``details["state"]``),
handed back by the run through :meth:`GapEngineer.load_state`, so a resumed run restores the same ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace

from engineer.bands import makespan_levels
from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.progress import rate_series
from engineer.options import (Allowed, DeclaredOptions, choice, integer, number, state, state_mapping, state_side,
                              state_value)
from engineer.rule import RULE_METRICS, floored_shares, hole_ratio_cap, reweighted
from replays.mining import GroupStats
from simulator.config import MAX_HOLE_RATIO, StageConfig
from simulator.files import cut
from simulator.text import printable, percent

_START_RATIOS = {"hole_ratio": Allowed(0.0, MAX_HOLE_RATIO), "wait_ratio": Allowed(0.0, 1.0)}
_LESSON = Allowed(0.0, MAX_HOLE_RATIO, optional=True)
_STATE_SHAPE = "{start: {side: {hole_ratio, wait_ratio}}, lesson: a hole ratio or null}"

GAP_REMEDIES = ("lesson", "drop")
GAP_WEIGHS = ("keep", "yield")
GAP_LENGTHS = ("keep", "frontier")


def length_band(by_size_makespan: Mapping[tuple[int, int], GroupStats], side: int, min_episodes: int, reach: float,
                solved: float, metric: str = "valid_rate") -> tuple[int, int] | None:
    """``(min_makespan, max_makespan)`` of ``side`` from the evidence's ``by_size_makespan`` (keys ``(side, makespan)``):
    over the makespans with at least ``min_episodes`` (at least 1) episodes, the longest whose rate reaches
    ``reach`` and the shortest up to it whose rate is below ``solved`` (the longest itself when all are at least
    ``solved``); None when no makespan reaches ``reach``."""
    rates = {makespan: rate for makespan, (episodes, rate) in makespan_levels(by_size_makespan, side, metric).items()
             if episodes >= max(min_episodes, 1)}
    reaching = [makespan for makespan, rate in rates.items() if rate >= reach]
    if not reaching:
        return None
    top = max(reaching)
    open_ = [makespan for makespan, rate in rates.items() if rate < solved and makespan <= top]
    return (min(open_) if open_ else top), top


def wait_rates(by_size_wait: Mapping[tuple[int, str], GroupStats], side: int, min_episodes: int,
               metric: str) -> tuple[float, float] | None:
    """``(rate on instances that need a wait, rate on the others)`` of ``side`` from the evidence's
    ``by_size_wait``; None when either kind has fewer than ``min_episodes`` (at least 1) episodes."""
    waits, others = by_size_wait.get((side, "needs_wait")), by_size_wait.get((side, "no_wait"))
    if waits is None or others is None or min(waits.episodes, others.episodes) < max(min_episodes, 1):
        return None
    return float(getattr(waits, metric)), float(getattr(others, metric))


@dataclass
class GapOptions(DeclaredOptions):
    """The gap engineer's options, declared once: :class:`GapEngineer` and the engineers that delegate to it
    (:mod:`engineer.first_only`) take exactly these."""

    ratio: float = number(0.5, 0.0, 1.0)
    """A size has a gap when its rate on instances that need a wait is below this share of its other rate."""
    lesson_holes: float = number(0.0, 0.0, 0.9)
    """Hole ratio of the lesson size while there is a gap (capped so that the agents still fit)."""
    lesson_wait: float = number(1.0, 0.0, 1.0)
    """Wait ratio of the lesson size while there is a gap."""
    hole_step: float = number(0.0, 0.0, 0.9)
    """How much the lesson's hole ratio rises after a stage whose last round reached ``advance`` (0: never)."""
    advance: float = number(0.15, 0.0, 1.0)
    """The lesson size's sampled valid rate in the last training round at which the lesson moves on."""
    min_episodes: int = integer(10, 0)
    """Fewer validation episodes of either kind of a size than this: no evidence from that size."""
    remedy: str = choice("lesson", GAP_REMEDIES)
    """``lesson`` (teach waiting on the smallest size) or ``drop`` (train each size with a gap without waits)."""
    weigh: str = choice("keep", GAP_WEIGHS)
    """``keep`` (data ratios never change) or ``yield`` (data toward the sizes whose samples solve least, above
    ``reach``)."""
    reach: float = number(0.05, 0.0, 1.0)
    """With ``weigh="yield"``: a size whose yield is below this gets only ``floor``."""
    floor: float = number(0.1, 0.0, 1.0)
    """With ``weigh="yield"``: least data share of each size with a yield (times the share they hold together)."""
    lengths: str = choice("keep", GAP_LENGTHS)
    """``keep`` (makespan bounds never change) or ``frontier`` (each size without waits trains on the plan lengths
    its validation solves sometimes but not mostly)."""
    solved: float = number(0.8, 0.0, 1.0)
    """With ``lengths="frontier"``: a makespan solved at least this often is below the band."""
    min_length_episodes: int = integer(5, 0)
    """With ``lengths="frontier"``: fewer validation episodes of a size and makespan than this: no evidence."""
    metric: str = choice("valid_rate", RULE_METRICS)
    """The evidence's rate it reads per size: ``valid_rate`` or ``optimal_rate``."""

    def gap_options(self) -> dict:
        """These options by name, as :func:`~engineer.engineers.make_engineer` takes them for ``gap``."""
        return {field.name: getattr(self, field.name) for field in fields(GapOptions)}


@dataclass
class GapEngineer(GapOptions):
    """See the module docstring. Options (:class:`GapOptions`): ``make_engineer("gap", ratio=0.5, lesson_holes=0.0,
    lesson_wait=1.0, hole_step=0.0, advance=0.15, remedy="lesson", weigh="keep", reach=0.05, floor=0.1,
    lengths="keep", solved=0.8, min_length_episodes=5)``."""

    name: str = "gap"
    start: dict = state(dict)
    lesson: float | None = state()

    def load_state(self, state: dict | None) -> None:
        """Continue from a previous decision's ``details["state"]`` (None or {}: a fresh engineer). The sides,
        ratios and the lesson's hole ratio are checked as a stage config's are; the first one out of range (or
        NaN, or not a number) is a ConfigError naming ``gap state.KEY``, the value and what is allowed."""
        document = state_mapping(state, f"{self.name} state", _STATE_SHAPE)
        where = f"{self.name} state.start"
        start = {}
        for side, spec in state_mapping(document.get("start"), where, _STATE_SHAPE).items():
            at = f"{where}.{cut(printable(str(side)), 12)}"
            spec = state_mapping(spec, at, "a mapping {hole_ratio, wait_ratio}")
            start[state_side(side, at)] = tuple(state_value(spec.get(key), allowed, f"{at}.{key}")
                                                for key, allowed in _START_RATIOS.items())
        self.start = start
        self.lesson = state_value(document.get("lesson"), _LESSON, f"{self.name} state.lesson")

    def state(self) -> dict:
        return {"start": {str(side): {"hole_ratio": holes, "wait_ratio": waits}
                          for side, (holes, waits) in sorted(self.start.items())}, "lesson": self.lesson}

    def _lesson_holes(self, context: EngineerContext, config: StageConfig, side: int, notes: list[str]) -> float:
        """The lesson's hole ratio for the next stage: ``lesson_holes`` when no lesson is in place, else the one in
        place, raised by ``hole_step`` when its last round reached ``advance``."""
        cap = hole_ratio_cap(side, config.agents_max)
        spec = config.sizes[side]
        if self.lesson is None or (spec.hole_ratio, spec.wait_ratio) != (self.lesson, self.lesson_wait):
            return min(self.lesson_holes, cap)
        if self.hole_step <= 0.0:
            return self.lesson
        rates = rate_series(context.signal, side)
        if not rates:
            notes.append(f"no sampling round recorded on {side}x{side}: the lesson stays at holes {self.lesson:g}")
            return self.lesson
        top = min(max(self.start[side][0], self.lesson_holes), cap)
        if rates[-1] < self.advance:
            notes.append(f"{side}x{side}'s last round solved {percent(rates[-1])} of the lesson (below "
                         f"{100 * self.advance:g}%): the lesson stays at holes {self.lesson:g}")
            return self.lesson
        holes = round(min(self.lesson + self.hole_step, top), 4)
        notes.append(f"{side}x{side}'s last round solved {percent(rates[-1])} of the lesson (at least "
                     f"{100 * self.advance:g}%): the lesson moves from holes {self.lesson:g} to {holes:g}")
        return holes

    def _drop(self, config: StageConfig, gaps: list[int], evidenced: list[int], notes: list[str]) -> StageConfig:
        """``config`` with each size of ``gaps`` trained without waits and each other size of ``evidenced`` back at
        its start wait ratio."""
        sizes = dict(config.sizes)
        for side in evidenced:
            spec = sizes[side]
            waits = 0.0 if side in gaps else self.start[side][1]
            if waits != spec.wait_ratio:
                sizes[side] = replace(spec, wait_ratio=waits)
                notes.append(f"{side}x{side}: wait ratio {spec.wait_ratio:g} -> {waits:g} ("
                             + ("instances that need a wait leave its training while it has a gap)" if side in gaps
                                else "its gap has closed: the start wait ratio comes back)"))
        return replace(config, sizes=sizes)

    def _yields(self, context: EngineerContext, proposal: StageConfig, by_size_wait: Mapping[tuple[int, str], GroupStats], sides: Sequence[int],
                notes: list[str]) -> dict[int, float]:
        """The yield of each of ``sides`` that has one: its last training round's sampled valid rate, else its
        validation rate on the instances it will train on (the no-wait rate when ``proposal`` trains it without
        waits; none with fewer than ``min_episodes`` validation episodes of a kind)."""
        yields = {}
        for side in sides:
            rates = rate_series(context.signal, side)
            if rates:
                yields[side] = rates[-1]
                notes.append(f"size {side}: the last round's samples solved {percent(rates[-1])}")
                continue
            split = wait_rates(by_size_wait, side, self.min_episodes, self.metric)
            if split is None:
                continue
            waits, others = split
            share = proposal.sizes[side].wait_ratio
            yields[side] = share * waits + (1.0 - share) * others
            notes.append(f"size {side}: no round yet, validation {percent(yields[side])} at wait ratio {share:g}")
        return yields

    def _weigh(self, context: EngineerContext, proposal: StageConfig, by_size_wait: Mapping[tuple[int, str], GroupStats],
               notes: list[str]) -> StageConfig:
        """``proposal`` with the data ratios of the used sizes that have a yield shared by ``1 / yield`` above
        ``reach`` (``floor`` each); unchanged when no size reaches ``reach``."""
        yields = self._yields(context, proposal, by_size_wait, proposal.used_sizes(), notes)
        scores = {side: (1.0 / rate if rate >= self.reach else 0.0) for side, rate in yields.items()}
        if not any(scores.values()):
            notes.append(f"no size's yield reaches {100 * self.reach:g}%: the data ratios stay")
            return proposal
        mass = math.fsum(proposal.sizes[side].data_ratio for side in scores)
        weights = {side: spec.data_ratio for side, spec in proposal.sizes.items()}
        weights.update({side: mass * share for side, share in floored_shares(scores, self.floor).items()})
        weighed, text = reweighted(proposal, weights)
        notes.append(f"data by 1 / yield (sizes below {100 * self.reach:g}% get the floor {self.floor:g}): {text}")
        return weighed

    def _lengths(self, context: EngineerContext, proposal: StageConfig, notes: list[str]) -> StageConfig:
        """``proposal`` with each used size's makespan bounds set to its :func:`length_band` when it trains without
        waits and has one, cleared otherwise."""
        by_length = context.behavior.by_size_makespan if context.behavior is not None else {}
        if not by_length:
            notes.append("no validation split by optimal makespan (behavior.by_size_makespan): lengths stay")
            return proposal
        sizes = dict(proposal.sizes)
        for side in proposal.used_sizes():
            spec = sizes[side]
            band = None
            if spec.wait_ratio > 0:
                notes.append(f"{side}x{side} trains with waits: no makespan bounds")
            else:
                band = length_band(by_length, side, self.min_length_episodes, self.reach, self.solved, self.metric)
                if band is None:
                    notes.append(f"{side}x{side}: no makespan solved at least {100 * self.reach:g}% of the time "
                                 f"(with {self.min_length_episodes}+ episodes): no makespan bounds")
                else:
                    notes.append(f"{side}x{side}: plans of makespan {band[0]}..{band[1]} (solved at least "
                                 f"{100 * self.reach:g}% up to {band[1]}, below {100 * self.solved:g}% from {band[0]})")
            least, most = band if band is not None else (None, None)
            sizes[side] = replace(spec, min_makespan=least, max_makespan=most)
        return replace(proposal, sizes=sizes)

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """A lesson in waiting on the smallest size while a size has a gap, the start settings back once none
        has; ``seed`` is unused (the rule is deterministic)."""
        decider = Decider(self, context.text, config)
        for side, spec in config.sizes.items():
            self.start.setdefault(side, (spec.hole_ratio, spec.wait_ratio))
        notes = decider.notes

        decide = decider.decide

        by_size_wait = context.behavior.by_size_wait if context.behavior is not None else {}
        if config.agents_max < 2:
            return decider.keep("one agent: nothing ever waits")
        if not by_size_wait:
            return decider.keep("no validation split by need of a wait (behavior.by_size_wait): no evidence")
        used = config.used_sizes()
        gaps, evidenced_sides = [], []
        for side in used:
            rates = wait_rates(by_size_wait, side, self.min_episodes, self.metric)
            if rates is None:
                notes.append(f"size {side}: fewer than {self.min_episodes} validation episodes of a kind")
                continue
            waits, others = rates
            seen = f"size {side}: {self.metric} {percent(waits)} when a wait is needed, {percent(others)} otherwise"
            if others <= 0.0:
                notes.append(f"{seen}: nothing solved, no evidence of which skill is missing")
                continue
            evidenced_sides.append(side)
            if waits < self.ratio * others:
                gaps.append(side)
                notes.append(f"{seen}: a gap (below {self.ratio:g} x)")
            else:
                notes.append(f"{seen}: no gap")
        if not evidenced_sides:
            return decider.keep("no size with evidence: nothing to change")
        if self.remedy == "drop":
            proposal = self._drop(config, gaps, evidenced_sides, notes)
        else:
            proposal = self._lesson(context, config, gaps, used, notes)
        if self.lengths == "frontier":
            proposal = self._lengths(context, proposal, notes)
        if self.weigh == "yield":
            proposal = self._weigh(context, proposal, by_size_wait, notes)
        return decide(proposal, "gap: accepted" if proposal != config else "gap: nothing to change")

    def _lesson(self, context: EngineerContext, config: StageConfig, gaps: list[int], used: Sequence[int],
                notes: list[str]) -> StageConfig:
        """``config`` with the smallest used size a lesson in waiting while ``gaps`` is not empty, else with its
        start settings back."""
        lesson = min(used)
        spec = config.sizes[lesson]
        if gaps:
            holes = self._lesson_holes(context, config, lesson, notes)
            waits = self.lesson_wait
            self.lesson = holes
            notes.append(f"gap at {', '.join(f'{side}x{side}' for side in gaps)}: {lesson}x{lesson} is the lesson, "
                         f"every instance needing a wait (wait ratio {waits:g}) on maps with holes {holes:g}")
        else:
            holes, waits = self.start[lesson]
            self.lesson = None
            notes.append(f"no gap: {lesson}x{lesson} gets back its start settings (holes {holes:g}, wait {waits:g})")
        sizes = dict(config.sizes)
        sizes[lesson] = replace(spec, hole_ratio=holes, wait_ratio=waits)
        return replace(config, sizes=sizes)


__all__ = ["GapEngineer", "GapOptions", "length_band", "wait_rates"]
