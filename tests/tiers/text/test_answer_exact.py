"""Whole numbers and fractions of them are compared exactly, without sympy: equal when their
values are, with the same verdict math-verify gives; anything else still goes to math-verify."""

from __future__ import annotations

from typing import Any

import pytest

from tiers.base import Candidate, Verdict
from tiers.text import answer as answer_module
from tiers.text.answer import AnswerTier
from tiers.text.settings import AnswerSettings

EXACT = [
    ("\\frac{6}{8}", "\\frac{3}{4}", True),  # unreduced
    ("3/4", "\\dfrac{3}{4}", True),
    ("-\\frac{1}{2}", "\\frac{-1}{2}", True),
    ("\\tfrac{4}{2}", "2", True),
    ("1234", "\\frac{2468}{2}", True),
    ("\\frac{7}{8}", "\\frac{3}{4}", False),
    ("-\\frac{3}{4}", "\\frac{3}{4}", False),
    ("12", "\\frac{25}{2}", False),
]


def judge(tier: AnswerTier, answer: str, reference: Any) -> Verdict:
    item = Candidate(
        kind="text", payload={"text": f"so \\boxed{{{answer}}}"}, reference={"answer": reference}
    )
    (verdict,) = tier.verify_batch([item], {"mode": "math"})
    return verdict


@pytest.mark.parametrize(("answer", "reference", "equal"), EXACT)
def test_fractions_of_whole_numbers_need_no_sympy(
    answer: str, reference: str, equal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pool(*_: Any) -> None:
        raise AssertionError("the math subprocess pool was used")

    monkeypatch.setattr(answer_module, "pool_for", no_pool)
    verdict = judge(AnswerTier(), answer, reference)
    assert verdict.components["correct"] == float(equal), verdict.feedback
    assert verdict.components["parsed"] == 1.0


@pytest.mark.parametrize(("answer", "reference", "equal"), EXACT)
def test_math_verify_agrees_on_every_exact_case(answer: str, reference: str, equal: bool) -> None:
    # The same pair through the subprocess (as a decimal-free expression sympy must read).
    tier = AnswerTier(AnswerSettings(math_timeout_s=10))
    verdict = judge(tier, f"{answer}+0x", reference)
    assert verdict.components["correct"] == float(equal), verdict.feedback


def test_decimals_and_expressions_still_go_to_math_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    from tiers.text.mathpool import pool_for as real

    def spy(*args: Any) -> Any:
        pool = real(*args)

        class Spy:
            def compare(self, answer: str, references: list[str], timeout_s: float) -> Any:
                asked.append(answer)
                return pool.compare(answer, references, timeout_s)

        return Spy()

    monkeypatch.setattr(answer_module, "pool_for", spy)
    tier = AnswerTier(AnswerSettings(math_timeout_s=10))
    assert judge(tier, "0.75", "\\frac{3}{4}").components["correct"] == 1.0
    assert judge(tier, "1\\frac{1}{2}", "\\frac{3}{2}").components["correct"] == 1.0
    assert judge(tier, "\\frac{1}{0}", "1").components["correct"] == 0.0
    assert asked == ["0.75", "1\\frac{1}{2}", "\\frac{1}{0}"]
