"""Krippendorff's alpha against the textbook's worked values, and its properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier_service.review.agreement import alpha, uniform_expected, unit_alpha

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, missing values; alpha nominal 0.743, interval 0.849.
OBSERVERS = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
UNITS = [list(unit) for unit in zip(*OBSERVERS, strict=True)]

# Section A: two observers, ten units, binary data: alpha 0.095.
BINARY = [
    list(unit)
    for unit in zip([0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0], strict=True)
]


def test_textbook_values() -> None:
    assert alpha(UNITS, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert alpha(UNITS, "interval") == pytest.approx(0.849, abs=5e-4)
    assert alpha(BINARY, "nominal") == pytest.approx(0.095, abs=5e-4)


def test_undefined_without_pairable_values_or_variation() -> None:
    assert alpha([[1, None], [None, 2]], "interval") is None  # no unit has two values
    assert alpha([[3, 3], [3, 3]], "interval") is None  # nothing to disagree about


unit_values = st.lists(st.integers(1, 5), min_size=2, max_size=6)
reliability = st.lists(unit_values, min_size=2, max_size=12)


@given(reliability)
def test_raters_who_always_agree_within_units_have_alpha_one(units: list[list[int]]) -> None:
    agreed = [[unit[0]] * len(unit) for unit in units]
    result = alpha(agreed, "interval")
    if len({u[0] for u in agreed}) > 1:
        assert result == pytest.approx(1.0)
    else:
        assert result is None


@given(reliability, st.floats(0.1, 10), st.floats(-10, 10))
def test_interval_alpha_ignores_affine_rescaling(
    units: list[list[int]], scale: float, shift: float
) -> None:
    rescaled = [[v * scale + shift for v in unit] for unit in units]
    before, after = alpha(units, "interval"), alpha(rescaled, "interval")
    if before is None:
        assert after is None or after == pytest.approx(1.0)
    else:
        assert after == pytest.approx(before, abs=1e-6)


@given(reliability, st.randoms())
def test_alpha_ignores_the_order_of_units_and_raters(units: list[list[int]], rnd: object) -> None:
    import random

    assert isinstance(rnd, random.Random)
    shuffled = [rnd.sample(unit, len(unit)) for unit in rnd.sample(units, len(units))]
    for metric in ("interval", "nominal"):
        before, after = alpha(units, metric), alpha(shuffled, metric)  # type: ignore[arg-type]
        assert (before is None) == (after is None)
        if before is not None:
            assert after == pytest.approx(before)
            assert before <= 1.0 + 1e-9


@given(unit_values)
def test_one_items_agreement_is_one_exactly_when_everyone_agrees(unit: list[int]) -> None:
    prior = uniform_expected("interval", low=1, high=5)
    result = unit_alpha(unit, "interval", prior_expected=prior)
    assert result is not None
    assert (result == 1.0) == (len(set(unit)) == 1)
    assert result <= 1.0


def test_one_items_agreement_against_the_queues_pooled_values() -> None:
    pooled = [1, 5] * 20  # a queue whose answers spread widely
    close = unit_alpha([4, 5], "interval", pooled=pooled, prior_expected=2.0)
    far = unit_alpha([1, 5], "interval", pooled=pooled, prior_expected=2.0)
    assert close is not None
    assert far is not None
    # D_o of (4, 5): mean over its ordered pairs of (4 - 5)^2 = 1. D_e: 20 ones and 20 fives,
    # 2 * 20 * 20 * (5 - 1)^2 over 40 * 39 ordered pairs = 12800 / 1560.
    assert close == pytest.approx(1 - 1 / (12800 / 1560), rel=1e-9)
    assert far < close
    # Too few pooled values: the uniform prior over the scale is the yardstick.
    assert unit_alpha([4, 5], "interval", pooled=[4, 5], prior_expected=4.0) == 1 - 1 / 4.0
