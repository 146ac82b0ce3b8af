"""The oracle domain's logic: items the ladder hands to an oracle wait for selection within its
capacity; the chosen ones travel in batches (pushed, or claimed under a lease); results come
back idempotently and become the oracle tier's verdicts, or revise a fallback reward.

The logic lives by subject: `access` (definitions, who serves an oracle, queues and tasks,
periods, pause state, sending after commit), `selection` (from the ladder to a batch, within
capacity), `batches` (claims, leases, results, failed pushes). This module holds the operators'
controls (pause, resume, resend) and is where callers import all of it from.
"""

from __future__ import annotations

import structlog
from sqlalchemy.orm import Session

from verifier_service.core import outbox
from verifier_service.core.db import utcnow
from verifier_service.core.outbox import OutboxMessage
from verifier_service.ladder import dispatch
from verifier_service.oracle import repository
from verifier_service.oracle.access import (
    PUSH_TASK,
    SELECT_TASK,
    after_commit,
    definition,
    definitions,
    oracle_queues,
    paused,
    period_start,
    queue_for,
    select_message,
    serving,
)
from verifier_service.oracle.batches import batch_out, claim, fail_batch, heartbeat, record_results
from verifier_service.oracle.errors import NotResendableError, UnknownBatchError
from verifier_service.oracle.models import OracleControl
from verifier_service.oracle.selection import close, enqueue, select

log = structlog.get_logger(__name__)

# What callers use, wherever it lives.
__all__ = [
    "PUSH_TASK",
    "SELECT_TASK",
    "after_commit",
    "batch_out",
    "claim",
    "close",
    "definition",
    "definitions",
    "enqueue",
    "fail_batch",
    "heartbeat",
    "oracle_queues",
    "paused",
    "period_start",
    "queue_for",
    "record_results",
    "resend",
    "select",
    "select_message",
    "serving",
    "set_paused",
]


def set_paused(session: Session, name: str, pause: bool, actor: str) -> None:
    """Pause an oracle (nothing more is selected or claimed; what was sent stays sent) or
    resume it (what waited is selected now)."""
    definition(name)
    now = utcnow()
    control = session.get(OracleControl, name, with_for_update=True)
    if control is None:
        session.add(OracleControl(oracle=name, paused=pause, changed_by=actor, changed_at=now))
    else:
        control.paused, control.changed_by, control.changed_at = pause, actor, now
    if not pause:
        message = select_message(name, now)
        outbox.stage(session, [message])
        after_commit(session, [dispatch.Outgoing([message])])
    log.info("oracle paused" if pause else "oracle resumed", oracle=name, by=actor)


def resend(session: Session, name: str, batch_id: str, actor: str) -> str:
    """Send a batch again: a push batch its partner took and lost is pushed anew (its retries
    start over); a pull batch held under a lease is given back to be claimed. Its state."""
    definition(name)
    batch = repository.lock_batch(session, batch_id)
    if batch is None or batch.oracle != name:
        raise UnknownBatchError(f"no batch {batch_id!r} of oracle {name!r}")
    now = utcnow()
    if batch.mode == "push" and batch.state == "sent":
        batch.state, batch.retry_from, batch.next_attempt_at = "sending", now, now
        batch.busy_until = None
        message = OutboxMessage(
            task=PUSH_TASK, args=[batch.id], queue=queue_for(name), eta=None, created_at=now
        )
        outbox.stage(session, [message])
        after_commit(session, [dispatch.Outgoing([message])])
    elif batch.mode == "pull" and batch.state in ("open", "leased"):
        batch.state, batch.lease_id, batch.lease_expires_at = "open", None, None
    else:
        raise NotResendableError(
            f"batch {batch_id!r} is {batch.state}: only a pushed batch the partner took (sent) "
            "or a pull batch not done can be sent again",
        )
    log.info("oracle batch resent", oracle=name, batch=batch_id, by=actor)
    return batch.state
