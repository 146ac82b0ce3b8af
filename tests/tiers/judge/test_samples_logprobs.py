"""k judge samples aggregated by the policy (mean, majority) with their agreement, and scores
from logprobs where the endpoint sends them (the fallback said where it does not), against the
FAULT-INJECTION STUB (judge_stub.py) as a real HTTP server."""

from __future__ import annotations

import math
from typing import Any

import pytest
from judge_stub import JudgeStub
from judge_support import make_tier

from tiers.base import Candidate, VerdictStatus

SCALE = {"criteria": "Is it right?", "scale": {"min": 0, "max": 10}}
LABELS = {
    "criteria": "Is it right?",
    "labels": {"values": ["correct", "incorrect"], "passing": ["correct"]},
}
ITEM = [Candidate(kind="text", payload={"text": "Paris"})]


def _score(n: float) -> dict[str, str]:
    return {"content": f'{{"score": {n}, "confidence": 0.9, "reasoning": "r"}}'}


def _label(name: str) -> dict[str, str]:
    return {"content": f'{{"label": "{name}", "confidence": 0.9, "reasoning": "r"}}'}


def test_k_samples_are_averaged_with_their_agreement(stub: JudgeStub) -> None:
    stub.plan(_score(8), _score(6), _score(2))
    config = {"endpoint": "local", "rubric": SCALE, "samples": 3, "temperature": 0.7, "seed": 5}
    (verdict,) = make_tier(stub.url, max_in_flight=1).verify_batch(ITEM, config)
    assert verdict.score == pytest.approx((0.8 + 0.6 + 0.2) / 3)
    assert verdict.status == VerdictStatus.passed  # two of three samples pass (5 or more)
    c = verdict.components
    assert c["samples"] == 3.0
    assert c["agreement"] == pytest.approx(2 / 3)
    assert verdict.uncertainty == pytest.approx(1 / 3)  # disagreement, not the judge's word
    assert c["prompt_tokens"] == 3 * 120.0
    assert "3 samples, mean score 0.533, 67% agree on pass" in verdict.feedback
    seeds = sorted(r["seed"] for r in stub.state.requests)
    assert seeds == [5, 6, 7]  # each sample its own seed


def test_majority_takes_the_most_common_label_and_ties_go_low(stub: JudgeStub) -> None:
    config = {"endpoint": "local", "rubric": LABELS, "samples": 3, "temperature": 1.0,
              "aggregate": "majority"}  # fmt: skip
    stub.plan(_label("correct"), _label("incorrect"), _label("correct"))
    (verdict,) = make_tier(stub.url, max_in_flight=1).verify_batch(ITEM, config)
    assert (verdict.status, verdict.score) == (VerdictStatus.passed, 1.0)
    assert verdict.components["agreement"] == pytest.approx(2 / 3)
    assert verdict.feedback.startswith("judge: label correct")
    stub.plan(_label("correct"), _label("incorrect"))
    (tie,) = make_tier(stub.url, max_in_flight=1).verify_batch(ITEM, {**config, "samples": 2})
    assert (tie.status, tie.score) == (VerdictStatus.failed, 0.0)


def test_samples_that_cannot_be_read_are_left_out_and_counted(stub: JudgeStub) -> None:
    stub.plan(_score(9), {"content": "no idea"}, _score(7))
    config = {"endpoint": "local", "rubric": SCALE, "samples": 3, "temperature": 0.5}
    (verdict,) = make_tier(stub.url, max_in_flight=1).verify_batch(ITEM, config)
    assert verdict.score == pytest.approx(0.8)
    assert verdict.components["samples"] == 2.0
    assert "1 of 3 replies unreadable" in verdict.feedback


def test_samples_at_temperature_zero_are_refused_at_the_field(stub: JudgeStub) -> None:
    with pytest.raises(ValueError, match="samples: more than 1 sample at temperature 0"):
        make_tier(stub.url).validate_config({"endpoint": "local", "rubric": SCALE, "samples": 4})


def _tokens(*pieces: tuple[str, dict[str, float] | None]) -> list[dict[str, Any]]:
    out = []
    for text, alternatives in pieces:
        top = [{"token": t, "logprob": math.log(p)} for t, p in (alternatives or {text: 1}).items()]
        out.append({"token": text, "logprob": top[0]["logprob"], "top_logprobs": top})
    return out


REPLY = '{"label": "correct", "confidence": 0.9}'
LOGPROBS = _tokens(
    ('{"', None), ("label", None), ('":', None), (' "', None),
    ("correct", {"correct": 0.7, "incorrect": 0.2, "maybe": 0.1}),
    ('",', None), (' "confidence": 0.9}', None),
)  # fmt: skip


def test_a_label_judge_scores_the_probability_of_the_passing_label(stub: JudgeStub) -> None:
    stub.plan({"content": REPLY, "logprobs": LOGPROBS})
    config = {"endpoint": "local", "rubric": LABELS, "logprobs": True}
    (verdict,) = make_tier(stub.url).verify_batch(ITEM, config)
    # 0.7 on "correct", 0.2 on "incorrect" (0.1 on no label is left out): 0.7 / 0.9.
    assert verdict.score == pytest.approx(0.7 / 0.9)
    assert verdict.components["p_pass"] == pytest.approx(0.7 / 0.9)
    assert verdict.components["logprob_score"] == 1.0
    assert verdict.uncertainty == pytest.approx(1 - abs(2 * 0.7 / 0.9 - 1))
    assert "score from logprobs" in verdict.feedback
    (request,) = stub.state.requests
    assert (request["logprobs"], request["top_logprobs"]) == (True, 20)


def test_a_quote_and_the_label_in_one_token_are_read_too(stub: JudgeStub) -> None:
    logprobs = _tokens(
        ('{"label": ', None), ('"inc', {'"inc': 0.6, '"cor': 0.4}), ('orrect"}', None)
    )
    stub.plan({"content": '{"label": "incorrect"}', "logprobs": logprobs})
    config = {"endpoint": "local", "rubric": LABELS, "logprobs": True}
    (verdict,) = make_tier(stub.url).verify_batch(ITEM, config)
    assert verdict.score == pytest.approx(0.4)
    assert verdict.status == VerdictStatus.failed


def test_a_one_digit_scale_is_the_expected_score(stub: JudgeStub) -> None:
    logprobs = _tokens(('{"score": ', None), ("4", {"4": 0.5, "2": 0.25, "0": 0.25}), ("}", None))
    stub.plan({"content": '{"score": 4}', "logprobs": logprobs})
    rubric = {"criteria": "c", "scale": {"min": 0, "max": 4}}
    config = {"endpoint": "local", "rubric": rubric, "logprobs": True}
    (verdict,) = make_tier(stub.url).verify_batch(ITEM, config)
    assert verdict.score == pytest.approx(0.5 * 1.0 + 0.25 * 0.5)
    assert verdict.components["p_pass"] == pytest.approx(0.75)  # 4 and 2 pass (the middle)


@pytest.mark.parametrize(
    ("answer", "rubric", "why"),
    [
        ({"content": REPLY}, LABELS, "the endpoint sent no logprobs"),
        (
            {"content": '{"label": "correct"}', "logprobs": _tokens(
                ('{"label": "', None), ("c", {"c": 0.9, "i": 0.1}), ('orrect"}', None))},
            {"criteria": "c", "labels": {"values": ["correct", "close", "incorrect"],
                                         "passing": ["correct"]}},
            "the token 'c' begins several values (correct, close)",
        ),
        (
            {"content": '{"score": 7}', "logprobs": _tokens(('{"score": 7}', None))},
            SCALE,
            "the scale 0..10 has values that are not one digit",
        ),
        (
            {"content": REPLY, "logprobs": _tokens(
                ('{"label": "', None), ("correct", {"correct": 0.3, "yes": 0.7}),
                ('", "confidence": 0.9}', None))},
            LABELS,
            "only 0.30 of the probability",
        ),
    ],
)  # fmt: skip
def test_without_usable_logprobs_the_reply_scores_and_the_verdict_says_why(
    stub: JudgeStub, answer: dict[str, Any], rubric: dict[str, Any], why: str
) -> None:
    stub.plan(answer)
    config = {"endpoint": "local", "rubric": rubric, "logprobs": True}
    (verdict,) = make_tier(stub.url).verify_batch(ITEM, config)
    assert verdict.status == VerdictStatus.passed
    assert verdict.score == 1.0 or rubric is SCALE
    assert verdict.components["logprob_score"] == 0.0
    assert f"score from the reply, not logprobs: {why}" in verdict.feedback
