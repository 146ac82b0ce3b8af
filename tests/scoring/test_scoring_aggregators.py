"""Aggregators: known values, weights, zeros, and bounds."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from verifier_service.scoring.aggregators import aggregate


def test_weighted_mean() -> None:
    assert aggregate("weighted_mean", [0.2, 0.8], [1.0, 1.0]) == pytest.approx(0.5)
    assert aggregate("weighted_mean", [0.2, 0.8], [3.0, 1.0]) == pytest.approx(0.35)


def test_weighted_geometric_mean() -> None:
    assert aggregate("weighted_geometric_mean", [0.25, 1.0], [1.0, 1.0]) == pytest.approx(0.5)
    expected = math.exp((2 * math.log(0.5) + math.log(0.8)) / 3)
    assert aggregate("weighted_geometric_mean", [0.5, 0.8], [2.0, 1.0]) == pytest.approx(expected)
    assert aggregate("weighted_geometric_mean", [0.0, 0.9], [1.0, 1.0]) == 0.0


def test_product_and_min() -> None:
    assert aggregate("product", [0.5, 0.5, 0.8], [1.0, 1.0, 1.0]) == pytest.approx(0.2)
    assert aggregate("min", [0.5, 0.3, 0.8], [1.0, 1.0, 1.0]) == 0.3


def test_zero_weight_takes_no_part() -> None:
    assert aggregate("min", [0.1, 0.9], [0.0, 1.0]) == 0.9
    assert aggregate("weighted_geometric_mean", [0.0, 0.9], [0.0, 1.0]) == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("values", "weights", "message"),
    [
        ([], [], "nothing to aggregate"),
        ([0.5], [0.0], "nothing to aggregate"),
        ([0.5], [1.0, 1.0], "weights"),
        ([float("nan")], [1.0], "finite"),
        ([0.5], [-1.0], ">= 0"),
    ],
)
def test_bad_input_raises(values: list[float], weights: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        aggregate("weighted_mean", values, weights)


def test_unknown_aggregator() -> None:
    with pytest.raises(ValueError, match="unknown aggregator"):
        aggregate("median", [0.5], [1.0])


_pairs = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=100.0)),
    min_size=1,
    max_size=8,
)


@given(pairs=_pairs, name=st.sampled_from(["weighted_mean", "weighted_geometric_mean"]))
def test_means_lie_between_min_and_max(pairs: list[tuple[float, float]], name: str) -> None:
    live = [v for v, w in pairs if w > 0]
    assume(live)
    result = aggregate(name, [v for v, _ in pairs], [w for _, w in pairs])
    if name == "weighted_geometric_mean" and min(live) == 0.0:
        assert result == 0.0
    else:
        assert min(live) <= result <= max(live)


@given(pairs=_pairs, name=st.sampled_from(["product", "min"]))
def test_product_and_min_stay_in_unit_interval(pairs: list[tuple[float, float]], name: str) -> None:
    assume(any(w > 0 for _, w in pairs))
    result = aggregate(name, [v for v, _ in pairs], [w for _, w in pairs])
    assert 0.0 <= result <= min(v for v, w in pairs if w > 0)
