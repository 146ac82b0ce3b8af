"""Job events: written in the transaction of the change they tell of (never committed here),
read back as a stream per job and as a changes feed per principal, and fanned out to webhooks.

The ladder (above this package) hands over `EventDraft`s; `record` turns them into rows whose
ids follow commit order, plus a webhook delivery per event of a job that named a callback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import utcnow
from verifier_service.core.errors import InvalidRequestError, NotFoundError
from verifier_service.core.outbox import OutboxMessage
from verifier_service.core.rows import plain_row
from verifier_service.events import repository
from verifier_service.events.models import JobEvent, WebhookDelivery
from verifier_service.events.schemas import (
    ChangesPage,
    DeliveryAttemptOut,
    DeliveryOut,
    JobEventOut,
    RewardChange,
)
from verifier_service.events.webhooks import CALLBACKS_QUEUE, DELIVER_TASK, check_callback
from verifier_service.settings import get_settings

ITEM_FINISHED = "item.finished"
ITEM_REVISED = "item.revised"
JOB_FINISHED = "job.finished"


@dataclass(frozen=True)
class EventDraft:
    """An event the ladder made, to write at the end of its transaction."""

    job_id: str
    principal: str
    kind: str
    data: dict[str, Any]
    item_index: int | None = None
    revision: int | None = None


def item_event(
    job_id: str, principal: str, index: int, revision: int, reward: dict[str, Any]
) -> EventDraft:
    """An item's reward finished (revision 1) or changed (revision 2, 3, ...)."""
    kind = ITEM_FINISHED if revision == 1 else ITEM_REVISED
    data = {"index": index, "revision": revision, "reward": reward}
    return EventDraft(job_id, principal, kind, data, index, revision)


def job_event(
    job_id: str, principal: str, n_items: int, n_done: int, status: str = "completed"
) -> EventDraft:
    """The job finished (status "completed") or an operator cancelled it ("cancelled")."""
    data = {"status": status, "n_items": n_items, "n_done": n_done}
    return EventDraft(job_id, principal, JOB_FINISHED, data)


#: session.info key: callbacks of the jobs this transaction created (None: the job has none).
_NEW_JOBS = "events.new_job_callbacks"


def set_callback(session: Session, job_id: str, url: str | None) -> None:
    """Name the callback of a job this transaction creates (the URL already checked with
    `check_callback_url`), or say it has none: its events then need no lookup."""
    session.info.setdefault(_NEW_JOBS, {})[job_id] = url
    if url is not None:
        repository.set_callback(session, job_id, url)


def check_callback_url(url: str) -> None:
    """Refuse (422, callback_refused) a callback this service will not call."""
    check_callback(url, get_settings().webhooks)


def record(session: Session, drafts: Sequence[EventDraft]) -> list[OutboxMessage]:
    """Write events (caller commits) and a webhook delivery for each one of a job with a
    callback; the delivery tasks to stage in the outbox."""
    if not drafts:
        return []
    now = utcnow()
    rows = [
        plain_row(
            JobEvent, id=None, job_id=d.job_id, principal=d.principal, kind=d.kind,
            item_index=d.item_index, revision=d.revision, data=d.data, created_at=now,
        )
        for d in drafts
    ]  # fmt: skip
    known: dict[str, str | None] = session.info.get(_NEW_JOBS, {})
    job_ids = {d.job_id for d in drafts}
    callbacks = {j: url for j in job_ids & known.keys() if (url := known[j]) is not None}
    if unknown := job_ids - known.keys():
        callbacks |= repository.callbacks_of(session, unknown)
    repository.append(session, rows, with_ids=bool(callbacks))  # a delivery names its event
    deliveries = [
        WebhookDelivery(
            job_id=row.job_id, event_id=row.id, url=callbacks[row.job_id], status="pending",
            attempts=0, next_attempt_at=now, created_at=now,
        )
        for row in rows
        if row.job_id in callbacks
    ]  # fmt: skip
    repository.add_deliveries(session, deliveries)
    return [
        OutboxMessage(
            task=DELIVER_TASK, args=[d.id], queue=CALLBACKS_QUEUE, eta=None, created_at=now
        )
        for d in deliveries
    ]


def _out(row: JobEvent) -> JobEventOut:
    return JobEventOut(
        id=row.id,
        type=row.kind,
        job_id=row.job_id,
        timestamp=row.created_at,
        data=row.data,
    )


def visible_job(session: Session, job_id: str, principal: AuthenticatedPrincipal) -> None:
    """404 for a job that does not exist or is someone else's (as GET /v1/jobs/{id})."""
    owner = repository.job_owner(session, job_id)
    if owner is None or not (principal.sees_all_jobs() or owner == principal.acting_as):
        raise NotFoundError(f"no job with id {job_id!r}")


def events_after(session: Session, job_id: str, after: int, limit: int = 500) -> list[JobEventOut]:
    """A job's events after event id `after`, in order."""
    return [_out(row) for row in repository.events_after(session, job_id, after, limit)]


def last_finished(session: Session, job_id: str) -> int | None:
    """The id of the job.finished event a stream of the job ends at: its latest one, while the
    job is finished (None while it runs, retried included)."""
    return repository.last_finished(session, job_id)


def parse_cursor(value: str | None, what: str) -> int:
    """An event id given as a cursor (Last-Event-ID, since); 0 when absent."""
    if value is None or value == "":
        return 0
    if not value.isdigit() or len(value) > 18:
        raise InvalidRequestError(
            f"{what} {value[:40]!r} is not a cursor",
            hint="pass the `next` (or event id) the service gave you, `0` for the beginning, "
            "or `now` (changes feed) for only what comes next",
        )
    return int(value)


def changes(
    session: Session, principal: AuthenticatedPrincipal, since: str | None, limit: int
) -> ChangesPage:
    """Reward revisions of the caller's jobs (an operator's: every job's) after `since`."""
    if since == "now":
        return ChangesPage(changes=[], next=str(repository.last_event_id(session)))
    after = parse_cursor(since, "since")
    owner = None if principal.sees_all_jobs() else principal.acting_as
    rows = repository.changes_after(session, owner, after, limit)
    page = [
        RewardChange(
            cursor=str(row.id),
            job_id=row.job_id,
            index=row.item_index if row.item_index is not None else -1,
            revision=row.revision or 1,
            type=row.kind,
            reward=row.data.get("reward") or {},
            timestamp=row.created_at,
        )
        for row in rows
    ]
    return ChangesPage(changes=page, next=page[-1].cursor if page else str(after))


def deliveries(session: Session, job_id: str, limit: int = 1000) -> list[DeliveryOut]:
    """A job's webhook deliveries with every attempt, in event order."""
    found, attempts = repository.deliveries_of(session, job_id, limit)
    kinds = repository.kinds_of(session, (d.event_id for d in found))
    return [
        DeliveryOut(
            id=d.id,
            event_id=d.event_id,
            type=kinds.get(d.event_id, ""),
            url=d.url,
            status=d.status,
            next_attempt_at=d.next_attempt_at,
            created_at=d.created_at,
            finished_at=d.finished_at,
            attempts=[
                DeliveryAttemptOut(
                    number=a.number,
                    started_at=a.started_at,
                    status_code=a.status_code,
                    error=a.error,
                    duration_ms=a.duration_ms,
                )
                for a in attempts[d.id]
            ],
        )
        for d in found
    ]
