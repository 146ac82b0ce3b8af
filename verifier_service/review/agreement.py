"""Krippendorff's alpha: agreement among any number of raters, with missing answers.

alpha = 1 - D_o / D_e, where D_o is the disagreement observed within units (items) and D_e the
disagreement expected by chance, from all pairable values pooled (Krippendorff, "Computing
Krippendorff's Alpha-Reliability", 2011). Units with fewer than two values are not pairable and
count for nothing. Metrics: `interval` (squared difference, for scores) and `nominal` (0 when
equal, else 1, for labels).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import permutations
from typing import Literal

Metric = Literal["interval", "nominal"]
Value = float | str


def _delta(metric: Metric) -> Callable[[Value, Value], float]:
    if metric == "interval":
        return lambda a, b: (float(a) - float(b)) ** 2
    return lambda a, b: 0.0 if a == b else 1.0


def _pairable(units: Iterable[Sequence[Value | None]]) -> list[list[Value]]:
    kept = [[v for v in unit if v is not None] for unit in units]
    return [unit for unit in kept if len(unit) >= 2]


def _within(unit: Sequence[Value], delta: Callable[[Value, Value], float]) -> float:
    """Sum of delta over ordered pairs of different positions within one unit."""
    return sum(delta(a, b) for a, b in permutations(unit, 2))


def _expected(values: Sequence[Value], delta: Callable[[Value, Value], float]) -> float:
    """Mean delta over ordered pairs of different positions among all pooled values."""
    n = len(values)
    if n < 2:
        return 0.0
    counts = Counter(values)
    total = sum(nc * nk * delta(c, k) for c, nc in counts.items() for k, nk in counts.items())
    return total / (n * (n - 1))


def alpha(units: Iterable[Sequence[Value | None]], metric: Metric) -> float | None:
    """Krippendorff's alpha of reliability data: one sequence of raters' values (None where a
    rater gave none) per unit. None when it is undefined: fewer than two pairable values, or no
    variation at all among the pooled values."""
    delta = _delta(metric)
    pairable = _pairable(units)
    values = [v for unit in pairable for v in unit]
    n = len(values)
    if n < 2:
        return None
    observed = sum(_within(unit, delta) / (len(unit) - 1) for unit in pairable) / n
    expected = _expected(values, delta)
    if expected == 0:
        return None
    return 1.0 - observed / expected


def uniform_expected(metric: Metric, *, low: int = 1, high: int = 5, labels: int = 2) -> float:
    """Expected disagreement when answers are drawn uniformly: over the integers low..high
    (interval: twice the variance, (k^2 - 1) / 6), or over `labels` labels (nominal)."""
    if metric == "interval":
        k = high - low + 1
        return (k * k - 1) / 6
    return 1.0 - 1.0 / labels


def unit_alpha(
    unit: Sequence[Value | None],
    metric: Metric,
    *,
    pooled: Sequence[Value] = (),
    prior_expected: float,
    min_pooled: int = 20,
) -> float | None:
    """Agreement on one item: 1 - (its mean pairwise disagreement) / (expected disagreement).

    The expected disagreement comes from the values pooled over the queue's items when there
    are at least `min_pooled` of them, else from `prior_expected` (uniform answers over the
    rubric). None when the item has fewer than two answers.
    """
    values = [v for v in unit if v is not None]
    m = len(values)
    if m < 2:
        return None
    delta = _delta(metric)
    observed = _within(values, delta) / (m * (m - 1))
    if observed == 0:
        return 1.0
    expected = _expected(list(pooled), delta) if len(pooled) >= min_pooled else prior_expected
    if expected <= 0:
        expected = prior_expected
    return 1.0 - observed / expected
