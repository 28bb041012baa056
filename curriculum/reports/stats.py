"""Means and 95% intervals over seeds, and paired differences between comparison arms.

An interval is Student's t: ``mean +- t(0.975, n-1) * sd / sqrt(n)`` with the sample standard deviation
(``n - 1`` in the denominator). One seed has no interval (``half_width`` is None). A paired difference pairs the
two arms' values seed by seed (the arms share each seed's warm start and instances), so seed-to-seed variation
that both arms share cancels; only seeds both arms finished count.

How much to believe a paired difference: :func:`paired_p_value` is the two-sided p of a one-sample Student t test
that the mean paired difference is 0 (the t distribution's CDF is computed here, from the regularized incomplete
beta function, so scipy is not needed), and :func:`holm` adjusts the p values of several arms compared against one
reference (Holm-Bonferroni: the chance that any of them is a false alarm stays under the level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from simulator.documents import checked_int, checked_real, read_key

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
        low, high = self.low, self.high
        return low is not None and high is not None and (low > 0 or high < 0)

    def format(self, scale: float = 100.0, digits: int = 1, signed: bool = False) -> str:
        """``"40.2 ± 1.3"`` (values times ``scale``); ``"40.2"`` for a single value."""
        sign = "+" if signed else ""
        text = f"{self.mean * scale:{sign}.{digits}f}"
        if self.half_width is not None:
            text += f" ± {self.half_width * scale:.{digits}f}"
        return text

    def to_dict(self) -> dict:
        return {"mean": self.mean, "half_width": self.half_width, "n": self.n, "low": self.low, "high": self.high}

    @classmethod
    def from_dict(cls, data: Any, where: str = "interval") -> "Interval":
        """Read :meth:`to_dict`'s document (``low`` and ``high`` are derived, so not read)."""
        half = read_key(data, "half_width", where, "number", optional=True)
        return cls(mean=checked_real(read_key(data, "mean", where, "number"), f"{where}.mean", -1e12, 1e12),
                   half_width=checked_real(half, f"{where}.half_width", 0.0, 1e12) if half is not None else None,
                   n=checked_int(read_key(data, "n", where, "int"), f"{where}.n", 0, 10**9))


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


def paired_values(arm: Mapping[int, float], reference: Mapping[int, float]) -> list[float]:
    """``arm[seed] - reference[seed]`` for the seeds both have, in seed order (empty if none)."""
    return [arm[seed] - reference[seed] for seed in sorted(set(arm) & set(reference))]


def paired_difference(arm: Mapping[int, float], reference: Mapping[int, float]) -> Interval | None:
    """Mean and 95% interval of ``arm[seed] - reference[seed]`` over the seeds both have (None if none)."""
    differences = paired_values(arm, reference)
    return mean_interval(differences) if differences else None


# --- p values ------------------------------------------------------------------------------------------------

_CF_EPSILON = 1e-15  # relative change of the continued fraction at which it has converged
_CF_TINY = 1e-300  # stands in for a zero denominator in Lentz's method
_CF_MAX_TERMS = 500  # the fraction converges in O(sqrt(max(a, b))) terms; 500 covers df up to ~10^5


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function, ``1 / (1 + d1 / (1 + d2 / (1 + ...)))`` with
    ``d(2m+1) = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1))`` and ``d(2m) = m(b-m) x / ((a+2m-1)(a+2m))``, evaluated front
    to back by the modified Lentz method. Converges fast for ``x < (a+1) / (a+b+2)``."""

    def guarded(value: float) -> float:
        return value if abs(value) >= _CF_TINY else _CF_TINY

    numerator_ratio = 1.0  # Lentz's C: ratio of successive numerators
    denominator_ratio = 1.0 / guarded(1.0 - (a + b) * x / (a + 1.0))  # Lentz's D: inverse ratio of denominators
    value = denominator_ratio
    for m in range(1, _CF_MAX_TERMS + 1):
        for term in (m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),  # even step d(2m)
                     -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))):  # odd step d(2m+1)
            denominator_ratio = 1.0 / guarded(1.0 + term * denominator_ratio)
            numerator_ratio = guarded(1.0 + term / numerator_ratio)
            change = numerator_ratio * denominator_ratio
            value *= change
        if abs(change - 1.0) < _CF_EPSILON:
            return value
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``: the regularized incomplete beta function for ``a, b > 0`` and ``0 <= x <= 1``."""
    if not (a > 0 and b > 0 and 0.0 <= x <= 1.0):
        raise ValueError(f"a = {a}, b = {b}, x = {x}: a > 0, b > 0 and 0 <= x <= 1 are needed")
    if x in (0.0, 1.0):
        return x
    # x^a (1-x)^b / (a B(a, b)) is the fraction's prefactor; from the side where the fraction converges quickly,
    # using I_x(a, b) = 1 - I_{1-x}(b, a) on the other side.
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def student_t_two_sided_p(t: float, df: float) -> float:
    """``P(|T| >= |t|)`` for Student's t with ``df > 0`` degrees of freedom: ``I_{df/(df+t^2)}(df/2, 1/2)``."""
    if not df > 0 or math.isnan(t):
        raise ValueError(f"t = {t}, df = {df}: a number t and df > 0 are needed")
    if math.isinf(t):
        return 0.0
    return min(1.0, regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t)))


def student_t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df > 0`` degrees of freedom."""
    tail = student_t_two_sided_p(t, df) / 2.0
    return 1.0 - tail if t > 0 else tail


def paired_p_value(differences: Sequence[float]) -> float | None:
    """Two-sided p of a one-sample Student t test that the mean of ``differences`` (paired, one per seed) is 0.

    None for fewer than 2 differences (no spread to judge by). All differences equal: 0.0 when they are nonzero
    (no seed disagrees), 1.0 when they are all zero. Non-finite differences: ValueError."""
    values = [float(v) for v in differences]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"differences = {values!r}: finite numbers are needed")
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    if all(v == values[0] for v in values):
        return 0.0 if values[0] != 0 else 1.0
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return student_t_two_sided_p(mean / (sd / math.sqrt(n)), n - 1)


def holm(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p values, keyed as given: with the ``m`` p values sorted ascending (ties in the
    given order), the i-th (0-based) becomes ``max over j <= i of min(1, (m - j) * p_(j))`` (monotone in the
    order). Rejecting where the adjusted p is under a level keeps the chance of any false alarm under it."""
    for name, p in p_values.items():
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"p value of {name!r} = {p!r}: a number in [0, 1] is needed")
    m = len(p_values)
    order = sorted(p_values, key=lambda name: p_values[name])
    adjusted: dict[str, float] = {}
    running = 0.0
    for j, name in enumerate(order):
        running = max(running, min(1.0, (m - j) * p_values[name]))
        adjusted[name] = running
    return {name: adjusted[name] for name in p_values}
