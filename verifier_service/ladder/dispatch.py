"""Sending ladder work to Celery: staged in the outbox with the rows that need it, sent after
the commit that made those rows visible, swept up later if sending failed.

`commit_then_send` is the one way a transaction that changes the ladder ends: its work runs in a
transaction of its own (tried again when the database drops the connection), commits, and only
then are the tier tasks it staged sent and the jobs it finished woken. A transaction someone
else commits (a request's) asks for the same with `send_on_commit`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

import structlog
from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

from tiers.registry import get_tier
from verifier_service.core import outbox
from verifier_service.core.broker import BROKER_ERRORS as BROKER_ERRORS
from verifier_service.core.db import transaction, utcnow, with_retries
from verifier_service.core.notify import publish_jobs
from verifier_service.core.outbox import OutboxMessage
from verifier_service.events import service as events
from verifier_service.ladder.operations import expire_job
from verifier_service.ladder.repository import overdue_job_ids
from verifier_service.ladder.results import LadderResult
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: Where a session keeps what `stage` staged in its transaction, until it is sent.
STAGED = "ladder.staged"
#: Set on a session whose commit sends what it staged (`send_on_commit`).
SENDS_ON_COMMIT = "ladder.sends_on_commit"


def tier_task_name(tier: str) -> str:
    """`chem.fast` -> `tier.chem_fast.verify`."""
    return f"tier.{tier.replace('.', '_')}.verify"


@dataclass
class Outgoing:
    """Messages staged in a transaction, and the jobs it finished, for after its commit."""

    messages: list[OutboxMessage] = field(default_factory=list)
    finished_jobs: set[str] = field(default_factory=set)
    event_jobs: set[str] = field(default_factory=set)
    #: Log context bound while sending (the tasks carry its request id: `propagation`).
    context: dict[str, str] = field(default_factory=dict)


def stage(
    session: Session,
    result: LadderResult,
    *,
    deadline: tuple[str, float] | None = None,
    context: dict[str, str] | None = None,
) -> Outgoing:
    """Write the tier tasks of a ladder pass (and a job's deadline) into the outbox, and its
    events (with their webhook deliveries): the last writes before the commit. The session
    keeps what was staged for `commit_then_send` (or `send_on_commit`) to send after commit;
    `context` is bound to the logs while it is sent."""
    messages = [
        OutboxMessage(
            task=tier_task_name(work.tier),
            args=[work.kind, work.step, list(work.item_ids)]
            + ([list(work.keys), work.tier_version] if work.keys else []),
            queue=get_tier(work.tier).queue,
            eta=None,
            created_at=utcnow(),
        )
        for work in result.dispatches
    ]
    if deadline is not None:
        job_id, seconds = deadline
        messages.append(
            OutboxMessage(
                task="ladder.expire",
                args=[job_id],
                queue="ladder",
                eta=utcnow() + timedelta(seconds=seconds),
                created_at=utcnow(),
            )
        )
    messages.extend(events.record(session, result.events))
    outbox.stage(session, messages)
    outgoing = Outgoing(
        messages, set(result.finished_jobs), {e.job_id for e in result.events}, context or {}
    )
    session.info.setdefault(STAGED, []).append(outgoing)
    return outgoing


def _staged(session: Session) -> list[Outgoing]:
    """What `stage` staged in the session's transaction, forgotten by the session."""
    staged: list[Outgoing] = session.info.pop(STAGED, [])
    return staged


def _merged(staged: Iterable[Outgoing]) -> list[Outgoing]:
    """Staged work as few sends as possible: one per log context, in the order staged."""
    merged: dict[tuple[tuple[str, str], ...], Outgoing] = {}
    for one in staged:
        into = merged.setdefault(tuple(sorted(one.context.items())), Outgoing(context=one.context))
        into.messages.extend(one.messages)
        into.finished_jobs |= one.finished_jobs
        into.event_jobs |= one.event_jobs
    return list(merged.values())


def commit_then_send(
    work: Callable[[Session], T], *, retries: int = 2, first_delay_s: float = 0.1
) -> T:
    """Run `work(session)` in a transaction of its own and commit it; then send the ladder work
    it staged (`stage`: tier tasks, deadlines, webhooks) and wake the waiters of the jobs it
    finished. Returns what `work` returned.

    When the database drops the connection or loses a race (`core.db.is_transient`), `work`
    runs again in a new transaction, at most `retries` more times after a growing pause from
    `first_delay_s`: nothing of a failed try was stored or sent. A broker that is away is no
    error: the messages stay in the outbox and the sweeper sends them (`deliver`).
    """

    def attempt() -> tuple[T, list[Outgoing]]:
        with transaction() as session:
            value = work(session)
            staged = _staged(session)
        return value, staged

    value, staged = with_retries(attempt, retries=retries, first_delay_s=first_delay_s)
    for outgoing in _merged(staged):
        deliver(outgoing)
    return value


def send_on_commit(session: Session) -> None:
    """`commit_then_send` for a transaction the caller does not own (a request's session): what
    it staged is sent once it commits, and forgotten if it rolls back."""
    if not session.info.get(SENDS_ON_COMMIT):
        session.info[SENDS_ON_COMMIT] = True
        event.listen(session, "after_commit", _send_staged)
        event.listen(session, "after_soft_rollback", _forget_staged)


def _send_staged(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: the transaction goes on
    for outgoing in _merged(_staged(session)):
        try:
            deliver(outgoing)
        except Exception:  # committed already: the sweeper sends what is still in the outbox
            log.exception("could not send ladder work after commit")


def _forget_staged(session: Session, previous: SessionTransaction) -> None:
    if previous.parent is None:  # the transaction, not a savepoint in it
        session.info.pop(STAGED, None)


def deliver(outgoing: Outgoing) -> None:
    """After commit: send the staged messages, drop them from the outbox, and wake waiters.

    A broker failure is logged, not raised: the rows are committed, and the sweeper sends
    them when the broker is back. (`commit_then_send` calls this; call it yourself only with
    an `Outgoing` whose transaction has committed.)
    """
    if outgoing.messages:
        if outgoing.context:
            with structlog.contextvars.bound_contextvars(**outgoing.context):
                sent = outbox.send(outgoing.messages)
        else:
            sent = outbox.send(outgoing.messages)
        if sent:
            with transaction() as session:
                outbox.forget(session, sent)
    if outgoing.finished_jobs or outgoing.event_jobs:
        try:
            publish_jobs(get_settings().broker_url, outgoing.finished_jobs, outgoing.event_jobs)
        except BROKER_ERRORS as exc:  # waiters fall back to their timeout and a reload
            log.warning("could not publish finished jobs", error=str(exc))


def sweep(grace_s: float, limit: int = 500) -> int:
    """Send messages staged more than `grace_s` ago and still in the outbox; how many went."""
    with transaction() as session:
        stale = outbox.due(session, utcnow() - timedelta(seconds=grace_s), limit)
    sent = outbox.send(stale)
    if sent:
        with transaction() as session:
            outbox.forget(session, sent)
        log.info("outbox swept", sent=len(sent))
    return len(sent)


def expire(job_id: str, *, retries: int = 0) -> None:
    """A job's deadline: its open items get the best reward available now, and what follows
    (events, waiters woken) is sent after the commit."""
    commit_then_send(lambda session: stage(session, expire_job(session, job_id)), retries=retries)


def expire_overdue(limit: int = 100) -> int:
    """Finish running jobs whose deadline passed; how many. The safety net under the deadline's
    delayed broker message, which a broker restart without persistence loses."""
    with transaction() as session:
        overdue = overdue_job_ids(session, utcnow(), limit)
    for job_id in overdue:
        expire(job_id, retries=0)  # the next sweep tries again
    if overdue:
        log.info("expired overdue jobs", jobs=len(overdue))
    return len(overdue)
