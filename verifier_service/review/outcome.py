"""What answers make: a gold answer's correctness, an item's agreement, and the `human`
verdict that completes it (handed to the ladder, which finishes the item and its job)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from tiers.base import Verdict, VerdictStatus
from tiers.human import HumanTier, Rubric
from verifier_service.auth.service import record_event
from verifier_service.core.db import utcnow
from verifier_service.core.errors import InvalidRequestError
from verifier_service.ladder import dispatch
from verifier_service.ladder.answers import record_deferred, record_deferred_all
from verifier_service.ladder.repository import children
from verifier_service.review import repository
from verifier_service.review.agreement import Metric, uniform_expected, unit_alpha
from verifier_service.review.models import ReviewAnswer, ReviewTask
from verifier_service.settings import get_settings

Values = dict[str, float | str]


def check_values(rubric: Rubric, values: Values, where: str = "values") -> Values:
    """The values of an answer, checked against the rubric; a 422 naming the dimension."""
    names = {d.name for d in rubric.dimensions}
    extra = sorted(set(values) - names)
    if extra:
        raise InvalidRequestError(
            f"{where}.{extra[0]}: no such rubric dimension",
            hint=f"the rubric's dimensions: {', '.join(sorted(names))}",
        )
    out: Values = {}
    for dim in rubric.dimensions:
        if dim.name not in values:
            raise InvalidRequestError(f"{where}.{dim.name}: missing", hint="answer every dimension")
        value = values[dim.name]
        if dim.type == "score":
            if isinstance(value, str) or not dim.min <= value <= dim.max:
                shown = f"{value:g}" if isinstance(value, float) else repr(value)
                raise InvalidRequestError(
                    f"{where}.{dim.name}: {shown} is not a score from {dim.min} to {dim.max}"
                )
            out[dim.name] = float(value)
        else:
            if value not in dim.labels:
                raise InvalidRequestError(
                    f"{where}.{dim.name}: {value!r} is not one of the labels",
                    hint=f"labels: {', '.join(dim.labels)}",
                )
            out[dim.name] = str(value)
    return out


def gold_correct(task: ReviewTask, values: Values) -> bool:
    """Whether an answer matches a gold task's known answer (scores within the tolerance)."""
    known = task.gold_answer or {}
    for name, expected in known.items():
        given = values.get(name)
        if isinstance(expected, str) or isinstance(given, str):
            if given != expected:
                return False
        elif given is None or abs(float(given) - float(expected)) > task.gold_tolerance:
            return False
    return True


def agreement(
    session: Session, task: ReviewTask, answers: Sequence[ReviewAnswer]
) -> dict[str, Any]:
    """Krippendorff's alpha of the task's answers per rubric dimension (None: one answer)."""
    rubric = Rubric.model_validate(task.rubric)
    pool = repository.pooled_values(session, task.queue, get_settings().review.agreement_pool)
    out: dict[str, Any] = {}
    for dim in rubric.dimensions:
        metric: Metric = "interval" if dim.type == "score" else "nominal"
        prior = uniform_expected(metric, low=dim.min, high=dim.max, labels=max(len(dim.labels), 2))
        pooled = [v[dim.name] for v in pool if v.get(dim.name) is not None]
        unit = [a.values.get(dim.name) for a in answers]
        out[dim.name] = unit_alpha(unit, metric, pooled=pooled, prior_expected=prior)
    return out


def human_verdict(
    rubric: Rubric, all_values: Sequence[Values], comments: Sequence[str], alpha: dict[str, Any]
) -> Verdict:
    """The `human` tier's verdict from people's (or an adjudicator's) values.

    score: the mean of the first score dimension, scaled to 0..1; components: each score
    dimension's mean (raw scale), each label's share (`dimension.label`), and `agreement` (the
    lowest alpha of the dimensions, when it is defined).
    """
    components: dict[str, float] = {}
    score: float | None = None
    for dim in rubric.dimensions:
        given = [v[dim.name] for v in all_values if dim.name in v]
        if dim.type == "score":
            mean = sum(float(x) for x in given) / len(given)
            components[dim.name] = mean
            if score is None:
                score = (mean - dim.min) / (dim.max - dim.min)
        else:
            for label in dim.labels:
                components[f"{dim.name}.{label}"] = sum(1 for x in given if x == label) / len(given)
    defined = [float(a) for a in alpha.values() if a is not None]
    if defined:
        components["agreement"] = min(defined)
    for name, value in alpha.items():
        if value is not None:
            components[f"agreement.{name}"] = float(value)
    feedback = "\n".join(f"- {c}" for c in comments if c)
    return Verdict(
        status=VerdictStatus.passed,
        score=score,
        components=components,
        feedback=f"reviewers' comments:\n{feedback}" if feedback else "",
        tier=HumanTier.name,
        tier_version=HumanTier.version,
    )


def complete(
    session: Session,
    task: ReviewTask,
    verdict: Verdict,
    actor: str,
    steps: Sequence[Verdict] = (),
) -> None:
    """Mark a task done and hand its verdict to the ladder (item and job finish here).

    A trajectory task's `steps` verdicts go to its step items (in order) and `verdict` to its
    outcome item (and to any step that has no verdict of its own)."""
    task.state, task.closed_at = "done", utcnow()
    record_event(session, actor, "review.complete", task.id, item=task.item_id, queue=task.queue)
    if task.item_id is None:
        return
    if task.kind != "trajectory":
        result = record_deferred(session, task.item_id, verdict, task.step)
        dispatch.stage(session, result)
        dispatch.send_on_commit(session)  # the request commits (the outbox holds the work)
        return
    pairs = []
    for child in children(session, task.item_id):
        given = steps[child.index] if child.role == "step" and child.index < len(steps) else None
        pairs.append((child.id, given or verdict))
    assert task.job_id is not None
    assert task.step is not None
    result = record_deferred_all(session, task.job_id, pairs, task.step)
    dispatch.stage(session, result)
    dispatch.send_on_commit(session)


def step_verdicts(
    rubric: Rubric, answers: Sequence[ReviewAnswer], alpha: dict[str, Any]
) -> list[Verdict]:
    """Each trajectory step's human verdict from the answers' per-step values."""
    n = max((len(a.steps or []) for a in answers), default=0)
    out = []
    for i in range(n):
        given = [a.steps[i] for a in answers if a.steps and i < len(a.steps)]
        out.append(human_verdict(rubric, given, [], alpha))
    return out


def answers_complete(session: Session, task: ReviewTask) -> None:
    """All `overlap` answers are in: complete the task, or send it to adjudication when the
    reviewers disagree (alpha below the queue's min_agreement on some dimension)."""
    answers = repository.answers_of(session, task.id)
    alpha = agreement(session, task, answers)
    task.agreement = alpha
    low = {k: v for k, v in alpha.items() if v is not None and v < task.min_agreement}
    if low:
        task.state = "adjudication"
        record_event(
            session, "system", "review.adjudication_needed", task.id,
            queue=task.queue, agreement=alpha, min_agreement=task.min_agreement,
        )  # fmt: skip
        return
    rubric = Rubric.model_validate(task.rubric)
    verdict = human_verdict(
        rubric, [a.values for a in answers], [a.comment or "" for a in answers], alpha
    )
    complete(session, task, verdict, "system", step_verdicts(rubric, answers, alpha))
