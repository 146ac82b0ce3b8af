"""Aggregators combine transformed component values (each in [0, 1]) into one number."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

AggregatorName = Literal["weighted_mean", "weighted_geometric_mean", "product", "min"]


def aggregate(
    name: AggregatorName | str, values: Sequence[float], weights: Sequence[float]
) -> float:
    """Combine ``values`` with ``weights`` (>= 0; normalised, so only ratios matter).

    Components of weight 0 take no part. ``product`` and ``min`` ignore the weight values.
    Raises ValueError for empty input, mismatched lengths, negative weights or no positive
    weight, and for non-finite values (callers drop those as missing first).
    """
    if len(values) != len(weights):
        raise ValueError(f"{len(values)} values but {len(weights)} weights")
    pairs = [(float(v), float(w)) for v, w in zip(values, weights, strict=True)]
    if any(not math.isfinite(v) for v, _ in pairs):
        raise ValueError("values must be finite")
    if any(w < 0 or not math.isfinite(w) for _, w in pairs):
        raise ValueError("weights must be finite and >= 0")
    pairs = [(v, w) for v, w in pairs if w > 0]
    if not pairs:
        raise ValueError("nothing to aggregate: no value with a positive weight")
    total = sum(w for _, w in pairs)
    if name == "weighted_mean":
        mean = sum(v * w for v, w in pairs) / total
        lo, hi = min(v for v, _ in pairs), max(v for v, _ in pairs)
        return min(max(mean, lo), hi)  # rounding must not step outside the inputs
    if name == "weighted_geometric_mean":
        if any(v <= 0 for v, _ in pairs):
            return 0.0
        mean = math.exp(sum(w * math.log(v) for v, w in pairs) / total)
        lo, hi = min(v for v, _ in pairs), max(v for v, _ in pairs)
        return min(max(mean, lo), hi)
    if name == "product":
        return math.prod(v for v, _ in pairs)
    if name == "min":
        return min(v for v, _ in pairs)
    raise ValueError(f"unknown aggregator {name!r}")
