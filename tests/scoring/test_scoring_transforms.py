"""Transforms: known values of each shape, and every output stays in [0, 1]."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from verifier_service.policies.schemas import TransformSpec
from verifier_service.scoring.transforms import apply_transform

_ADAPTER: TypeAdapter[TransformSpec] = TypeAdapter(TransformSpec)


def _t(**params: object) -> TransformSpec:
    return _ADAPTER.validate_python(params)


def test_identity_clips() -> None:
    spec = _t(type="identity")
    assert [apply_transform(spec, x) for x in (-1.0, 0.3, 2.0)] == [0.0, 0.3, 1.0]


@pytest.mark.parametrize("kind", ["linear", "clip"])
def test_linear_maps_low_high_onto_0_1(kind: str) -> None:
    spec = _t(type=kind, low=2.0, high=6.0)
    assert apply_transform(spec, 2.0) == 0.0
    assert apply_transform(spec, 4.0) == 0.5
    assert apply_transform(spec, 6.0) == 1.0
    assert apply_transform(spec, 100.0) == 1.0
    assert apply_transform(spec, -100.0) == 0.0
    falling = _t(type=kind, low=6.0, high=2.0)
    assert apply_transform(falling, 5.0) == pytest.approx(0.25)


def test_sigmoid_and_reverse() -> None:
    spec = _t(type="sigmoid", low=0.2, high=0.8)
    assert apply_transform(spec, 0.5) == pytest.approx(0.5)
    assert apply_transform(spec, 0.8) == pytest.approx(1 / (1 + 10**-2.5))
    assert apply_transform(spec, 0.2) == pytest.approx(1 - 1 / (1 + 10**-2.5))
    assert apply_transform(spec, 0.7) > apply_transform(spec, 0.6)
    rev = _t(type="reverse_sigmoid", low=2.0, high=6.0)
    assert apply_transform(rev, 4.0) == pytest.approx(0.5)
    assert apply_transform(rev, 1.0) > 0.99  # easy to make: SA 1
    assert apply_transform(rev, 9.0) < 0.01


def test_double_sigmoid_is_a_window() -> None:
    spec = _t(type="double_sigmoid", low=1.0, high=4.0, width=0.3)
    assert apply_transform(spec, 2.5) == pytest.approx(1.0)
    assert apply_transform(spec, 1.0) == pytest.approx(0.5, abs=0.01)
    assert apply_transform(spec, 4.0) == pytest.approx(0.5, abs=0.01)
    assert apply_transform(spec, -2.0) < 0.01
    assert apply_transform(spec, 8.0) < 0.01


def test_step() -> None:
    above = _t(type="step", threshold=0.5)
    assert (apply_transform(above, 0.5), apply_transform(above, 0.49)) == (1.0, 0.0)
    below = _t(type="step", threshold=500.0, direction="below")
    assert (apply_transform(below, 450.0), apply_transform(below, 501.0)) == (1.0, 0.0)


def test_gaussian() -> None:
    spec = _t(type="gaussian", center=350.0, width=50.0)
    assert apply_transform(spec, 350.0) == 1.0
    assert apply_transform(spec, 400.0) == pytest.approx(math.exp(-0.5))
    assert apply_transform(spec, 300.0) == pytest.approx(math.exp(-0.5))


def test_non_finite_input_is_refused() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        apply_transform(_t(type="identity"), float("nan"))


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="low must be less than high"):
        _t(type="sigmoid", low=1.0, high=0.0)
    with pytest.raises(ValueError, match="greater than 0"):
        _t(type="gaussian", center=0.0, width=0.0)


_finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
_pos = st.floats(min_value=1e-3, max_value=1e3)


@st.composite
def _specs(draw: st.DrawFn) -> TransformSpec:
    low = draw(_finite)
    high = low + draw(_pos)
    kind = draw(
        st.sampled_from(
            ["identity", "linear", "clip", "sigmoid", "reverse_sigmoid", "double_sigmoid",
             "step", "gaussian"]
        )
    )  # fmt: skip
    params: dict[str, object] = {"type": kind}
    if kind in ("linear", "clip", "sigmoid", "reverse_sigmoid", "double_sigmoid"):
        params.update(low=low, high=high)
    if kind in ("sigmoid", "reverse_sigmoid"):
        params["k"] = draw(_pos)
    if kind in ("double_sigmoid", "gaussian"):
        params["width"] = draw(_pos)
    if kind == "gaussian":
        params["center"] = low
    if kind == "step":
        params.update(threshold=low, direction=draw(st.sampled_from(["above", "below"])))
    return _t(**params)


@given(spec=_specs(), x=st.floats(allow_nan=False, allow_infinity=False))
def test_transforms_stay_in_unit_interval(spec: TransformSpec, x: float) -> None:
    y = apply_transform(spec, x)
    assert 0.0 <= y <= 1.0
