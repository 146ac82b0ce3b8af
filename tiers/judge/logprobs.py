"""Scores from token log-probabilities, where the endpoint returns them.

At the token where the reply's label (or one-digit score) begins, the server's top
alternatives give a distribution over the rubric's labels: a label's probability is the sum of
the probabilities of the alternatives that begin it (and begin no other label). The score is
the probability-weighted score of the labels, so a plain pass/fail rubric scores the probability
of passing: calibrated as far as the model is, and an uncertainty for free. Anything that does
not fit (no logprobs, the value's token not found, two labels sharing the first token, a
scale with numbers of more than one digit, too little of the probability on the rubric's
values) is a reason to fall back to the reply's own reading; the reason is said.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tiers.judge.schemas import Rubric

#: Less than this share of the alternatives' probability on the rubric's values: no reading.
MIN_MASS = 0.5


@dataclass(frozen=True)
class LogprobScore:
    """A score from the distribution over the rubric's values at the reply's label."""

    score: float
    p_pass: float
    mass: float

    @property
    def uncertainty(self) -> float:
        """0 when the model is sure of pass or fail, 1 at a coin flip."""
        return 1.0 - abs(2.0 * self.p_pass - 1.0)


class NoLogprobScore(ValueError):
    """Why the reply's logprobs gave no score (the verdict says it, and uses the reply)."""


def _values(rubric: Rubric) -> dict[str, tuple[float, bool]]:
    """Each value the judge may write -> (its score in [0, 1], whether it passes)."""
    if rubric.labels is not None:
        labels = rubric.labels
        return {v: (labels.score_of(v), v in labels.passing) for v in labels.values}
    scale = rubric.scale
    assert scale is not None
    low, high = math.ceil(scale.min), math.floor(scale.max)
    if scale.min < 0 or scale.max > 9 or low > high:
        raise NoLogprobScore(
            f"the scale {scale.min:g}..{scale.max:g} has values that are not one digit"
        )
    span = scale.max - scale.min
    return {str(v): ((v - scale.min) / span, v >= scale.threshold) for v in range(low, high + 1)}


def _value_start(text: str, rubric: Rubric) -> int:
    key = "label" if rubric.labels is not None else "score"
    found = list(re.finditer(rf'"{key}"\s*:\s*"?', text))
    if not found:
        raise NoLogprobScore(f"no JSON {key} in the reply to find its token")
    return found[-1].end()


def score_from_logprobs(
    text: str, content: list[dict[str, Any]] | None, rubric: Rubric
) -> LogprobScore:
    """The logprob-weighted score of the reply's label; NoLogprobScore says why not."""
    if not content:
        raise NoLogprobScore("the endpoint sent no logprobs")
    values = _values(rubric)
    start = _value_start(text, rubric)
    offset = 0
    for token in content:
        piece = str(token.get("token", ""))
        if offset <= start < offset + len(piece):
            return _at(piece, start - offset, token, values)
        offset += len(piece)
    raise NoLogprobScore("the logprobs' tokens do not spell the reply")


def _at(
    piece: str, cut: int, token: dict[str, Any], values: dict[str, tuple[float, bool]]
) -> LogprobScore:
    prefix = piece[:cut]  # e.g. '"' when the quote and the label's start are one token
    alternatives = token.get("top_logprobs") or [{"token": piece, "logprob": token.get("logprob")}]
    mass: dict[str, float] = {}
    for alt in alternatives:
        name, logprob = str(alt.get("token", "")), alt.get("logprob")
        if not isinstance(logprob, int | float) or not name.startswith(prefix):
            continue
        rest = name[len(prefix) :].strip()
        if not rest:
            continue
        begun = [v for v in values if v.startswith(rest)]
        if len(begun) > 1:
            raise NoLogprobScore(
                f"the token {rest!r} begins several values ({', '.join(begun)}): their "
                "probabilities cannot be told apart"
            )
        if begun:
            mass[begun[0]] = mass.get(begun[0], 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total < MIN_MASS:
        raise NoLogprobScore(
            f"only {total:.2f} of the probability at the label's token is on the rubric's values"
        )
    score = sum(p * values[v][0] for v, p in mass.items()) / total
    p_pass = sum(p for v, p in mass.items() if values[v][1]) / total
    return LogprobScore(score=score, p_pass=p_pass, mass=total)
