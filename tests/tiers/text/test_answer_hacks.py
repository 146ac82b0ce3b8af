"""What a policy under RL finds to fool an answer checker, and the pathological answers that make
sympy run away: each is a scored failure with its reason, within its time bound."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.text.answer import AnswerTier
from tiers.text.settings import AnswerSettings

LIMIT_S = 2.0
TIER = AnswerTier(AnswerSettings(math_timeout_s=LIMIT_S))


def judge(text: str, reference: Any, **config: Any) -> Verdict:
    ref = reference if isinstance(reference, dict) else {"answer": reference}
    item = Candidate(kind="text", payload={"text": text}, reference=ref)
    (verdict,) = TIER.verify_batch([item], config)
    return verdict


@pytest.mark.parametrize(
    "text",
    [
        "The answer is A B C D.",
        "The answer is A, B, C, D or E.",
        "\\boxed{A, B}",
        "<answer>(B) or (C)</answer>",
    ],
)
def test_listing_several_options_picks_none(text: str) -> None:
    verdict = judge(text, "B", mode="choice", extract=["boxed", "answer_tag", "answer_is"])
    assert verdict.status is VerdictStatus.failed
    assert verdict.reason == "several_options"
    assert "could not be read as exactly one option" in verdict.feedback


def test_several_boxed_the_last_counts_by_default() -> None:
    text = "\\boxed{1} \\boxed{2} \\boxed{3} \\boxed{4}"
    assert judge(text, "4").components["correct"] == 1.0
    assert judge(text, "2").components["correct"] == 0.0  # a spray of guesses wins nothing


def test_several_different_boxed_rejected_when_the_policy_says_so() -> None:
    verdict = judge("\\boxed{1} or maybe \\boxed{2}", "2", several_boxed="reject")
    assert verdict.reason == "several_answers"
    assert "2 different \\boxed{}: 1, 2" in verdict.feedback
    # The same answer boxed twice is one answer.
    assert judge("\\boxed{2} so \\boxed{2}", "2", several_boxed="reject").score == 1.0


def test_a_weaker_extractor_does_not_rescue_a_refused_answer() -> None:
    text = "\\boxed{1} \\boxed{2}\nThe answer is 2."
    verdict = judge(text, "2", several_boxed="reject", extract=["boxed", "answer_is"])
    assert verdict.reason == "several_answers"


@pytest.mark.parametrize(
    "text",
    [
        "<think>It is \\boxed{42}</think> I cannot say.",
        "<think>It is \\boxed{42} and I never close the block",
        "It is \\boxed{42}, I think.</think> No idea.",  # the prompt opened the block
    ],
)
def test_an_answer_hidden_in_the_thinking_does_not_count(text: str) -> None:
    verdict = judge(text, "42")
    assert verdict.reason == "no_answer"
    assert verdict.score == 0.0


def test_the_reference_echoed_from_the_prompt_does_not_count() -> None:
    # The question offered 0.75 and 0.8; the answer picks 0.8 after quoting both.
    text = "Is it 0.75 or 0.8? Computing... so \\boxed{0.8}"
    assert judge(text, "0.75").components["correct"] == 0.0
    qa = "<answer>Paris or London</answer>"
    assert judge(qa, "Paris", mode="normalized").components["correct"] == 0.0


@pytest.mark.parametrize(
    ("digit", "mode"),
    [
        ("\u0663", "math"),  # ARABIC-INDIC DIGIT THREE
        ("\u0969", "math"),  # DEVANAGARI DIGIT THREE
        ("\u0663", "numeric"),
    ],
)
def test_other_scripts_digits_are_not_our_digits(digit: str, mode: str) -> None:
    verdict = judge(f"\\boxed{{{digit}}}", "3", mode=mode)
    assert verdict.reason == "foreign_digits"
    assert verdict.score == 0.0


@pytest.mark.parametrize("lookalike", ["\u0417", "l2", "O"])  # Cyrillic Ze, ell-two, letter O
def test_letters_that_look_like_digits_are_not_numbers(lookalike: str) -> None:
    reference = {"\u0417": "3", "l2": "12", "O": "0"}[lookalike]
    verdict = judge(f"#### {lookalike}", reference, mode="numeric")
    assert verdict.components["correct"] == 0.0


def test_absurdly_long_answers_fail_unread() -> None:
    started = time.monotonic()
    long_answer = judge("\\boxed{" + "1+" * 50_000 + "1}", "100001")
    assert long_answer.reason == "answer_too_long"
    huge_text = judge("x " * 200_000 + "\\boxed{4}", "4")
    assert huge_text.reason == "text_too_long"
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "10^{10^{10^{10}}}",
        "99999999!",
        "2^{2^{2^{2^{2^{2}}}}}",
        "(" * 200 + "1" + ")" * 200,  # deep nesting
    ],
)
def test_pathological_answers_are_bounded(answer: str) -> None:
    started = time.monotonic()
    verdict = judge(f"\\boxed{{{answer}}}", "7")
    took = time.monotonic() - started
    assert verdict.status is VerdictStatus.failed
    assert verdict.score == 0.0
    assert verdict.reason in {"math_timeout", "math_memory", "math_too_deep", "wrong_answer"}
    # the bound, plus the start of a fresh child when the last one was killed
    assert took < LIMIT_S + 5.0, (verdict.reason, took)


def test_a_runaway_in_the_batch_leaves_the_others_scored() -> None:
    items = [
        Candidate(kind="text", payload={"text": f"\\boxed{{{a}}}"}, reference={"answer": r})
        for a, r in [("\\frac{1}{2}", "0.5"), ("10^{10^{10^{10}}}", "1"), ("\\sqrt{4}", "2")]
    ]
    first, runaway, last = TIER.verify_batch(items, {})
    assert runaway.reason == "math_timeout"
    assert f"longer than {LIMIT_S:g} s" in runaway.feedback
    assert first.score == last.score == 1.0


def test_a_policy_may_lower_the_time_bound() -> None:
    started = time.monotonic()
    verdict = judge("\\boxed{99999999!}", "7", math_timeout_s=0.5)
    assert verdict.reason == "math_timeout"
    assert "longer than 0.5 s" in verdict.feedback
    assert time.monotonic() - started < 0.5 + 5.0
