"""What operators do with the review queues: gold items, every reviewer's standing and
pausing them, a queue's reviewers seeing their gold accuracy, agreement per queue, and
adjudication (the final answer on a task whose reviewers disagreed). Reviewers' own path
(leases, answers) is service.py. Functions take the caller's session and never commit; each
action is audited."""

from __future__ import annotations

from sqlalchemy.orm import Session

from verifier_service.auth.service import record_event
from verifier_service.core.db import utcnow
from verifier_service.core.errors import ConflictError, NotFoundError
from verifier_service.ladder.answers import lock_job_of_item
from verifier_service.review import outcome, repository
from verifier_service.review.agreement import Metric, alpha
from verifier_service.review.models import ReviewTask, new_id
from verifier_service.review.schemas import (
    AdjudicationIn,
    AdjudicationView,
    GoldItemIn,
    GoldItemOut,
    ReviewConfig,
    ReviewerOut,
    Rubric,
)

#: Gold tasks take any number of answers: each reviewer answers each one once.
GOLD_OVERLAP = 1_000_000


def add_gold(session: Session, queue: str, gold: GoldItemIn, operator: str) -> GoldItemOut:
    """Add an item with a known answer to a queue."""
    answer = outcome.check_values(gold.rubric, gold.answer, "answer")
    now = utcnow()
    if repository.get_queue(session, queue) is None:
        config = ReviewConfig(queue=queue, guidelines=gold.guidelines, rubric=gold.rubric)
        repository.put_queue(session, queue, config.model_dump(mode="json"), now)
    task = ReviewTask(
        id=new_id(),
        queue=queue,
        kind=gold.kind,
        payload=gold.payload,
        reference=gold.reference,
        verdicts=[],
        guidelines=gold.guidelines,
        rubric=gold.rubric.model_dump(mode="json"),
        overlap=GOLD_OVERLAP,
        gold=True,
        gold_answer=answer,
        gold_tolerance=gold.tolerance,
        created_at=now,
    )
    session.add(task)
    record_event(session, operator, "review.gold_add", task.id, queue=queue)
    return GoldItemOut(task_id=task.id, queue=queue)


def reviewers(session: Session) -> list[ReviewerOut]:
    """Every reviewer with their gold accuracy and whether they are paused."""
    out = []
    for name in repository.reviewers(session):
        total, correct = repository.gold_record(session, name)
        state = repository.reviewer_state(session, name)
        out.append(
            ReviewerOut(
                reviewer=name,
                answered=repository.answered_count(session, name),
                gold_answered=total,
                gold_correct=correct,
                gold_accuracy=correct / total if total else None,
                paused=state is not None and state.paused,
                paused_reason=state.paused_reason if state is not None else None,
            )
        )
    return out


def set_paused(session: Session, reviewer: str, paused: bool, operator: str) -> None:
    """Pause or unpause a reviewer."""
    reason = f"paused by {operator}" if paused else None
    repository.put_reviewer_state(session, reviewer, paused, reason, utcnow())
    action = "review.reviewer_paused" if paused else "review.reviewer_unpaused"
    record_event(session, operator, action, reviewer)


def show_accuracy(session: Session, queue: str, show: bool, operator: str) -> None:
    """Let the queue's reviewers see their gold accuracy (or not)."""
    stored = repository.get_queue(session, queue)
    if stored is None:
        raise NotFoundError(f"no review queue named {queue!r}")
    stored.show_accuracy = show
    record_event(session, operator, "review.queue_settings", queue, show_accuracy=show)


def adjudications(session: Session, queue: str | None, limit: int = 100) -> list[AdjudicationView]:
    """Tasks whose reviewers disagreed, with every answer, for an operator to decide."""
    out = []
    for task in repository.adjudication_tasks(session, queue, limit):
        answers = repository.answers_of(session, task.id)
        out.append(
            AdjudicationView(
                task_id=task.id,
                queue=task.queue,
                kind=task.kind,
                payload=task.payload,
                reference=task.reference,
                rubric=Rubric.model_validate(task.rubric),
                answers=[
                    {"reviewer": a.reviewer, "values": a.values, "comment": a.comment}
                    for a in answers
                ],
                agreement=task.agreement or {},
            )
        )
    return out


def queue_agreement(session: Session, queue: str, limit: int = 5000) -> dict[str, float | None]:
    """Krippendorff's alpha per rubric dimension over a queue's latest answered items."""
    stored = repository.get_queue(session, queue)
    if stored is None:
        raise NotFoundError(f"no review queue named {queue!r}")
    rubric = ReviewConfig.model_validate(stored.config).rubric
    units = repository.queue_units(session, queue, limit)
    out: dict[str, float | None] = {}
    for dim in rubric.dimensions:
        metric: Metric = "interval" if dim.type == "score" else "nominal"
        out[dim.name] = alpha([[a.get(dim.name) for a in unit] for unit in units], metric)
    return out


def adjudicate(session: Session, task_id: str, decision: AdjudicationIn, operator: str) -> None:
    """An operator's final answer: it completes the item."""
    task = session.get(ReviewTask, task_id)
    if task is None:
        raise NotFoundError(f"no review task {task_id!r}")
    if task.item_id is not None:
        lock_job_of_item(session, task.item_id)  # the job first, as the deadline does
    task = repository.lock_task(session, task_id)
    if task.state != "adjudication":
        raise ConflictError(f"task {task_id!r} is {task.state}, not waiting for adjudication")
    rubric = Rubric.model_validate(task.rubric)
    values = outcome.check_values(rubric, decision.values)
    repository.add_adjudication(session, task.id, operator, values, decision.comment)
    record_event(session, operator, "review.adjudicate", task.id, values=values)
    alpha = task.agreement or {}
    verdict = outcome.human_verdict(rubric, [values], [decision.comment or ""], alpha)
    answers = repository.answers_of(session, task.id)  # a trajectory's steps: as people said
    steps = outcome.step_verdicts(rubric, answers, alpha)
    outcome.complete(session, task, verdict, operator, steps)
