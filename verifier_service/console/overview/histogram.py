"""Percentiles of verdict wall times from log-spaced histogram buckets merged with raw values.

Bucket ``b`` holds walls in ``[FLOOR_S * BASE**b, FLOOR_S * BASE**(b + 1))`` and stands for its
geometric middle, so a value read back from a bucket is within ``sqrt(BASE) - 1`` (about 2.5 %)
of the real one; walls under ``FLOOR_S`` (0.1 ms) share bucket 0. A percentile is read the way
PostgreSQL's ``percentile_cont`` reads it (linear interpolation between the two nearest ranks)
over the merged, sorted values: exact where every value is raw, within about 2.5 % otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

BASE = 1.05
FLOOR_S = 1e-4
LN_BASE = math.log(BASE)


def bucket_of(wall_s: float) -> int:
    """The bucket a wall time falls in (the same formula the rollup's SQL uses)."""
    return math.floor(math.log(max(wall_s, FLOOR_S) / FLOOR_S) / LN_BASE)


def value_of(bucket: int) -> float:
    """The wall time a bucket stands for: its geometric middle."""
    return FLOOR_S * math.pow(BASE, bucket + 0.5)


def percentile(weighted: Iterable[tuple[float, int]], q: float) -> float:
    """The q-quantile (0..1) of values given with their counts; 0.0 when there are none."""
    ordered = sorted((v, n) for v, n in weighted if n > 0)
    total = sum(n for _, n in ordered)
    if total == 0:
        return 0.0
    pos = q * (total - 1)
    low = int(pos)
    low_value = _at(ordered, low)
    high_value = _at(ordered, min(low + 1, total - 1))
    return low_value + (high_value - low_value) * (pos - low)


def _at(ordered: list[tuple[float, int]], rank: int) -> float:
    seen = 0
    for value, n in ordered:
        seen += n
        if rank < seen:
            return value
    return ordered[-1][0]
