"""Sending ladder work to Celery: staged in the outbox with the rows that need it, sent after
the commit that made those rows visible, swept up later if sending failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import structlog
from sqlalchemy.orm import Session

from tiers.registry import get_tier
from verifier_service.core import outbox
from verifier_service.core.broker import BROKER_ERRORS as BROKER_ERRORS
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.notify import publish_jobs
from verifier_service.core.outbox import OutboxMessage
from verifier_service.events import service as events
from verifier_service.ladder.operations import expire_job
from verifier_service.ladder.repository import overdue_job_ids
from verifier_service.ladder.results import LadderResult
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)


def tier_task_name(tier: str) -> str:
    """`chem.fast` -> `tier.chem_fast.verify`."""
    return f"tier.{tier.replace('.', '_')}.verify"


@dataclass
class Outgoing:
    """Messages staged in a transaction, and the jobs it finished, for after its commit."""

    messages: list[OutboxMessage] = field(default_factory=list)
    finished_jobs: set[str] = field(default_factory=set)
    event_jobs: set[str] = field(default_factory=set)


def stage(
    session: Session, result: LadderResult, *, deadline: tuple[str, float] | None = None
) -> Outgoing:
    """Write the tier tasks of a ladder pass (and a job's deadline) into the outbox, and its
    events (with their webhook deliveries): the last writes before the commit."""
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
    return Outgoing(messages, set(result.finished_jobs), {e.job_id for e in result.events})


def deliver(outgoing: Outgoing) -> None:
    """After commit: send the staged messages, drop them from the outbox, and wake waiters.

    A broker failure is logged, not raised: the rows are committed, and the sweeper sends
    them when the broker is back.
    """
    if outgoing.messages:
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


def expire_overdue(limit: int = 100) -> int:
    """Finish running jobs whose deadline passed; how many. The safety net under the deadline's
    delayed broker message, which a broker restart without persistence loses."""
    with transaction() as session:
        overdue = overdue_job_ids(session, utcnow(), limit)
    for job_id in overdue:
        with transaction() as session:
            outgoing = stage(session, expire_job(session, job_id))
        deliver(outgoing)
    if overdue:
        log.info("expired overdue jobs", jobs=len(overdue))
    return len(overdue)
