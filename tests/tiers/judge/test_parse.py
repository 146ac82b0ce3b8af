"""Reading judge replies the way real models write them."""

from __future__ import annotations

import pytest

from tiers.judge.parse import Unparseable, parse_reply
from tiers.judge.schemas import Rubric

SCALE = Rubric(criteria="c", scale={"min": 1, "max": 10})
LABELS = Rubric(criteria="c", labels={"values": ["correct", "incorrect"], "passing": ["correct"]})


@pytest.mark.parametrize(
    ("reply", "score", "confidence"),
    [
        ('{"score": 7, "confidence": 0.8, "reasoning": "ok"}', 7.0, 0.8),
        ('```json\n{"score": 8.5, "confidence": 0.6}\n```', 8.5, 0.6),
        ('Sure! Here it is: {"score": "9", "reasoning": "good"} Hope it helps.', 9.0, None),
        ('Format: {"score": 1}. My grade: {"score": 4, "confidence": 70}', 4.0, 0.7),
        ("Reasoning: fine.\nScore: 6", 6.0, None),
        ("The rating is 3.", 3.0, None),
        ('{"score": "8/10"}', 8.0, None),
    ],
)
def test_scores_are_found_where_models_put_them(
    reply: str, score: float, confidence: float | None
) -> None:
    reading = parse_reply(reply, SCALE)
    assert (reading.score, reading.confidence) == (score, confidence)


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "correct", "confidence": 1}', "correct"),
        ("label: incorrect", "incorrect"),
        ("correct", "correct"),
        ('"incorrect".', "incorrect"),
    ],
)
def test_labels_are_found(reply: str, label: str) -> None:
    assert parse_reply(reply, LABELS).label == label


@pytest.mark.parametrize(
    ("reply", "rubric", "message"),
    [
        ("I think it is pretty good.", SCALE, "no score (a number from 1 to 10)"),
        ('{"score": 12}', SCALE, "the judge's score 12 is not in the rubric"),
        ('{"score": true}', SCALE, "is not in the rubric"),
        ('{"score": NaN}', SCALE, "score NaN is not in the rubric"),
        ('{"label": "maybe"}', LABELS, 'label "maybe" is not in the rubric'),
        ("", LABELS, "no label (one of correct, incorrect)"),
        ("Ġthe Ġthe ĠScore", SCALE, "no score"),
    ],
)
def test_what_cannot_be_read_says_why(reply: str, rubric: Rubric, message: str) -> None:
    with pytest.raises(Unparseable, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_reply(reply, rubric)
