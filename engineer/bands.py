"""Makespan bands for the engineers that steer plan length (``window``, ``target``): the evidence per optimal
makespan, and whether the generator can fill a band.

A size's ``min_makespan`` / ``max_makespan`` keep only instances whose optimal makespan lies between them; the
generator draws candidates until one fits and gives up (a ``ConfigError`` that would stop the run) after 2,000 per
instance. Some bands a config can write are empty or nearly so: no 5x5 instance with 2 agents that needs a wait has
a plan of 1 or 2 steps, and a 6x6 one of 2 steps turns up once in hundreds of candidates. Before an engineer writes a
band it asks :func:`fillable_band`, which generates a few instances of the band (seeded, so the decision stays
deterministic) and widens the band upward one makespan at a time until the candidates per instance are few.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from replays.mining import GroupStats
from simulator.config import SizeSpec, StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate

PROBE_SAMPLES = 8
"""Instances generated per probe of a band (and per kind, with and without a wait, when the size has waits)."""
PROBE_CANDIDATES = 100
"""Most candidates per instance a fillable band may take in its probe: at 1 candidate in 100 fitting, an instance's
2,000 attempts all miss with probability about e**-20, so a stage of thousands of instances still fills."""
PROBE_SEED = 0x0BAD  # the probes' own seed: the same band always gets the same verdict


def makespan_levels(by_size_makespan: Mapping[tuple[int, int], GroupStats], side: int,
                    metric: str) -> dict[int, tuple[int, float]]:
    """``{makespan: (episodes, rate)}`` of ``side`` from the evidence's ``by_size_makespan`` (keys ``(side,
    makespan)``), ascending; other sides, empty groups and non-finite rates are skipped."""
    levels: dict[int, tuple[int, float]] = {}
    for (size, makespan), group in by_size_makespan.items():
        if size != side or group.episodes < 1:
            continue
        rate = float(getattr(group, metric))
        if math.isfinite(rate):
            levels[makespan] = (group.episodes, rate)
    return dict(sorted(levels.items()))


def band_fills(config: StageConfig, side: int, spec: SizeSpec, low: int, high: int) -> bool:
    """Whether ``PROBE_SAMPLES`` instances of ``side`` with optimal makespans ``low..high`` (``spec``'s holes, the
    config's agents) generate within ``PROBE_CANDIDATES`` candidates each, for the instances that need a wait too
    when ``spec`` has waits."""
    for waits in ((0.0, 1.0) if spec.wait_ratio > 0 else (0.0,)):
        # the instances that need a wait are those with 2+ agents (a lone agent never waits)
        least = max(config.agents_min, 2) if waits else config.agents_min
        probe = replace(config, agents_min=least, samples=PROBE_SAMPLES, seed=PROBE_SEED,
                        sizes={side: SizeSpec(1.0, spec.hole_ratio, waits, low, high)})
        try:
            report = generate(probe).reports[side]
        except ConfigError:  # an instance ran out of candidates: the band is (nearly) empty
            return False
        if report.candidates > PROBE_CANDIDATES * PROBE_SAMPLES:
            return False
    return True


def fillable_band(config: StageConfig, side: int, spec: SizeSpec, low: int, high: int,
                  top_limit: int) -> tuple[int, int] | None:
    """``(low, top)`` with the least ``top`` from ``high`` up to ``max(high, top_limit)`` whose band
    :func:`band_fills`; None when none does."""
    for top in range(high, max(high, top_limit) + 1):
        if band_fills(config, side, spec, low, top):
            return low, top
    return None


__all__ = ["PROBE_CANDIDATES", "PROBE_SAMPLES", "band_fills", "fillable_band", "makespan_levels"]
