"""The logic of the console's people pages, on the review domain's service: gold items (list,
add one from a task people were sent, remove) and adjudication. Functions
take the caller's session and never commit; what an operator does is audited."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from verifier_service.auth.service import record_event
from verifier_service.console.people import repository
from verifier_service.console.people.schemas import GoldPage, GoldRow, SourceRow, SourceTask
from verifier_service.core.db import utcnow
from verifier_service.core.errors import NotFoundError
from verifier_service.review import operators as review_ops
from verifier_service.review import repository as review_repository
from verifier_service.review.schemas import (
    AdjudicationIn,
    AdjudicationView,
    GoldItemIn,
    GoldItemOut,
    Rubric,
)

#: Rows a page lists (newest first).
PAGE_ROWS = 200

Values = dict[str, float | str]


def excerpt(payload: Mapping[str, Any], limit: int = 160) -> str:
    """An item's payload on one line, cut at `limit` characters."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gold_page(session: Session) -> GoldPage:
    """The gold items with their record, and the real tasks a new one can be made from."""
    gold = [
        GoldRow(
            task_id=task.id,
            queue=task.queue,
            kind=task.kind,
            payload=task.payload,
            answer=task.gold_answer or {},
            tolerance=task.gold_tolerance,
            answered=answered,
            correct=correct,
            removed=task.state == "closed",
            created_at=task.created_at,
        )
        for task, answered, correct in repository.gold_tasks(session, PAGE_ROWS)
    ]
    sources = [
        SourceRow(
            task_id=task.id,
            queue=task.queue,
            kind=task.kind,
            state=task.state,
            answered=task.answered,
            payload=task.payload,
            created_at=task.created_at,
        )
        for task in repository.source_tasks(session, PAGE_ROWS)
    ]
    return GoldPage(gold=gold, sources=sources)


def source(session: Session, task_id: str) -> SourceTask:
    """The real task a gold item would be made from (404 for a gold task or a trajectory)."""
    task = repository.task(session, task_id)
    if task is None or task.gold or task.kind == "trajectory":
        raise NotFoundError(
            f"no review task {task_id!r} to make a gold item from",
            hint="pick one of the tasks listed on /console/people/gold",
        )
    answers = review_repository.answers_of(session, task.id)
    return SourceTask(
        task_id=task.id,
        queue=task.queue,
        kind=task.kind,
        payload=task.payload,
        reference=task.reference,
        guidelines=task.guidelines,
        rubric=Rubric.model_validate(task.rubric),
        answers=[{"reviewer": a.reviewer, "values": a.values} for a in answers],
    )


def form_values(rubric: Rubric, form: Mapping[str, str]) -> Values:
    """A form's `value.<dimension>` fields as an answer: scores as numbers where they are
    numbers (the review domain's check names anything wrong), empty fields left out."""
    values: Values = {}
    for dim in rubric.dimensions:
        raw = str(form.get(f"value.{dim.name}", "")).strip()
        if not raw:
            continue
        if dim.type == "score":
            try:
                values[dim.name] = float(raw)
                continue
            except ValueError:
                pass
        values[dim.name] = raw
    return values


def add_gold_from(
    session: Session, task_id: str, form: Mapping[str, str], tolerance: float, operator: str
) -> GoldItemOut:
    """A gold item copied from a task people were sent (its item, guidelines and rubric) with
    the operator's known answer, added to the task's queue (audited by the review domain)."""
    found = source(session, task_id)
    kind = found.kind
    if kind not in ("molecule", "code", "json", "text"):
        raise NotFoundError(f"a {kind} task cannot be a gold item")
    gold = GoldItemIn.model_validate(
        {
            "kind": kind,
            "payload": found.payload,
            "reference": found.reference,
            "guidelines": found.guidelines,
            "rubric": found.rubric,
            "answer": form_values(found.rubric, form),
            "tolerance": tolerance,
        }
    )
    return review_ops.add_gold(session, found.queue, gold, operator)


def remove_gold(session: Session, task_id: str, operator: str) -> bool:
    """Take a gold item out of its queue: nobody is served it again, live leases on it end, its
    answers stay counted. False when it was removed already."""
    task = repository.task(session, task_id, lock=True)
    if task is None or not task.gold:
        raise NotFoundError(f"no gold item {task_id!r}", hint="see /console/people/gold")
    if task.state == "closed":
        return False
    now = utcnow()
    task.state, task.closed_at = "closed", now
    review_repository.close_leases(session, [task.id], now)
    record_event(session, operator, "review.gold_remove", task.id, queue=task.queue)
    return True


def adjudications(session: Session) -> list[AdjudicationView]:
    """Tasks whose reviewers disagreed, oldest first."""
    return review_ops.adjudications(session, None, PAGE_ROWS)


def decide(
    session: Session, task_id: str, form: Mapping[str, str], comment: str, operator: str
) -> None:
    """An operator's final answer to a disagreement: it completes the item (audited)."""
    task = repository.task(session, task_id)
    if task is None:
        raise NotFoundError(f"no review task {task_id!r}")
    values = form_values(Rubric.model_validate(task.rubric), form)
    decision = AdjudicationIn(values=values, comment=comment.strip() or None)
    review_ops.adjudicate(session, task_id, decision, operator)
