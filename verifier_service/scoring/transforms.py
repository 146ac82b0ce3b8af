"""Transforms map a raw component value into [0, 1]."""

from __future__ import annotations

import math

from verifier_service.policies.schemas import (
    ClipTransform,
    DoubleSigmoidTransform,
    GaussianTransform,
    IdentityTransform,
    LinearTransform,
    ReverseSigmoidTransform,
    SigmoidTransform,
    StepTransform,
    TransformSpec,
)


def _clip01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def _logistic(z: float) -> float:
    # Two branches so a large |z| never overflows exp().
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _sigmoid(x: float, low: float, high: float, k: float) -> float:
    # 1 / (1 + 10^(-k * 10 * (x - mid) / (high - low))), written with base e.
    z = k * 10.0 * (x - (low + high) / 2.0) / (high - low) * math.log(10.0)
    return _logistic(z)


def apply_transform(spec: TransformSpec, x: float) -> float:
    """The transformed value, always in [0, 1]; raises ValueError for a non-finite ``x``."""
    if not math.isfinite(x):
        raise ValueError(f"cannot transform a non-finite value ({x})")
    if isinstance(spec, IdentityTransform):
        return _clip01(x)
    if isinstance(spec, LinearTransform | ClipTransform):
        return _clip01((x - spec.low) / (spec.high - spec.low))
    if isinstance(spec, ReverseSigmoidTransform):
        return _clip01(1.0 - _sigmoid(x, spec.low, spec.high, spec.k))
    if isinstance(spec, SigmoidTransform):
        return _clip01(_sigmoid(x, spec.low, spec.high, spec.k))
    if isinstance(spec, DoubleSigmoidTransform):
        rise = _logistic((x - spec.low) / spec.width)
        fall = _logistic((spec.high - x) / spec.width)
        peak = _logistic((spec.high - spec.low) / (2.0 * spec.width)) ** 2
        return _clip01(rise * fall / peak)
    if isinstance(spec, StepTransform):
        good = x >= spec.threshold if spec.direction == "above" else x <= spec.threshold
        return 1.0 if good else 0.0
    if isinstance(spec, GaussianTransform):
        z = abs(x - spec.center) / spec.width
        return 0.0 if z > 40.0 else _clip01(math.exp(-0.5 * z * z))  # exp(-800) is 0 anyway
    raise TypeError(f"unknown transform {spec!r}")
