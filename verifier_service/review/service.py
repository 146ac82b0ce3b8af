"""The review queue's logic for reviewers: leases that never starve and never collide, answers,
gold served among real tasks, a reviewer's own numbers, and closing the tasks of items that
stopped waiting. What operators do (gold items, adjudication, pausing reviewers) is
operators.py. Functions take the caller's session and never commit; `reviewer` is the
principal's name."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from verifier_service.auth.service import record_event
from verifier_service.core.db import utcnow
from verifier_service.core.errors import (
    ConflictError,
    DomainError,
    InvalidRequestError,
    NotFoundError,
)
from verifier_service.ladder.answers import lock_job_of_item
from verifier_service.review import outcome, repository
from verifier_service.review.models import ReviewAnswer, ReviewLease, ReviewTask, new_id
from verifier_service.review.schemas import (
    AnswerIn,
    LeaseView,
    QueueSummary,
    ReviewConfig,
    ReviewerStats,
    Rubric,
    TaskView,
)
from verifier_service.settings import get_settings


class LeaseLimitError(DomainError):
    """The reviewer holds as many live leases in the queue as one may: 409."""

    status_code = 409
    code = "lease_limit"


class ReviewerPausedError(DomainError):
    """The reviewer is paused (gold accuracy, or an operator): 403."""

    status_code = 403
    code = "reviewer_paused"


# ------------------------------------------------------------------------------ reviewers


def queues(session: Session, reviewer: str) -> list[QueueSummary]:
    """Every queue with how many tasks this reviewer could take now."""
    repository.expire_leases(session, utcnow())
    out = []
    for queue in repository.list_queues(session):
        guidelines = ReviewConfig.model_validate(queue.config).guidelines
        excerpt = guidelines.strip().split("\n\n", 1)[0][:280]
        waiting = repository.waiting(session, queue.name, reviewer)
        out.append(QueueSummary(name=queue.name, waiting=waiting, guidelines_excerpt=excerpt))
    return out


def _check_not_paused(session: Session, reviewer: str) -> None:
    state = repository.reviewer_state(session, reviewer)
    if state is not None and state.paused:
        raise ReviewerPausedError(
            f"reviewer {reviewer!r} is paused: {state.paused_reason or 'by an operator'}",
            hint="ask an operator to look at your gold answers and unpause you",
        )


def _heartbeat_s(ttl_s: float) -> float:
    return min(get_settings().review.heartbeat_s, ttl_s / 3)


def _ttl(task: ReviewTask, session: Session) -> float:
    queue = repository.get_queue(session, task.queue)
    config = ReviewConfig.model_validate(queue.config) if queue is not None else None
    return config.claim_ttl_s if config is not None else 600.0


def _view(session: Session, lease: ReviewLease, task: ReviewTask) -> LeaseView:
    return LeaseView(
        lease_id=lease.id,
        expires_at=lease.expires_at,
        heartbeat_s=_heartbeat_s(_ttl(task, session)),
        draft=lease.draft,
        task=TaskView(
            task_id=task.id,
            queue=task.queue,
            kind=task.kind,
            payload=task.payload,
            reference=task.reference,
            verdicts=task.verdicts,
            guidelines=task.guidelines,
            rubric=Rubric.model_validate(task.rubric),
        ),
    )


def next_task(
    session: Session, reviewer: str, queue: str, *, resume: bool = False
) -> LeaseView | None:
    """Lease the next task of a queue for this reviewer (None: nothing left for them).

    `resume` (a reviewer opening the queue's page): a task she still holds there (a tab she
    closed) comes back to her first, with its draft, instead of staying locked to her until
    its lease expires. Without it (the page's preload of the next task) a new task is leased,
    up to `review.max_live_leases` held at once in the queue (then 409)."""
    _check_not_paused(session, reviewer)
    now = utcnow()
    repository.expire_leases(session, now)
    stored = repository.get_queue(session, queue)
    if stored is None:
        raise NotFoundError(f"no review queue named {queue!r}", hint="GET /v1/review/queues")
    config = ReviewConfig.model_validate(stored.config)
    if resume and (held := repository.live_lease_in(session, queue, reviewer)) is not None:
        held.expires_at = now + timedelta(seconds=config.claim_ttl_s)
        task = session.get(ReviewTask, held.task_id)
        assert task is not None
        return _view(session, held, task)
    most = get_settings().review.max_live_leases
    if repository.live_leases_in(session, queue, reviewer) >= most:
        raise LeaseLimitError(
            f"you hold {most} tasks of the queue {queue!r} already, as many as one reviewer may",
            hint="answer, skip or release one of them first",
        )
    task = None
    if _gold_due(session, queue, reviewer, config.gold_rate):
        task = _claim(session, queue, reviewer, gold=True)
    if task is None:
        task = _claim(session, queue, reviewer, gold=False)
    if task is None:
        return None
    lease = repository.add_lease(session, task.id, reviewer, now, config.claim_ttl_s)
    # A draft the reviewer saved under an earlier lease of this task (it expired, or she
    # released it) is hers still.
    if (draft := repository.earlier_draft(session, task.id, reviewer)) is not None:
        lease.draft = draft
    record_event(session, reviewer, "review.lease", task.id, lease=lease.id, queue=queue)
    return _view(session, lease, task)


def _gold_due(session: Session, queue: str, reviewer: str, rate: float) -> bool:
    """Whether this claim tries a gold task: drawn at the queue's gold_rate, and for sure once
    the reviewer's gold share in the queue has fallen a whole task behind it (a fair draw
    alone left one reviewer without gold for 17 tasks at 0.2, one time in 40)."""
    if rate <= 0:
        return False
    gold, total = repository.taken_in(session, queue, reviewer)
    return rate * (total + 1) - gold >= 1 or random.random() < rate


def _claim(session: Session, queue: str, reviewer: str, *, gold: bool) -> ReviewTask | None:
    """Claim a task, passing over tasks other requests hold locked; when every task left was
    locked, claim again waiting for the locks, so "nothing left" is never said of a unit another
    reviewer was only in the middle of taking (the last units of a queue).

    When the same reviewer's other request (a second tab) leased the task between the claim's
    snapshot and its row lock, give the unit back and claim again: each new statement sees the
    leases committed before it, so this ends."""
    wait = False
    while True:
        task = repository.claim(session, queue, reviewer, gold=gold, wait=wait)
        if task is None:
            if wait:
                return None
            wait = True
        elif repository.holds(session, task.id, reviewer):
            repository.give_back(session, Counter({task.id: 1}))
        else:
            return task


def _own_lease(session: Session, lease_id: str, reviewer: str) -> ReviewLease:
    lease = repository.lock_lease(session, lease_id)
    if lease is None:
        raise NotFoundError(f"no lease {lease_id!r}")
    if lease.reviewer != reviewer:
        raise ConflictError(f"lease {lease_id!r} is not yours")
    return lease


def _live_lease(session: Session, lease_id: str, reviewer: str) -> ReviewLease:
    """The reviewer's live lease; 409 when it has ended or expired (expiring it now)."""
    lease = _own_lease(session, lease_id, reviewer)
    now = utcnow()
    if lease.state == "live" and lease.expires_at <= now:
        _end(session, lease, "expired", now)
    if lease.state != "live":
        raise ConflictError(
            f"lease {lease_id!r} is {lease.state}",
            hint="ask for the next task: POST /v1/review/queues/{queue}/next",
        )
    return lease


def _end(session: Session, lease: ReviewLease, state: str, now: datetime) -> None:
    """End a live lease and give its unit of `overlap` back."""
    lease.state, lease.ended_at = state, now
    repository.lock_task(session, lease.task_id)
    repository.give_back(session, Counter({lease.task_id: 1}))


def lease(session: Session, lease_id: str, reviewer: str) -> LeaseView:
    """A reviewer's live lease with its task (404 unknown, 409 ended or not theirs)."""
    held = _live_lease(session, lease_id, reviewer)
    task = session.get(ReviewTask, held.task_id)
    assert task is not None
    return _view(session, held, task)


def waiting(session: Session, queue: str, reviewer: str) -> int:
    """How many tasks of the queue this reviewer could still take (her progress: "left")."""
    return repository.waiting(session, queue, reviewer)


def lease_state(session: Session, lease_id: str, reviewer: str) -> str | None:
    """The state of one of the reviewer's leases (live, answered, expired, ...); None if the
    lease is unknown or not hers."""
    found = session.get(ReviewLease, lease_id)
    return found.state if found is not None and found.reviewer == reviewer else None


def heartbeat(session: Session, lease_id: str, reviewer: str) -> datetime:
    """Keep a lease alive for another claim_ttl_s; its new expiry."""
    held = _live_lease(session, lease_id, reviewer)
    task = session.get(ReviewTask, held.task_id)
    assert task is not None
    held.expires_at = utcnow() + timedelta(seconds=_ttl(task, session))
    return held.expires_at


def save_draft(session: Session, lease_id: str, reviewer: str, draft: dict[str, Any]) -> None:
    """Keep the reviewer's unfinished answer on the server (it also counts as a heartbeat)."""
    held = _live_lease(session, lease_id, reviewer)
    held.draft = draft
    task = session.get(ReviewTask, held.task_id)
    assert task is not None
    held.expires_at = utcnow() + timedelta(seconds=_ttl(task, session))


def release(session: Session, lease_id: str, reviewer: str) -> None:
    """Give the task back to the queue (it may come to this reviewer again)."""
    held = _live_lease(session, lease_id, reviewer)
    _end(session, held, "released", utcnow())
    record_event(session, reviewer, "review.release", held.task_id, lease=held.id)


def skip(session: Session, lease_id: str, reviewer: str) -> None:
    """Give the task back; it is not offered to this reviewer again."""
    held = _live_lease(session, lease_id, reviewer)
    _end(session, held, "skipped", utcnow())
    record_event(session, reviewer, "review.skip", held.task_id, lease=held.id)


def submit(
    session: Session, lease_id: str, reviewer: str, answer: AnswerIn, submit_key: str
) -> None:
    """Record the reviewer's answer once (a retry with the same submit_key changes nothing).

    An answer on a lease that expired meanwhile still counts when the task has room for it.
    """
    _lock_job_first(session, lease_id)
    held = _own_lease(session, lease_id, reviewer)
    previous = repository.answer_by_key(session, submit_key)
    if previous is not None:
        if previous.reviewer != reviewer or previous.lease_id != lease_id:
            raise ConflictError("this Idempotency-Key was used for another answer")
        return
    task = repository.lock_task(session, held.task_id)
    rubric = Rubric.model_validate(task.rubric)
    values = outcome.check_values(rubric, answer.values)
    if answer.steps and not rubric.per_step:
        raise InvalidRequestError(
            "steps: this task's rubric has no per-step judgements", hint="leave `steps` out"
        )
    steps = [
        outcome.check_values(rubric, s, f"steps[{i}]") for i, s in enumerate(answer.steps or [])
    ]
    now = utcnow()
    if held.state == "live" and held.expires_at <= now:
        _end(session, held, "expired", now)
        session.refresh(task)
    if held.state != "live":
        room = task.state == "open" and task.taken < task.overlap
        if held.state != "expired" or not room:
            raise ConflictError(
                f"lease {lease_id!r} is {held.state} and the task has no room for the answer",
                hint="ask for the next task",
            )
        task.taken += 1  # the answer takes the unit its lease gave back
        task.state = "full" if task.taken >= task.overlap else "open"
    if repository.answer_of(session, task.id, reviewer) is not None:
        raise ConflictError("you have already answered this task")
    record = ReviewAnswer(
        id=new_id(),
        task_id=task.id,
        lease_id=held.id,
        reviewer=reviewer,
        submit_key=submit_key[:200],
        values=values,
        comment=answer.comment,
        steps=steps or None,
        gold=task.gold,
        correct=outcome.gold_correct(task, values) if task.gold else None,
        created_at=now,
    )
    try:
        with session.begin_nested():
            session.add(record)
    except IntegrityError:
        raise ConflictError("this answer was recorded already") from None
    held.state, held.ended_at, held.draft = "answered", now, None
    task.answered += 1
    record_event(session, reviewer, "review.answer", task.id, lease=held.id, answer=record.id)
    if task.gold:
        _after_gold(session, task, reviewer)
    elif task.answered >= task.overlap and task.state in ("open", "full"):
        outcome.answers_complete(session, task)


def _lock_job_first(session: Session, lease_id: str) -> None:
    """Lock the job of the lease's item before the lease and task: the job's deadline takes the
    job, then the tasks and leases, so both paths take their locks in one order."""
    found = session.get(ReviewLease, lease_id)
    task = session.get(ReviewTask, found.task_id) if found is not None else None
    if task is not None and task.item_id is not None:
        lock_job_of_item(session, task.item_id)


def _after_gold(session: Session, task: ReviewTask, reviewer: str) -> None:
    """Pause a reviewer whose gold accuracy fell below the queue's bar (after a few answers)."""
    queue = repository.get_queue(session, task.queue)
    if queue is None:
        return
    bar = ReviewConfig.model_validate(queue.config).min_gold_accuracy
    total, correct = repository.gold_record(session, reviewer)
    if total < get_settings().review.min_gold_answers or correct / total >= bar:
        return
    state = repository.reviewer_state(session, reviewer)
    if state is not None and state.paused:
        return
    reason = f"gold accuracy {correct}/{total} is below {bar:.0%} (queue {task.queue})"
    repository.put_reviewer_state(session, reviewer, True, reason, utcnow())
    record_event(
        session, "system", "review.reviewer_paused", reviewer,
        queue=task.queue, gold_answered=total, gold_correct=correct, min_gold_accuracy=bar,
    )  # fmt: skip


def stats(session: Session, reviewer: str) -> ReviewerStats:
    """The reviewer's own numbers (gold accuracy only where an operator shows it)."""
    midnight = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
    state = repository.reviewer_state(session, reviewer)
    shown = any(q.show_accuracy for q in repository.list_queues(session))
    total, correct = repository.gold_record(session, reviewer)
    return ReviewerStats(
        done_today=repository.answered_count(session, reviewer, midnight),
        answered=repository.answered_count(session, reviewer),
        gold_accuracy=correct / total if shown and total else None,
        paused=state is not None and state.paused,
    )


def close_items(session: Session, item_ids: Sequence[str], reason: str = "deadline") -> None:
    """The items stopped waiting (their job's deadline, or its cancel): close their tasks and
    leases."""
    tasks = repository.open_tasks_of_items(session, item_ids)
    now = utcnow()
    for task in tasks:
        task.state, task.closed_at = "closed", now
    if tasks:
        repository.close_leases(session, [t.id for t in tasks], now)
        for task in tasks:
            record_event(session, "system", "review.closed", task.id, reason=reason)
