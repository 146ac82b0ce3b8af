"""All SQL of the review queue.

A claim is one statement: `UPDATE review_tasks SET taken = taken + 1 WHERE id = (SELECT ...
FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`. On PostgreSQL concurrent reviewers skip each
other's locked rows; when every row left is locked, the service claims again without SKIP
LOCKED, waiting for those locks, so a unit another request is only in the middle of taking is
never reported as "nothing left". A row changed by a claim that committed meanwhile is rechecked
(`taken < overlap`) on its newest version. On SQLite every transaction begins IMMEDIATE
(core/db.py), so claims run one at a time. `taken` counts answers plus live leases; a lease that
expires, is released or skipped gives its unit back. Row locks are always taken lease first,
then task, so lease-ending paths never deadlock with each other. A task whose units are all
taken is `full` (not `open`), so that the claim's index holds only tasks that can be claimed:
a queue of 100,000 tasks is not scanned past the ones already taken.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, Table, and_, bindparam, case, exists, func, select, update
from sqlalchemy.orm import Session

from verifier_service.review.models import (
    ReviewAdjudication,
    ReviewAnswer,
    ReviewerState,
    ReviewLease,
    ReviewQueue,
    ReviewTask,
    new_id,
)

#: Lease states that keep a task from being offered to that reviewer again.
HELD = ("live", "answered", "skipped")


def get_queue(session: Session, name: str) -> ReviewQueue | None:
    return session.get(ReviewQueue, name)


def put_queue(session: Session, name: str, config: dict[str, Any], now: datetime) -> ReviewQueue:
    """Create the queue, or give it the config of its latest tasks."""
    queue = session.get(ReviewQueue, name)
    if queue is None:
        queue = ReviewQueue(name=name, config=config, created_at=now, updated_at=now)
        session.add(queue)
    elif queue.config != config:
        queue.config, queue.updated_at = config, now
    return queue


def list_queues(session: Session) -> list[ReviewQueue]:
    return list(session.scalars(select(ReviewQueue).order_by(ReviewQueue.name)))


def expire_leases(session: Session, now: datetime) -> int:
    """End the live leases past their expiry and give their tasks the units back; how many."""
    table = ReviewLease.__table__
    assert isinstance(table, Table)
    rows = session.execute(
        update(table)
        .where(table.c.state == "live", table.c.expires_at < now)
        .values(state="expired", ended_at=now)
        .returning(table.c.task_id)
    ).all()
    give_back(session, Counter(task_id for (task_id,) in rows))
    return len(rows)


def give_back(session: Session, units: Counter[str]) -> None:
    """Take `units[task]` off each task's `taken` (in id order: no deadlocks); a full task is
    open again."""
    if not units:
        return
    table = ReviewTask.__table__
    assert isinstance(table, Table)
    session.execute(
        update(table)
        .where(table.c.id == bindparam("tid"))
        .values(
            taken=table.c.taken - bindparam("n"),
            state=case((table.c.state == "full", "open"), else_=table.c.state),
        ),
        [{"tid": tid, "n": n} for tid, n in sorted(units.items())],
    )


def _claimable(queue: str, reviewer: str, gold: bool) -> Select[Any]:
    mine = exists().where(
        ReviewLease.task_id == ReviewTask.id,
        ReviewLease.reviewer == reviewer,
        ReviewLease.state.in_(HELD),
    )
    return select(ReviewTask.id).where(
        ReviewTask.queue == queue,
        ReviewTask.gold == gold,
        ReviewTask.state == "open",
        ReviewTask.taken < ReviewTask.overlap,
        ~mine,
    )


def claim(
    session: Session, queue: str, reviewer: str, *, gold: bool, wait: bool = False
) -> ReviewTask | None:
    """Take one unit of the oldest task this reviewer may take, in one statement.

    By default a task another transaction holds locked is passed over, so reviewers never queue
    behind each other. With `wait` the claim waits for those locks instead and looks at the
    task again once they are released (PostgreSQL, read committed): it finds a unit that was
    only locked, not gone."""
    chosen = (
        _claimable(queue, reviewer, gold)
        .order_by(ReviewTask.created_at, ReviewTask.id)
        .limit(1)
        .with_for_update(skip_locked=not wait)
        .scalar_subquery()
    )
    taken, overlap = ReviewTask.taken, ReviewTask.overlap
    claimed = session.execute(
        update(ReviewTask)
        .where(ReviewTask.id == chosen, taken < overlap)
        .values(taken=taken + 1, state=case((taken + 1 >= overlap, "full"), else_="open"))
        .returning(ReviewTask)
        .execution_options(synchronize_session=False, populate_existing=True)
    ).scalar()
    return claimed


def live_lease_in(session: Session, queue: str, reviewer: str) -> ReviewLease | None:
    """The reviewer's oldest live lease on a task of the queue (not expired), locked."""
    query = (
        select(ReviewLease)
        .join(ReviewTask, ReviewTask.id == ReviewLease.task_id)
        .where(
            ReviewLease.reviewer == reviewer,
            ReviewLease.state == "live",
            ReviewTask.queue == queue,
        )
        .order_by(ReviewLease.created_at, ReviewLease.id)
        .limit(1)
    )
    return session.scalars(query.with_for_update(of=ReviewLease)).first()


def live_leases_in(session: Session, queue: str, reviewer: str) -> int:
    """How many live leases the reviewer holds on tasks of the queue."""
    query = (
        select(func.count())
        .select_from(ReviewLease)
        .join(ReviewTask, ReviewTask.id == ReviewLease.task_id)
        .where(
            ReviewLease.reviewer == reviewer,
            ReviewLease.state == "live",
            ReviewTask.queue == queue,
        )
    )
    return int(session.scalar(query) or 0)


def taken_in(session: Session, queue: str, reviewer: str) -> tuple[int, int]:
    """(gold tasks, all tasks) of the queue the reviewer holds or answered."""
    row = session.execute(
        select(
            func.count(func.distinct(ReviewTask.id)).filter(ReviewTask.gold.is_(True)),
            func.count(func.distinct(ReviewTask.id)),
        )
        .select_from(ReviewLease)
        .join(ReviewTask, ReviewTask.id == ReviewLease.task_id)
        .where(
            ReviewLease.reviewer == reviewer,
            ReviewLease.state.in_(("live", "answered")),
            ReviewTask.queue == queue,
        )
    ).one()
    return int(row[0]), int(row[1])


def earlier_draft(session: Session, task_id: str, reviewer: str) -> dict[str, Any] | None:
    """The draft of the reviewer's latest earlier lease of the task that kept one."""
    query = (
        select(ReviewLease.draft)
        .where(
            ReviewLease.task_id == task_id,
            ReviewLease.reviewer == reviewer,
            ReviewLease.state != "live",
            ReviewLease.draft.is_not(None),
        )
        .order_by(ReviewLease.created_at.desc(), ReviewLease.id.desc())
        .limit(20)
    )
    # (a JSON null, as a lease answered or given an empty draft stores it, is no draft)
    return next((d for d in session.scalars(query) if d is not None), None)


def holds(session: Session, task_id: str, reviewer: str) -> bool:
    """Whether the reviewer holds a live lease on, or answered, the task (as committed now)."""
    query = select(ReviewLease.id).where(
        ReviewLease.task_id == task_id,
        ReviewLease.reviewer == reviewer,
        ReviewLease.state.in_(("live", "answered")),
    )
    return session.scalar(query.limit(1)) is not None


def waiting(session: Session, queue: str, reviewer: str) -> int:
    """Tasks of a queue (not gold) this reviewer could take now."""
    query = select(func.count()).select_from(_claimable(queue, reviewer, False).subquery())
    return int(session.scalar(query) or 0)


def add_lease(
    session: Session, task_id: str, reviewer: str, now: datetime, ttl_s: float
) -> ReviewLease:
    lease = ReviewLease(
        id=new_id(),
        task_id=task_id,
        reviewer=reviewer,
        state="live",
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    session.add(lease)
    return lease


def lock_lease(session: Session, lease_id: str) -> ReviewLease | None:
    query = select(ReviewLease).where(ReviewLease.id == lease_id).with_for_update()
    return session.scalars(query.execution_options(populate_existing=True)).first()


def lock_task(session: Session, task_id: str) -> ReviewTask:
    query = select(ReviewTask).where(ReviewTask.id == task_id).with_for_update()
    task = session.scalars(query.execution_options(populate_existing=True)).first()
    assert task is not None
    return task


def answer_by_key(session: Session, submit_key: str) -> ReviewAnswer | None:
    return session.scalar(select(ReviewAnswer).where(ReviewAnswer.submit_key == submit_key))


def answer_of(session: Session, task_id: str, reviewer: str) -> ReviewAnswer | None:
    query = select(ReviewAnswer).where(
        ReviewAnswer.task_id == task_id, ReviewAnswer.reviewer == reviewer
    )
    return session.scalar(query)


def answers_of(session: Session, task_id: str) -> list[ReviewAnswer]:
    query = select(ReviewAnswer).where(ReviewAnswer.task_id == task_id)
    return list(session.scalars(query.order_by(ReviewAnswer.created_at, ReviewAnswer.id)))


def pooled_values(session: Session, queue: str, limit: int) -> list[dict[str, Any]]:
    """The values of a queue's latest answers to real (not gold) tasks."""
    query = (
        select(ReviewAnswer.values)
        .join(ReviewTask, ReviewTask.id == ReviewAnswer.task_id)
        .where(ReviewTask.queue == queue, ReviewTask.gold.is_(False))
        .order_by(ReviewAnswer.created_at.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def gold_record(session: Session, reviewer: str) -> tuple[int, int]:
    """(gold answers, correct ones) of a reviewer."""
    row = session.execute(
        select(func.count(), func.count().filter(ReviewAnswer.correct.is_(True))).where(
            ReviewAnswer.reviewer == reviewer, ReviewAnswer.gold.is_(True)
        )
    ).one()
    return int(row[0]), int(row[1])


def answered_count(session: Session, reviewer: str, since: datetime | None = None) -> int:
    query = select(func.count()).where(
        ReviewAnswer.reviewer == reviewer, ReviewAnswer.gold.is_(False)
    )
    if since is not None:
        query = query.where(ReviewAnswer.created_at >= since)
    return int(session.scalar(query) or 0)


def reviewer_state(session: Session, reviewer: str, *, lock: bool = False) -> ReviewerState | None:
    query = select(ReviewerState).where(ReviewerState.reviewer == reviewer)
    if lock:
        query = query.with_for_update()
    return session.scalar(query)


def put_reviewer_state(
    session: Session, reviewer: str, paused: bool, reason: str | None, now: datetime
) -> ReviewerState:
    state = reviewer_state(session, reviewer, lock=True)
    if state is None:
        state = ReviewerState(reviewer=reviewer)
        session.add(state)
    state.paused, state.paused_reason, state.updated_at = paused, reason, now
    return state


def reviewers(session: Session) -> list[str]:
    """Everyone who answered or holds a state, by name."""
    answered = select(ReviewAnswer.reviewer).distinct()
    stated = select(ReviewerState.reviewer)
    return sorted(set(session.scalars(answered)) | set(session.scalars(stated)))


def open_tasks_of_items(session: Session, item_ids: Sequence[str]) -> list[ReviewTask]:
    query = select(ReviewTask).where(
        ReviewTask.item_id.in_(list(item_ids)),
        ReviewTask.state.in_(("gathering", "open", "full", "adjudication")),
    )
    return list(session.scalars(query.with_for_update()))


def close_leases(session: Session, task_ids: Sequence[str], now: datetime) -> None:
    session.execute(
        update(ReviewLease)
        .where(ReviewLease.task_id.in_(list(task_ids)), ReviewLease.state == "live")
        .values(state="closed", ended_at=now)
    )


def adjudication_tasks(session: Session, queue: str | None, limit: int) -> list[ReviewTask]:
    query = select(ReviewTask).where(ReviewTask.state == "adjudication")
    if queue is not None:
        query = query.where(ReviewTask.queue == queue)
    return list(session.scalars(query.order_by(ReviewTask.created_at).limit(limit)))


def add_adjudication(
    session: Session, task_id: str, operator: str, values: dict[str, Any], comment: str | None
) -> ReviewAdjudication:
    record = ReviewAdjudication(
        id=new_id(), task_id=task_id, operator=operator, values=values, comment=comment
    )
    session.add(record)
    return record


def export_rows(
    session: Session, queue: str | None, batch: int = 1000
) -> Iterator[tuple[ReviewAnswer, ReviewTask]]:
    """Every answer with its task, oldest first (streamed in batches)."""
    query = select(ReviewAnswer, ReviewTask).join(
        ReviewTask, and_(ReviewTask.id == ReviewAnswer.task_id)
    )
    if queue is not None:
        query = query.where(ReviewTask.queue == queue)
    query = query.order_by(ReviewAnswer.created_at, ReviewAnswer.id)
    for row in session.execute(query.execution_options(yield_per=batch)):
        yield row[0], row[1]


def queue_units(session: Session, queue: str, limit: int) -> list[list[dict[str, Any]]]:
    """The answers' values of a queue's latest answered real tasks, one list per task."""
    tasks = list(
        session.scalars(
            select(ReviewTask.id)
            .where(ReviewTask.queue == queue, ReviewTask.gold.is_(False), ReviewTask.answered > 0)
            .order_by(ReviewTask.created_at.desc())
            .limit(limit)
        )
    )
    by_task: dict[str, list[dict[str, Any]]] = {t: [] for t in tasks}
    if tasks:
        query = select(ReviewAnswer.task_id, ReviewAnswer.values).where(
            ReviewAnswer.task_id.in_(tasks)
        )
        for task_id, values in session.execute(query):
            by_task[task_id].append(values)
    return list(by_task.values())


def unfinished_task(session: Session, item_id: str) -> ReviewTask | None:
    """The item's latest task that people have not finished (open, full, closed before its
    answers came, ...), locked; None when it has none."""
    query = (
        select(ReviewTask)
        .where(ReviewTask.item_id == item_id, ReviewTask.state != "done")
        .order_by(ReviewTask.created_at.desc(), ReviewTask.id.desc())
        .limit(1)
    )
    return session.scalars(query.with_for_update()).first()


def trajectory_task(session: Session, item_id: str) -> ReviewTask | None:
    """The trajectory task still gathering the steps of this trajectory item, if any."""
    query = select(ReviewTask).where(
        ReviewTask.item_id == item_id,
        ReviewTask.kind == "trajectory",
        ReviewTask.state == "gathering",
    )
    return session.scalars(query.with_for_update()).first()
