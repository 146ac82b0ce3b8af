"""All SQL about job events, callbacks and webhook deliveries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import (
    BindParameter,
    Insert,
    Select,
    Table,
    bindparam,
    column,
    func,
    insert,
    or_,
    select,
    table,
    text,
)
from sqlalchemy.orm import Session

from verifier_service.core.db import built_once, utcnow
from verifier_service.core.rows import insert_rows, pipelined, row_values
from verifier_service.events.models import JobCallback, JobEvent, WebhookAttempt, WebhookDelivery

#: The jobs table, as far as events read it (its ORM model belongs to the ladder, above us).
_jobs = table("jobs", column("id"), column("principal"), column("status"))

#: A job's statuses once it has finished (the ladder's `JOB_FINISHED`).
_FINISHED = ("completed", "cancelled")

#: Key of the PostgreSQL advisory lock that orders event ids by commit.
_APPEND_LOCK = 0x5645_4E54  # "VENT"


def append(session: Session, events: Sequence[JobEvent], *, with_ids: bool = True) -> None:
    """Insert events so that their ids follow commit order.

    On PostgreSQL a transaction that takes a sequence value may commit after one that took a
    later value; a reader at that later id would skip the earlier event for good. A
    transaction-scoped advisory lock around the insert (held until commit) rules that out; it
    is taken at the end of a ladder pass, just before the commit. SQLite has one writer at a
    time anyway.

    `with_ids=False` leaves the rows without their ids (nothing will read them: no webhook
    delivery refers to them), sparing the RETURNING.
    """
    if not events:
        return
    # One statement for all of them (a batch's hundreds of item events), ids back in order;
    # the rows stay plain objects that carry their ids (nothing reads them through the ORM).
    events_table = JobEvent.__table__
    assert isinstance(events_table, Table)
    columns = [c.key for c in events_table.columns if c.key != "id"]
    rows = [row_values(event, columns) for event in events]
    for row in rows:
        if row["created_at"] is None:
            row["created_at"] = utcnow()
    # Pending changes first (as the lock's own statement would autoflush them): the lock is
    # held from here to the commit, no longer.
    session.flush()
    if not with_ids:  # the lock and the INSERT go together: one round trip (or COPY's)
        with pipelined(session, len(rows)):
            _lock(session)
            insert_rows(session, events_table, rows, columns)
        return
    _lock(session)
    ids = session.execute(_insert_returning_ids(), rows).scalars().all()
    for event, event_id in zip(events, ids, strict=True):
        event.id = event_id


def _lock(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _APPEND_LOCK})


@built_once
def _insert_returning_ids() -> Insert:
    events_table = JobEvent.__table__
    assert isinstance(events_table, Table)
    return insert(events_table).returning(events_table.c.id, sort_by_parameter_order=True)


def job_owner(session: Session, job_id: str) -> str | None:
    """The principal that submitted a job, or None if there is no such job."""
    found: str | None = session.scalar(select(_jobs.c.principal).where(_jobs.c.id == job_id))
    return found


def events_after(session: Session, job_id: str, after: int, limit: int) -> list[JobEvent]:
    query = (
        select(JobEvent)
        .where(JobEvent.job_id == job_id, JobEvent.id > after)
        .order_by(JobEvent.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def last_finished(session: Session, job_id: str) -> int | None:
    """The id of the job's latest job.finished event while the job is finished; None while it
    runs (again: an operator's retry reopens a finished job, and it finishes once more)."""
    running = select(_jobs.c.id).where(_jobs.c.id == job_id, _jobs.c.status.not_in(_FINISHED))
    if session.scalar(running) is not None:
        return None
    query = select(func.max(JobEvent.id)).where(
        JobEvent.job_id == job_id, JobEvent.kind == "job.finished"
    )
    found: int | None = session.scalar(query)
    return found


def changes_after(
    session: Session, principal: str | None, after: int, limit: int
) -> list[JobEvent]:
    """Item events after `after`, of `principal`'s jobs (every job's when None)."""
    query = select(JobEvent).where(
        JobEvent.id > after, JobEvent.kind.in_(("item.finished", "item.revised"))
    )
    if principal is not None:
        query = query.where(JobEvent.principal == principal)
    return list(session.scalars(query.order_by(JobEvent.id).limit(limit)))


def last_event_id(session: Session) -> int:
    return int(session.scalar(select(func.max(JobEvent.id))) or 0)


def set_callback(session: Session, job_id: str, url: str) -> None:
    session.add(JobCallback(job_id=job_id, url=url))


def callbacks_of(session: Session, job_ids: Iterable[str]) -> dict[str, str]:
    ids = list(set(job_ids))
    if not ids:
        return {}
    rows = session.execute(_callbacks_of(), {"ids": ids})
    return {row[0]: row[1] for row in rows}


@built_once
def _callbacks_of() -> Select[str, str]:
    ids: BindParameter[list[str]] = bindparam("ids", expanding=True)
    return select(JobCallback.job_id, JobCallback.url).where(JobCallback.job_id.in_(ids))


def add_deliveries(session: Session, deliveries: Sequence[WebhookDelivery]) -> None:
    if deliveries:
        session.add_all(deliveries)
        session.flush()  # their ids go into the outbox messages


def lock_delivery(session: Session, delivery_id: str) -> WebhookDelivery | None:
    query = select(WebhookDelivery).where(WebhookDelivery.id == delivery_id).with_for_update()
    return session.scalar(query)


def event(session: Session, event_id: int) -> JobEvent | None:
    return session.get(JobEvent, event_id)


def add_attempt(session: Session, attempt: WebhookAttempt) -> None:
    session.add(attempt)


def deliveries_of(
    session: Session, job_id: str, limit: int
) -> tuple[list[WebhookDelivery], dict[str, list[WebhookAttempt]]]:
    """A job's deliveries, oldest first, and the attempts of each."""
    deliveries = list(
        session.scalars(
            select(WebhookDelivery)
            .where(WebhookDelivery.job_id == job_id)
            .order_by(WebhookDelivery.event_id, WebhookDelivery.created_at)
            .limit(limit)
        )
    )
    attempts: dict[str, list[WebhookAttempt]] = {d.id: [] for d in deliveries}
    if deliveries:
        query = (
            select(WebhookAttempt)
            .where(WebhookAttempt.delivery_id.in_(list(attempts)))
            .order_by(WebhookAttempt.delivery_id, WebhookAttempt.number)
        )
        for attempt in session.scalars(query):
            attempts[attempt.delivery_id].append(attempt)
    return deliveries, attempts


def kinds_of(session: Session, event_ids: Iterable[int]) -> dict[int, str]:
    ids = list(set(event_ids))
    if not ids:
        return {}
    rows = session.execute(select(JobEvent.id, JobEvent.kind).where(JobEvent.id.in_(ids)))
    return {row[0]: row[1] for row in rows}


def overdue_deliveries(session: Session, due_before: datetime, limit: int) -> list[str]:
    """Pending deliveries whose next attempt was due before `due_before` and that no attempt
    holds now: their message was lost (a broker restart) or their worker died mid-attempt."""
    query = (
        select(WebhookDelivery.id)
        .where(
            WebhookDelivery.status == "pending",
            WebhookDelivery.next_attempt_at < due_before,
            or_(WebhookDelivery.busy_until.is_(None), WebhookDelivery.busy_until < due_before),
        )
        .order_by(WebhookDelivery.next_attempt_at)
        .limit(limit)
    )
    return list(session.scalars(query))
