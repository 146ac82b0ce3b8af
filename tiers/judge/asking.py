"""Asking a judge one question: the request, its samples, and one reading from their replies.

Shared by the judge tiers. `ask` sends the rendered messages (k times when the step asks for
samples), reads each reply under the rubric (parse.py), takes the logprob score where the step
asks for it and the endpoint gives it (logprobs.py), and aggregates the samples (mean or
majority) into a score in [0, 1], whether it passes, an uncertainty, and components.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tiers.judge.client import Completion, EndpointCaller, EndpointError
from tiers.judge.logprobs import NoLogprobScore, score_from_logprobs
from tiers.judge.parse import Reading, Unparseable, parse_reply
from tiers.judge.schemas import Asking, Rubric


@dataclass
class Answer:
    """One question's answer: score in [0, 1] and the rest, or why there is none."""

    components: dict[str, float]
    notes: list[str] = field(default_factory=list)
    score: float | None = None
    passed: bool = False
    uncertainty: float | None = None
    unparseable: str | None = None  # why no sample could be read
    #: The models that answered (the response's `model`; one unless the server changed).
    models: list[str] = field(default_factory=list)


def request_body(
    caller: EndpointCaller, cfg: Asking, rubric: Rubric, messages: list[dict[str, str]]
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": caller.endpoint.model, "messages": messages, **cfg.sampling()}
    if cfg.structured == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": rubric.response_schema(), "strict": True},
        }
    elif cfg.structured == "json_object":
        body["response_format"] = {"type": "json_object"}
    return body


def usage(caller: EndpointCaller, completions: list[Completion]) -> dict[str, float]:
    """Tokens, attempts and (where the endpoint has a price) cost units of some calls."""
    prompt = sum(c.prompt_tokens for c in completions)
    completion = sum(c.completion_tokens for c in completions)
    out = {
        "prompt_tokens": float(prompt),
        "completion_tokens": float(completion),
        "attempts": float(max((c.attempts for c in completions), default=0)),
    }
    prices = caller.endpoint
    if prices.price_per_1k_prompt or prices.price_per_1k_completion:
        out["cost_units"] = (
            prompt * prices.price_per_1k_prompt + completion * prices.price_per_1k_completion
        ) / 1000
    return out


async def ask(
    caller: EndpointCaller, cfg: Asking, rubric: Rubric, messages: list[dict[str, str]]
) -> Answer:
    """The judge's answer to one question; EndpointError when no sample got an answer."""
    body = request_body(caller, cfg, rubric, messages)
    bodies = [body]
    if cfg.samples > 1:
        bodies = [
            body if cfg.seed is None else {**body, "seed": cfg.seed + i} for i in range(cfg.samples)
        ]
    results = await asyncio.gather(*(caller.complete(b) for b in bodies), return_exceptions=True)
    completions = [r for r in results if isinstance(r, Completion)]
    failures = [r for r in results if isinstance(r, BaseException)]
    if not completions:
        first = failures[0]
        raise (
            first
            if isinstance(first, EndpointError)
            else EndpointError("internal_error", str(first))
        )
    answer = Answer(
        components=usage(caller, completions),
        models=list(dict.fromkeys(c.model for c in completions)),
    )
    if failures:
        answer.notes.append(f"{len(failures)} of {cfg.samples} samples got no answer")
    readings: list[tuple[Reading, Completion]] = []
    problems: list[str] = []
    for completion in completions:
        try:
            readings.append((parse_reply(completion.text, rubric), completion))
        except Unparseable as exc:
            problems.append(str(exc))
    if not readings:
        answer.unparseable = problems[0]
        return answer
    if problems:
        answer.notes.append(f"{len(problems)} of {len(completions)} replies unreadable")
    _aggregate(answer, cfg, rubric, readings)
    return answer


def _aggregate(
    answer: Answer, cfg: Asking, rubric: Rubric, readings: list[tuple[Reading, Completion]]
) -> None:
    scores = [rubric.normalised(r) for r, _ in readings]
    passes = [rubric.passes(r) for r, _ in readings]
    lp_uncertainty: float | None = None
    if cfg.logprobs:
        found, why = [], ""
        for index, (_reading, completion) in enumerate(readings):
            try:
                lp = score_from_logprobs(completion.text, completion.logprobs, rubric)
            except NoLogprobScore as exc:
                why = str(exc)
                continue
            found.append(lp)
            scores[index], passes[index] = lp.score, lp.p_pass >= 0.5
        if found and len(found) == len(readings):
            lp_uncertainty = statistics.fmean(lp.uncertainty for lp in found)
            answer.components["logprob_score"] = 1.0
            answer.components["p_pass"] = statistics.fmean(lp.p_pass for lp in found)
            answer.notes.append("score from logprobs")
        else:
            answer.components["logprob_score"] = 0.0
            answer.notes.append(f"score from the reply, not logprobs: {why}")
    if cfg.aggregate == "majority" and len(readings) > 1:
        # The most common value (label, or raw score); ties go to the lower-scoring one.
        keys = [r.label if r.label is not None else r.score for r, _ in readings]
        counts = Counter(keys)
        best = max(counts.values())
        chosen = min((i for i, k in enumerate(keys) if counts[k] == best), key=lambda i: scores[i])
        score, passed = scores[chosen], passes[chosen]
        reading = readings[chosen][0]
    else:
        score = statistics.fmean(scores)
        share = sum(passes) / len(passes)
        passed = share > 0.5 if len(passes) > 1 else passes[0]
        reading = readings[0][0]
    answer.score, answer.passed = score, passed
    agreement = sum(p == passed for p in passes) / len(passes)
    if len(readings) > 1:
        answer.components["samples"] = float(len(readings))
        answer.components["agreement"] = agreement
        answer.components["score_spread"] = statistics.pstdev(scores)
        answer.notes.append(
            f"{len(readings)} samples, mean score {statistics.fmean(scores):.3f}, "
            f"{agreement:.0%} agree on {'pass' if passed else 'fail'}"
        )
    # One reading stands for the answer: the only sample, or the majority's.
    if len(readings) == 1 or cfg.aggregate == "majority":
        if reading.label is not None and rubric.labels is not None:
            answer.components["label_index"] = float(rubric.labels.values.index(reading.label))
            said = f"label {reading.label}"
        else:
            assert reading.score is not None
            assert rubric.scale is not None
            answer.components["raw_score"] = reading.score
            said = f"score {reading.score:g} of {rubric.scale.min:g}..{rubric.scale.max:g}"
        if reading.how != "json":
            said += f" (read from {reading.how})"
        answer.notes.insert(0, said)
    answer.components["passed"] = 1.0 if passed else 0.0
    confidences = [r.confidence for r, _ in readings if r.confidence is not None]
    if confidences:
        answer.components["confidence"] = statistics.fmean(confidences)
    if lp_uncertainty is not None:
        answer.uncertainty = lp_uncertainty
    elif len(readings) > 1:
        answer.uncertainty = 1.0 - agreement
    elif confidences:
        answer.uncertainty = 1.0 - confidences[0]  # the judge's own word: not calibrated
