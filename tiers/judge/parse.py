"""Reading what a judge model answered: tolerant of what real models emit.

In order: the whole text as JSON; a JSON object anywhere in it (inside code fences or prose;
the last object that has the key wins, since models often restate an example first); then
`score: 7` / `label: correct` written out; for labels, a reply that is just one label. A score
outside the rubric's range, or a label not in it, is not a reading.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from tiers.judge.schemas import Rubric

_DECODER = json.JSONDecoder()
_NUMBER = r"[-+]?\d+(?:\.\d+)?"


@dataclass(frozen=True)
class Reading:
    """What the judge said: a raw score or a label, and its confidence if it gave one."""

    score: float | None = None
    label: str | None = None
    confidence: float | None = None
    how: str = "json"


class Unparseable(ValueError):
    """The judge's reply holds no reading of the rubric's kind; the message says why."""


def _objects(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        start = text.find("{", end)
    return found


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and re.fullmatch(rf"\s*{_NUMBER}\s*(?:/\s*\d+)?\s*", value):
        number = float(re.match(rf"\s*({_NUMBER})", value).group(1))  # type: ignore[union-attr]
    else:
        return None
    return number if math.isfinite(number) else None


def _confidence(obj: dict[str, Any]) -> float | None:
    value = _number(obj.get("confidence"))
    if value is None:
        return None
    if value > 1 and value <= 100:  # a percentage
        value /= 100
    return value if 0 <= value <= 1 else None


def _show(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_reply(text: str, rubric: Rubric) -> Reading:
    """The judge's reading of one item under `rubric`; Unparseable says what was missing."""
    key = "label" if rubric.labels is not None else "score"
    candidates = [o for o in _objects(text) if key in o]
    for obj in reversed(candidates):
        reading = _check(obj.get(key), rubric, _confidence(obj), "json")
        if reading is not None:
            return reading
    if rubric.labels is not None:
        labels = rubric.labels.values
        match = re.findall(r"label\W{0,3}\s*[:=]\s*[\"']?([\w-]+)", text, re.IGNORECASE)
        for value in reversed(match):
            if value in labels:
                return Reading(label=value, how="text")
        bare = text.strip().strip("\"'`.").strip()
        if bare in labels:
            return Reading(label=bare, how="bare")
    else:
        pattern = rf"(?:score|rating|grade)\W{{0,3}}\s*(?:[:=]|is)\s*({_NUMBER})"
        for value in reversed(re.findall(pattern, text, re.IGNORECASE)):
            reading = _check(value, rubric, None, "text")
            if reading is not None:
                return reading
    if candidates:
        raise Unparseable(
            f"the judge's {key} {_show(json.dumps(candidates[-1].get(key)), 40)} is not in the "
            f"rubric ({_expected(rubric)}); reply: {_show(text)!r}"
        )
    raise Unparseable(f"no {key} ({_expected(rubric)}) in the judge's reply: {_show(text)!r}")


def _expected(rubric: Rubric) -> str:
    if rubric.labels is not None:
        return "one of " + ", ".join(rubric.labels.values)
    assert rubric.scale is not None
    return f"a number from {rubric.scale.min:g} to {rubric.scale.max:g}"


def _check(value: Any, rubric: Rubric, confidence: float | None, how: str) -> Reading | None:
    if rubric.labels is not None:
        if isinstance(value, str) and value.strip() in rubric.labels.values:
            return Reading(label=value.strip(), confidence=confidence, how=how)
        return None
    assert rubric.scale is not None
    number = _number(value)
    if number is None or not rubric.scale.min <= number <= rubric.scale.max:
        return None
    return Reading(score=number, confidence=confidence, how=how)
