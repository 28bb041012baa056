"""The window engineer: each size trains inside a difficulty window whose top rises once the policy masters it.

After RLVE (Zeng et al., 2025, "RLVE: Scaling Up Reinforcement Learning for Language Models with Adaptive
Verifiable Environments"): every environment keeps a window ``[low, top]`` of difficulty levels and samples its
problems inside it; when the accuracy on the top level reaches ``threshold`` (0.9) over at least ``min_episodes``
(8) problems, the top rises by one level, and the lower bound follows at ``top - width + 1``, so the window slides
toward harder problems and never back.

Here an environment is a map size and a level is an optimal makespan, the plan length an instance asks for
(``min_makespan`` / ``max_makespan`` of the size in the stage config are the window: the config holds the window
itself, so the engineer keeps no state and a resumed run continues the same windows). The accuracy on a level is
the evidence set's ``metric`` (``valid_rate`` by default) on that size's instances of that makespan
(``behavior.by_size_makespan``), the one split by level the evidence measures. Per used size:

1. The window is the config's bounds; a size without an upper bound starts at ``[max(1, start - width + 1),
   start]``.
2. The top rises one level at a time while the evidence has at least ``min_episodes`` episodes of the top level
   with a rate of at least ``threshold``, and at least one episode of the next level (a level the evidence never
   saw may not exist on this map). So one decision may raise it several levels, each on its own evidence. A size
   without evidence episodes is left alone.
3. The lower bound follows: ``low = max(low, top - width + 1)``.
4. With ``hole_step`` > 0, holes are a second axis of difficulty: each level the top rose adds ``hole_step`` to
   the size's hole ratio (at most ``max_hole_ratio``, and never so far that fewer free cells than agents remain).
   The evidence set's holes stay as they are, so the window's accuracy is read on its maps; 0 (the default) keeps
   the holes.
5. The window is written only when the generator can fill it (:func:`engineer.bands.fillable_band`; a window it
   cannot fill is widened upward, up to the longest makespan the evidence saw at that size; one it still cannot
   fill keeps the previous bounds).

Unlike RLVE's problem generators, ours cannot draw the levels of a window uniformly: instances are drawn from the
size's natural distribution and kept when their makespan is inside the window, so short plans stay the common
ones. Data, wait ratios, agents, samples, seed, slip and horizon never change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engineer.bands import fillable_band, makespan_levels
from engineer.context import EngineerContext
from engineer.decision import Decider, EngineerDecision
from engineer.options import DeclaredOptions, choice, integer, number
from engineer.rule import RULE_METRICS, hole_ratio_cap
from simulator.config import MAX_HOLE_RATIO, MAX_HORIZON, StageConfig
from simulator.text import percent

_DIGITS = 4


@dataclass
class WindowEngineer(DeclaredOptions):
    """See the module docstring. Options: ``make_engineer("window", threshold=0.9, min_episodes=8, width=3)``."""

    threshold: float = number(0.9, 0.0, 1.0)
    """Rate on the top level at or above which the top rises (RLVE's 0.9)."""
    min_episodes: int = integer(8, 1, MAX_HORIZON)
    """Least evidence episodes of the top level before it can rise (RLVE's 8 problems)."""
    width: int = integer(3, 1, MAX_HORIZON)
    """Levels in a window once the top has risen past them: the lower bound is ``top - width + 1``."""
    start: int = integer(1, 1, MAX_HORIZON)
    """Top of the first window of a size whose config has no upper bound."""
    hole_step: float = number(0.0, 0.0, 1.0)
    """Hole ratio added per level the top rises, in [0, 1]; 0 keeps the holes."""
    max_hole_ratio: float = number(0.5, 0.0, MAX_HOLE_RATIO)
    """The engineer never raises a hole ratio past this."""
    metric: str = choice("valid_rate", RULE_METRICS)
    """The evidence's rate it reads per size: ``valid_rate`` or ``optimal_rate``."""
    name: str = "window"

    def propose(self, context: EngineerContext, config: StageConfig, seed: int = 0) -> EngineerDecision:
        """Each used size's window moved by its evidence (see the module docstring); ``seed`` is unused."""
        decider = Decider(self, context.text, config)
        notes = decider.notes

        decide = decider.decide

        by_length = context.behavior.by_size_makespan if context.behavior is not None else {}
        if not by_length:
            return decider.keep("no evidence split by optimal makespan (behavior.by_size_makespan): the windows stay")
        sizes = dict(config.sizes)
        for side in config.used_sizes():
            sizes[side] = self._slide(config, side, makespan_levels(by_length, side, self.metric), notes)
        proposal = replace(config, sizes=sizes)
        return decide(proposal, "window: accepted" if proposal != config else "window: nothing to change")

    def _slide(self, config: StageConfig, side: int, levels: dict[int, tuple[int, float]], notes: list[str]):
        """The size's spec with its window moved by ``levels`` (``{makespan: (episodes, rate)}``)."""
        spec = config.sizes[side]
        if not levels:
            notes.append(f"{side}x{side}: no evidence episodes of any makespan, the size is left alone")
            return spec
        if spec.max_makespan is None:
            top = max(self.start, spec.min_makespan or 1)
            low = spec.min_makespan or max(1, top - self.width + 1)
        else:
            low, top = spec.min_makespan or 1, spec.max_makespan
        before = (low, top)
        rose = 0
        while top in levels and top + 1 in levels and levels[top][0] >= self.min_episodes \
                and levels[top][1] >= self.threshold:
            top += 1
            rose += 1
        low = max(low, top - self.width + 1)
        if top in levels:
            episodes, rate = levels[top]
            seen = f"top level {top}: {self.metric} {percent(rate)} of {episodes}"
        else:
            seen = f"no evidence of level {top}"
        hole_ratio = spec.hole_ratio
        if rose and self.hole_step > 0:
            cap = min(self.max_hole_ratio, hole_ratio_cap(side, config.agents_max))
            hole_ratio = max(hole_ratio, round(min(hole_ratio + rose * self.hole_step, cap), _DIGITS))
        moved = replace(spec, hole_ratio=hole_ratio)
        band = fillable_band(config, side, moved, low, top, max(levels))
        if band is None:
            notes.append(f"{side}x{side}: {seen}; window {low}..{top} cannot be filled by the generator, the size "
                         "keeps its bounds and holes")
            return spec
        if band[1] != top:
            notes.append(f"{side}x{side}: window {low}..{top} widened to {band[0]}..{band[1]} (the generator finds "
                         "too few instances in it)")
        low, top = band
        rise = f"the top rose {rose} level{'s' if rose != 1 else ''}" if rose else "the top stays"
        holes = f", holes {spec.hole_ratio:g} -> {hole_ratio:g}" if hole_ratio != spec.hole_ratio else ""
        notes.append(f"{side}x{side}: {seen} ({rise}; rises at {100 * self.threshold:g}% over "
                     f"{self.min_episodes}+): window {before[0]}..{before[1]} -> {low}..{top}{holes}")
        return replace(moved, min_makespan=low, max_makespan=top)


__all__ = ["WindowEngineer"]
