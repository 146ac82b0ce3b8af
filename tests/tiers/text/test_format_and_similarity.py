"""The format tier's components (R1 shape, DAPO length, repetition) and the similarity tier's
OpenAI grader parity (string_check, text_similarity), with the `text` extra installed and not."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.text.format import FormatTier, dapo_length_penalty
from tiers.text.similarity import SimilarityTier

R1 = "<think>3 + 4 = 7</think>\n<answer>7</answer>"


def fmt(text: str, **config: Any) -> Verdict:
    item = Candidate(kind="text", payload={"text": text})
    (verdict,) = FormatTier().verify_batch([item], config)
    return verdict


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (R1, True),
        ("  <think>a</think><answer>7</answer>  ", True),
        ("<answer>7</answer>", False),  # no thinking
        ("<answer>7</answer><think>a</think>", False),  # thinking after the answer
        ("<think>a</think><answer>7</answer> and more", False),  # text after the answer
        ("<think>a</think><answer>7</answer><answer>8</answer>", False),  # two answers
        ("<think>a<think>b</think></think><answer>7</answer>", False),
        ("<think>a</think><answer>7", False),  # unclosed
    ],
)
def test_r1_shape(text: str, ok: bool) -> None:
    verdict = fmt(text, checks=["shape"])
    assert verdict.components["shape"] == float(ok), verdict.feedback
    assert verdict.status is (VerdictStatus.passed if ok else VerdictStatus.failed)


def test_shape_tags_and_thinking_are_configurable() -> None:
    text = "<reasoning>a</reasoning><final>7</final>"
    assert fmt(text, checks=["shape"], think_tag="reasoning", answer_tag="final").score == 1.0
    assert fmt("work <answer>7</answer>", checks=["shape"], require_think=False).score == 1.0
    verdict = fmt("<answer>7</answer> PS", checks=["shape"], require_think=False)
    assert verdict.feedback == "shape: nothing may follow </answer>"


def test_dapo_soft_overlong_penalty() -> None:
    # L_max 100, L_cache 20: free up to 80, then linear to -1 at 100, -1 beyond.
    assert [dapo_length_penalty(n, 100, 20) for n in (80, 90, 100, 101)] == [0.0, -0.5, -1.0, -1.0]
    text = " ".join(["word"] * 90)
    verdict = fmt(text, checks=["length"], max_length=100, overlong_buffer=20)
    assert verdict.components == verdict.components | {"length": 0.5, "length_penalty": -0.5}
    assert verdict.score == 0.5
    assert "90 words" in verdict.feedback
    chars = fmt("x" * 90, checks=["length"], unit="chars", max_length=100, overlong_buffer=20)
    assert chars.components["length_units"] == 90.0
    assert fmt(text, checks=["length"], max_length=200, overlong_buffer=20).score == 1.0


def test_repetition_of_ngrams() -> None:
    fresh = fmt("one two three four five six seven eight", checks=["repetition"])
    assert fresh.components == {"repeated_fraction": 0.0, "repetition": 1.0}
    looping = fmt("I am stuck. " * 50, checks=["repetition"])
    assert looping.components["repeated_fraction"] > 0.9
    assert looping.components["repetition"] == 0.0
    assert looping.status is VerdictStatus.failed


def test_the_score_is_the_product_of_the_checks() -> None:
    verdict = fmt(R1 + " " + "pad " * 90, max_length=100, overlong_buffer=20)
    assert verdict.components["shape"] == 0.0  # text after the answer
    assert verdict.score == 0.0
    ok = fmt(R1)
    assert ok.score == 1.0
    assert ok.feedback == "format ok: shape, length, repetition"


def sim(text: str, reference: Any, **config: Any) -> Verdict:
    ref = {"answer": reference}
    item = Candidate(kind="text", payload={"text": text}, reference=ref)
    (verdict,) = SimilarityTier().verify_batch([item], config)
    return verdict


@pytest.mark.parametrize(
    ("operation", "text", "reference", "ok"),
    [
        ("eq", "Paris", "Paris", True),
        ("eq", "paris", "Paris", False),
        ("ne", "London", "Paris", True),
        ("ne", "Paris", "Paris", False),
        ("like", "The capital is Paris.", "Paris", True),
        ("like", "The capital is paris.", "Paris", False),
        ("ilike", "The capital is PARIS.", "paris", True),
        ("ilike", "The capital is Rome.", "paris", False),
    ],
)
def test_string_check_parity(operation: str, text: str, reference: str, ok: bool) -> None:
    verdict = sim(text, reference, operation=operation)
    assert verdict.score == float(ok)


def test_text_similarity_metrics() -> None:
    hyp, ref = "The cat sat on the mat", "the cat sat on a mat"
    scores = {m: sim(hyp, ref, metric=m).score for m in ("fuzzy_match", "bleu", "chrf", "rouge_l")}
    assert scores["rouge_l"] == pytest.approx(5 / 6)  # 5 of 6 unigrams in order, both ways
    assert all(0.3 < s < 1.0 for s in scores.values() if s is not None), scores
    assert sim(ref, ref, metric="bleu").score == pytest.approx(1.0)
    unrelated = sim("completely different words here", ref, metric="chrf", pass_threshold=0.5)
    assert unrelated.status is VerdictStatus.failed
    assert unrelated.reason == "below_threshold"
    best = sim(hyp, ["a dog ran", hyp], metric="bleu")
    assert best.components["reference_index"] == 1.0


def test_similarity_config_needs_exactly_one_grader() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        SimilarityTier().validate_config({})
    with pytest.raises(ValueError, match="exactly one of"):
        SimilarityTier().validate_config({"operation": "eq", "metric": "bleu"})


def test_without_the_text_extra_a_metric_is_refused_with_the_fix() -> None:
    # A fresh interpreter where the extra's packages cannot be imported: the service's own
    # modules still load, and a policy naming a metric is refused naming the extra.
    script = (
        "import sys\n"
        "for name in ('rapidfuzz', 'sacrebleu', 'rouge_score'): sys.modules[name] = None\n"
        "import verifier_service.app, tiers.registry\n"
        "tier = tiers.registry.get_tier('similarity')\n"
        "tier.validate_config({'operation': 'eq'})\n"
        "try:\n"
        "    tier.validate_config({'metric': 'fuzzy_match'})\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "the similarity metric 'fuzzy_match' needs rapidfuzz, from the `text` extra: "
        "pip install 'verifier-service[server,text]'"
    )
