"""Means and 95% intervals over seeds, and paired differences between comparison arms.

An interval is Student's t: ``mean +- t(0.975, n-1) * sd / sqrt(n)`` with the sample standard deviation
(``n - 1`` in the denominator). One seed has no interval (``half_width`` is None). A paired difference pairs the
two arms' values seed by seed (the arms share each seed's warm start and instances), so seed-to-seed variation
that both arms share cancels; only seeds both arms finished count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

# t(0.975, df) for df = 1..30; beyond 30 the normal quantile is within 2% of it.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.960


def t_quantile_975(df: int) -> float:
    """Two-sided 95% Student-t quantile for ``df >= 1`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"df = {df}: at least 1 degree of freedom is needed")
    return _T975[df - 1] if df <= len(_T975) else _Z975


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` values and its 95% half width (None when ``n < 2``)."""

    mean: float
    half_width: float | None
    n: int

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.mean + self.half_width

    @property
    def excludes_zero(self) -> bool:
        return self.half_width is not None and (self.low > 0 or self.high < 0)

    def format(self, scale: float = 100.0, digits: int = 1, signed: bool = False) -> str:
        """``"40.2 ± 1.3"`` (values times ``scale``); ``"40.2"`` for a single value."""
        sign = "+" if signed else ""
        text = f"{self.mean * scale:{sign}.{digits}f}"
        if self.half_width is not None:
            text += f" ± {self.half_width * scale:.{digits}f}"
        return text

    def to_dict(self) -> dict:
        return {"mean": self.mean, "half_width": self.half_width, "n": self.n, "low": self.low, "high": self.high}


def mean_interval(values: Sequence[float]) -> Interval:
    """Mean and 95% t interval of ``values`` (at least one finite number)."""
    values = [float(v) for v in values]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"values = {values!r}: at least one finite number is needed")
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return Interval(mean, None, n)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return Interval(mean, t_quantile_975(n - 1) * math.sqrt(variance / n), n)


def paired_difference(arm: Mapping[int, float], reference: Mapping[int, float]) -> Interval | None:
    """Mean and 95% interval of ``arm[seed] - reference[seed]`` over the seeds both have (None if none)."""
    seeds = sorted(set(arm) & set(reference))
    if not seeds:
        return None
    return mean_interval([arm[seed] - reference[seed] for seed in seeds])
