"""The answer tier's equivalence corpus: every extractor and every comparison mode, written by
the team. Each case is (text, reference answer, policy config, expected `correct`)."""

from __future__ import annotations

from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.text.answer import AnswerTier
from tiers.text.settings import AnswerSettings

TIER = AnswerTier(AnswerSettings(math_timeout_s=10))


def judge(text: str, reference: Any, **config: Any) -> Verdict:
    ref = reference if isinstance(reference, dict) else {"answer": reference}
    item = Candidate(kind="text", payload={"text": text}, reference=ref)
    (verdict,) = TIER.verify_batch([item], config)
    return verdict


MATRIX = "\\begin{{pmatrix}}1 & 2\\\\3 & {}\\end{{pmatrix}}"
MATH = [
    ("\\frac{1}{2}", "0.5", True),
    ("1/2", "\\dfrac{1}{2}", True),
    ("2\\sqrt{3}", "\\sqrt{12}", True),
    ("50\\%", "\\frac{1}{2}", True),  # a percentage is its fraction
    ("x^2+2x+1", "(x+1)^2", True),
    ("\\pi/2", "\\frac{\\pi}{2}", True),
    ("[1, 3)", "[1,3)", True),
    ("[1, 3]", "[1,3)", False),
    ("\\{1,2,3\\}", "\\{3,2,1\\}", True),  # sets: order does not matter
    ("(1, 2)", "(1,2)", True),
    ("(2, 1)", "(1,2)", False),  # tuples: it does
    (
        "\\begin{pmatrix}1 & 2\\\\3 & 4\\end{pmatrix}",
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
        True,
    ),
    (
        "\\begin{pmatrix}1 & 2\\\\3 & 5\\end{pmatrix}",
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
        False,
    ),
    ("x = 5", "5", True),  # an assignment's value
    ("5", "x=5", True),
    ("x^2 - 1 = 0", "x^2 = 1", True),  # equivalent equations
    ("10 \\text{ cm}", "10", True),  # units around the number
    ("\\$18", "18", True),
    ("1,000", "1000", True),  # thousands separators
    ("1.5e3", "1500", True),  # scientific notation, not 1.5 x e x 3
    ("0.333", "1/3", False),  # rounded too early
    ("0.3333333", "1/3", True),  # within 1e-6
    ("-2", "2", False),
    ("2^{10}", "1024", True),
    ("a+b", "b+a", True),
    ("\\sin^2 x + \\cos^2 x", "1", True),
    ("12", "12.0", True),
    ("\\infty", "\\infty", True),
    ("\uff13", "3", True),  # a full-width 3 is the digit 3 (NFKC)
    ("1000001", "1000000", False),
    ("1,000,000", "10^6", True),
]


@pytest.mark.parametrize(("answer", "reference", "correct"), MATH)
def test_math_mode(answer: str, reference: str, correct: bool) -> None:
    verdict = judge(f"We get \\boxed{{{answer}}}.", reference)
    assert verdict.components["correct"] == float(correct), verdict.feedback
    assert verdict.status is (VerdictStatus.passed if correct else VerdictStatus.failed)
    assert verdict.score == float(correct)


NUMERIC = [
    ("#### 1,234", "1234", True),
    ("#### $18.00", "18", True),
    ("#### 18 dollars", "18", True),
    ("#### 1.5 \\times 10^{3}", "1500", True),
    ("#### 1.5e-3", "0.0015", True),
    ("#### 3/4", "0.75", True),
    ("#### \\frac{3}{4}", "0.75", True),
    ("#### 1000001", "1000000", False),  # off by one is wrong however large the number
    ("#### 0.30000000000000004", "0.3", True),  # float noise is within 1e-9
    ("#### 17", "18", False),
]


@pytest.mark.parametrize(("text", "reference", "correct"), NUMERIC)
def test_numeric_mode(text: str, reference: str, correct: bool) -> None:
    verdict = judge(text, reference, mode="numeric", extract=["gsm8k"])
    assert verdict.components["correct"] == float(correct), verdict.feedback


def test_numeric_tolerances_come_from_the_config() -> None:
    assert judge("#### 3.14", "3.14159", mode="numeric").components["correct"] == 0.0
    loose = judge("#### 3.14", "3.14159", mode="numeric", rel_tol=1e-3)
    assert loose.components["correct"] == 1.0
    assert judge("#### 0.001", "0", mode="numeric", abs_tol=0.01).components["correct"] == 1.0


def test_numeric_answer_with_two_numbers_is_not_a_number() -> None:
    verdict = judge("#### 12 or 13", "12", mode="numeric")
    assert verdict.reason == "not_a_number"
    assert verdict.components == verdict.components | {"extracted": 1.0, "parsed": 0.0}


CHOICES = {"answer": "B", "choices": ["3 apples", "12 apples", "15 apples", "none", "all"]}
CHOICE = [
    ("The answer is B.", True),
    ("The answer is (B)", True),
    ("The answer is b", True),
    ("\\boxed{\\text{(B)}}", True),
    ("<answer>B) 12 apples</answer>", True),
    ("<answer>12 apples</answer>", True),  # the option's text
    ("The answer is Option B.", True),
    ("The answer is (C).", False),
    ("<answer>B) 15 apples</answer>", False),  # letter and text disagree: inconsistent
]


@pytest.mark.parametrize(("text", "correct"), CHOICE)
def test_choice_mode(text: str, correct: bool) -> None:
    verdict = judge(text, CHOICES, mode="choice", extract=["boxed", "answer_tag", "answer_is"])
    assert verdict.components["correct"] == float(correct), verdict.feedback


def test_choice_reference_given_as_the_options_text() -> None:
    reference = {"answer": "12 apples", "choices": CHOICES["choices"]}
    assert judge("The answer is B", reference, mode="choice").components["correct"] == 1.0


STRINGS = [
    ("exact", "Paris", "Paris", True),
    ("exact", "paris", "Paris", False),
    ("normalized", "the  Paris!", "paris", True),  # SQuAD: articles, punctuation, case, spaces
    ("normalized", "An apple", "apple", True),
    ("normalized", "Paris, France", "Paris", False),  # no substring credit
]


@pytest.mark.parametrize(("mode", "answer", "reference", "correct"), STRINGS)
def test_string_modes(mode: str, answer: str, reference: str, correct: bool) -> None:
    verdict = judge(f"<answer>{answer}</answer>", reference, mode=mode)
    assert verdict.components["correct"] == float(correct), verdict.feedback


COLLECTIONS = [
    ("set", "3, 1, 2", [1, 2, 3], True),
    ("set", "\\{2, 1\\}", "1, 2", True),
    ("set", "1, 2", [1, 2, 3], False),
    ("set", "red; Blue and green", ["green", "red", "blue"], True),
    ("list", "1, 2, 3", [1, 2, 3], True),
    ("list", "3, 2, 1", [1, 2, 3], False),
    ("list", "[1.0, 2, 3]", "1, 2, 3", True),  # elements compare as numbers
]


@pytest.mark.parametrize(("mode", "answer", "reference", "correct"), COLLECTIONS)
def test_set_and_list_modes(mode: str, answer: str, reference: Any, correct: bool) -> None:
    verdict = judge(f"\\boxed{{{answer}}}", reference, mode=mode)
    assert verdict.components["correct"] == float(correct), verdict.feedback


def test_any_of_several_references_counts() -> None:
    reference = {"answer": "Eiffel Tower", "answers": ["Tour Eiffel", "La tour Eiffel"]}
    verdict = judge("<answer>la Tour Eiffel</answer>", reference, mode="normalized")
    assert verdict.components["correct"] == 1.0
    assert verdict.components["reference_index"] == 2.0
    assert judge("\\boxed{2}", ["-2", "2"]).components["correct"] == 1.0


EXTRACTION = [
    ({"extract": ["boxed"]}, "so \\fbox{42} it is", "42"),
    ({"extract": ["boxed"]}, "\\boxed 42", "42"),
    ({"extract": ["boxed"]}, "\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{1}{\\sqrt{2}}"),
    ({"extract": ["gsm8k"]}, "3 + 4 = 7\n#### 7", "7"),
    ({"extract": ["answer_is"]}, "Thus the final answer is: $42$. I hope it is correct.", "42"),
    ({"extract": ["answer_tag"]}, "<answer> 42 </answer>", "42"),
    ({"extract": ["answer_tag"], "answer_tag": "final"}, "<final>42</final>", "42"),
    ({"extract": ["last_number"]}, "3 apples and 42 pears", "42"),
    (
        {"extract": ["json_field"], "json_field": "result.value"},
        'x {"result": {"value": 42}}',
        "42",
    ),
    ({"extract": ["regex"], "regex": r"ANSWER=(\d+)"}, "ANSWER=41 ... ANSWER=42", "42"),
    ({"extract": ["regex"], "regex": r"A(?P<answer>\d+)Z"}, "A42Z", "42"),
    ({"extract": ["whole"]}, "  42.  ", "42"),
    ({"extract": ["answer_tag", "boxed"]}, "\\boxed{41} <answer>42</answer>", "42"),  # order
    ({"extract": ["boxed", "answer_tag"]}, "\\boxed{42} <answer>41</answer>", "42"),
]


@pytest.mark.parametrize(("config", "text", "expected"), EXTRACTION)
def test_extractors(config: dict[str, Any], text: str, expected: str) -> None:
    verdict = judge(text, expected, mode="exact", **config)
    assert verdict.components["correct"] == 1.0, verdict.feedback


def test_feedback_names_the_answer_the_place_and_the_outcome() -> None:
    right = judge("... \\boxed{3/4}", "0.75")
    assert right.feedback == "extracted 3/4 from \\boxed{}, reference 0.75: equal (math)"
    wrong = judge("... \\boxed{3/5}", "0.75")
    assert wrong.feedback.startswith("extracted 3/5 from \\boxed{}")
    assert wrong.feedback.endswith("reference 0.75: not equal (math)")
    assert wrong.reason == "wrong_answer"


def test_nothing_extracted_is_a_scored_failure_that_says_so() -> None:
    verdict = judge("I do not know.", "4")
    assert verdict.status is VerdictStatus.failed
    assert verdict.score == 0.0
    assert verdict.reason == "no_answer"
    assert verdict.feedback == (
        "no final answer found outside <think> blocks: looked for \\boxed{}, <answer>, "
        "'#### N', 'the answer is ...'"
    )
    # No `correct`: a policy may hand the item to people and take their judgement instead.
    assert verdict.components == {"extracted": 0.0, "parsed": 0.0}


def test_an_item_without_reference_is_an_error_not_a_zero() -> None:
    verdict = judge("\\boxed{4}", {})
    assert verdict.status is VerdictStatus.error
    assert verdict.reason == "no_reference"


def test_config_mistakes_are_refused_with_the_field() -> None:
    with pytest.raises(ValueError, match="extractor `regex` needs `regex`"):
        TIER.validate_config({"extract": ["regex"]})
    with pytest.raises(ValueError, match="not a valid regular expression"):
        TIER.validate_config({"extract": ["regex"], "regex": "("})
    with pytest.raises(ValueError, match="mode"):
        TIER.validate_config({"mode": "fuzzy"})
