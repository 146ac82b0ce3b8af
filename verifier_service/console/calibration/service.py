"""Calibration of audited gates: does the cheap tier below a gate rank and split items the way
the tier above it does?

A gate with ``audit_fraction`` f sends up every item whose audit draw (a deterministic uniform
number per item and step, `policies.gates.audit_draw`) is below f, whatever the gate says. Those
items are a uniform random sample of the items that reached the gate, and each has both
verdicts, so on them (and only on them: the gate's own picks are not a random sample) the two
tiers can be compared without bias:

- Spearman's rank correlation of the cheap value against the upper tier's score;
- a confusion matrix: the gate's decision on the item (recorded in the cost ledger: an item of
  the sample that the gate held climbed "as an audit") against the upper tier's score at the
  threshold: who was let through wrongly, who was held back wrongly;
- both again per stretch of time, so a drift shows.

A model judge (`judge.llm`, `judge.prm`, `judge.rank`) whose items then went to people
(`human`, a later step) is compared with people the same way, on each verdict's score (a
rubric's, a step's process score, a member's place in its group: all 0..1, as people's), per
judge (the tier, the step's endpoint, its model, the policy version that holds the templates;
the model is the one each verdict recorded, `judge_model` on its feedback's last line, else,
for verdicts stored before models were recorded, the model the endpoint is configured with
now): agreement (both sides on the same side of the threshold),
Spearman's rho of the judge's score against people's, the confusion of the two, per UTC day.
Those items are the ones the gate sent to people (the judge unsure, a flagged candidate, an
audit draw), not a random sample: the figures say how the judge does where it was sent up. A
`judge.rank` score is a place in a group, not a grade (a group of weak answers still has a
first), so its disagreement with people says how often a group's order is not people's good.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from tiers.judge.recorded import judge_model
from verifier_service.console.calibration import repository
from verifier_service.console.calibration.schemas import (
    Calibration,
    CalibrationBucket,
    CalibrationPoint,
    Confusion,
    GateCalibration,
    JudgeCalibration,
    JudgeConfusion,
    JudgeDay,
)
from verifier_service.console.overview.schemas import Window
from verifier_service.core.db import utcnow
from verifier_service.ladder.replay import spearman
from verifier_service.policies.gates import audit_draw
from verifier_service.policies.schemas import LadderStep
from verifier_service.policies.service import resolve
from verifier_service.settings import Settings

SPAN = {
    Window.hour: timedelta(hours=1),
    Window.day: timedelta(hours=24),
    Window.week: timedelta(days=7),
}
BUCKET = {
    Window.hour: timedelta(minutes=5),
    Window.day: timedelta(hours=1),
    Window.week: timedelta(hours=12),
}
DEFAULT_THRESHOLD = 0.5
MAX_POINTS = 1000
_NUMBER = r"(-?\d+(?:\.\d*)?|\.\d+)"


@dataclass(frozen=True)
class _Reading:
    """What the gate reads of the cheap tier's verdict, and the number it compares it with."""

    value: str  # "score" or "components.<name>"
    threshold: float | None


def read_gate(gate: str, cheap_tier: str) -> _Reading:
    """The cheap value a gate compares with a number (`verdicts['t'].score > 0.5`,
    `verdicts['t'].components.qed >= 0.4`), else the cheap tier's score and no threshold."""
    field = r"(score|components\.[A-Za-z_][A-Za-z0-9_]*)"
    tier = re.escape(cheap_tier)
    pattern = rf"verdicts\[['\"]{tier}['\"]\]\.{field}\s*(>=|>)\s*{_NUMBER}"
    found = re.search(pattern, gate)
    if found is None:
        return _Reading("score", None)
    return _Reading(found.group(1), float(found.group(3)))


def _cheap_value(
    reading: _Reading, score: float | None, components: dict[str, Any]
) -> float | None:
    if reading.value == "score":
        return score
    value = components.get(reading.value.removeprefix("components."))
    return float(value) if isinstance(value, int | float) else None


def _confusion(points: list[CalibrationPoint], threshold: float) -> Confusion:
    def count(passed: bool, good: bool) -> int:
        return sum(1 for p in points if p.passed == passed and (p.upper >= threshold) == good)

    return Confusion(
        passed_good=count(True, True),
        passed_bad=count(True, False),
        held_good=count(False, True),
        held_bad=count(False, False),
    )


def _rho(points: list[CalibrationPoint]) -> float | None:
    return spearman([p.cheap for p in points], [p.upper for p in points])


def _audited_gates(
    session: Session, since: datetime
) -> list[tuple[str, int, str, int, list[LadderStep]]]:
    """(policy, version, kind, step index, ladder) of each step with audit sampling."""
    out = []
    for name, version in repository.policies_since(session, since):
        document = resolve(session, name, version).document
        for kind, ladder in sorted(document.ladders.items()):
            for index, step in enumerate(ladder):
                if index > 0 and step.audit_fraction > 0:
                    out.append((name, version, str(kind), index, ladder))
    return out


def calibration(
    session: Session,
    window: Window,
    threshold: float | None = None,
    models: Mapping[str, str] | None = None,
) -> Calibration:
    """Every audited gate of the policies that ran jobs in the last `window`, and every model
    judge people answered after in it (`models`: each judge endpoint's model)."""
    now = utcnow()
    since = now - SPAN[window]
    gates = [
        _gate(session, since, now, BUCKET[window], threshold, name, version, kind, index, ladder)
        for name, version, kind, index, ladder in _audited_gates(session, since)
    ]
    judges = judge_calibration(session, since, now, threshold, models or {})
    return Calibration(window=window, since=since, now=now, gates=gates, judges=judges)


def endpoint_models(settings: Settings) -> dict[str, str]:
    """Each configured judge endpoint's model, by endpoint name."""
    return {name: e.model for name, e in settings.judge.endpoints.items()}


Pair = tuple[float, float, datetime]  # judge score, people's score, when people answered


def _judge_confusion(pairs: list[Pair], cut: float) -> JudgeConfusion:
    def count(judge_good: bool, people_good: bool) -> int:
        return sum(1 for j, h, _ in pairs if (j >= cut) == judge_good and (h >= cut) == people_good)

    return JudgeConfusion(
        both_good=count(True, True),
        judge_good_people_bad=count(True, False),
        judge_bad_people_good=count(False, True),
        both_bad=count(False, False),
    )


def _agreement(pairs: list[Pair], cut: float) -> float | None:
    if not pairs:
        return None
    return sum(1 for j, h, _ in pairs if (j >= cut) == (h >= cut)) / len(pairs)


def _days(since: datetime, now: datetime) -> list[date]:
    day, last, out = since.date(), now.date(), []
    while day <= last:
        out.append(day)
        day += timedelta(days=1)
    return out


def judge_calibration(
    session: Session,
    since: datetime,
    now: datetime,
    threshold: float | None,
    models: Mapping[str, str],
) -> list[JudgeCalibration]:
    """Per model judge, its scores against people's on the items people scored since `since`.

    A judge is the tier, the step's endpoint and the model that judged: the one its verdicts
    recorded, else (older verdicts) `models[endpoint]`, so a new model behind the same endpoint
    name is a judge of its own."""
    ladders: dict[tuple[str, int, str], list[LadderStep]] = {}

    def ladder_of(name: str, version: int, kind: str) -> list[LadderStep]:
        if (name, version, kind) not in ladders:
            document = resolve(session, name, version).document
            ladders[(name, version, kind)] = document.ladder_for(kind)
        return ladders[(name, version, kind)]

    grouped: dict[tuple[str, int, str, str, int, int, str], list[Pair]] = {}
    for row in repository.judged_by_people(session, since=since):
        name, version, kind, tier, js, hs, judge, people, at, feedback = row
        ladder = ladder_of(name, version, kind)
        endpoint = str(ladder[js].config.get("endpoint", "")) if js < len(ladder) else ""
        model = judge_model(feedback) or models.get(endpoint) or ""
        key = (name, version, kind, tier, js, hs, model)
        grouped.setdefault(key, []).append((judge, people, at))
    out = []
    for (name, version, kind, tier, js, hs, model), pairs in sorted(grouped.items()):
        ladder = ladder_of(name, version, kind)
        judge_step = ladder[js] if js < len(ladder) else None
        human_step = ladder[hs] if hs < len(ladder) else None
        gate = human_step.gate if human_step is not None else ""
        endpoint = str(judge_step.config.get("endpoint", "")) if judge_step is not None else ""
        reading = read_gate(gate, tier)
        cut = threshold
        if cut is None and reading.value == "score":
            cut = reading.threshold
        cut = cut if cut is not None else DEFAULT_THRESHOLD
        days = []
        for day in _days(since, now):
            inside = [p for p in pairs if p[2].date() == day]
            days.append(
                JudgeDay(
                    day=day, pairs=len(inside), agreement=_agreement(inside, cut),
                    spearman=spearman([j for j, _, _ in inside], [h for _, h, _ in inside]),
                    confusion=_judge_confusion(inside, cut),
                )
            )  # fmt: skip
        out.append(
            JudgeCalibration(
                policy=name, version=version, kind=kind, tier=tier, judge_step=js, human_step=hs,
                endpoint=endpoint, model=model or None, gate=gate, threshold=cut,
                pairs=len(pairs), agreement=_agreement(pairs, cut),
                spearman=spearman([j for j, _, _ in pairs], [h for _, h, _ in pairs]),
                confusion=_judge_confusion(pairs, cut), days=days,
            )
        )  # fmt: skip
    return out


def _gate(
    session: Session, since: datetime, now: datetime, width: timedelta,
    threshold: float | None, policy: str, version: int, kind: str, index: int,
    ladder: list[LadderStep],
) -> GateCalibration:  # fmt: skip
    step, cheap_tier = ladder[index], ladder[index - 1].tier
    reading = read_gate(step.gate, cheap_tier)
    cut = threshold if threshold is not None else reading.threshold
    cut = cut if cut is not None else DEFAULT_THRESHOLD
    points: list[CalibrationPoint] = []
    pairs = repository.climbed_pairs(
        session, policy=policy, version=version, kind=kind, step=index, since=since
    )
    for content_hash, low, components, up, as_audit, at in pairs:
        if audit_draw(content_hash, index) >= step.audit_fraction:
            continue  # the gate's own pick, not part of the random sample
        cheap = _cheap_value(reading, low, components)
        if cheap is None or up is None:
            continue  # an error or pending verdict has no score to compare
        points.append(CalibrationPoint(cheap=cheap, upper=up, passed=not as_audit, at=at))
    buckets = []
    start = since
    while start < now:
        inside = [p for p in points if start <= p.at < start + width]
        buckets.append(
            CalibrationBucket(
                start=start, pairs=len(inside), spearman=_rho(inside),
                confusion=_confusion(inside, cut),
            )
        )  # fmt: skip
        start += width
    return GateCalibration(
        policy=policy, version=version, kind=kind, step=index, cheap_tier=cheap_tier,
        upper_tier=step.tier, gate=step.gate, cheap_value=reading.value,
        audit_fraction=step.audit_fraction, threshold=cut, pairs=len(points),
        spearman=_rho(points), confusion=_confusion(points, cut), buckets=buckets,
        points=points[-MAX_POINTS:],
    )  # fmt: skip
