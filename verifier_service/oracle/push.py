"""Push: one attempt to deliver a batch to its partner's URL, signed as our webhooks are, each
attempt recorded; a failed one is retried with exponential backoff (a new outbox message with
an ETA) until the oracle's `retry_for_s`, then the batch's items end with an error verdict."""

from __future__ import annotations

import time
from datetime import timedelta

import structlog

from verifier_service.core import outbox
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.outbox import OutboxMessage
from verifier_service.events.webhooks import backoff_s, post_signed
from verifier_service.oracle import repository, service
from verifier_service.oracle.models import OracleAttempt
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)


def attempt(batch_id: str) -> str | None:
    """Make the next push attempt of a batch (the `oracle.push` task); its state after, or None
    when there was nothing to do (sent already, or another copy of the task has it)."""
    base = service.definitions()
    with transaction() as session:
        batch = repository.lock_batch(session, batch_id)
        now = utcnow()
        if batch is None or batch.state != "sending":
            return None
        found = base.get(batch.oracle)
        if found is None or found.mode != "push":
            log.error("oracle batch not pushed: its oracle is not a push oracle here",
                      oracle=batch.oracle)  # fmt: skip
            return None
        if batch.busy_until is not None and batch.busy_until > now:
            return None  # a second copy of the task while the first is sending
        if batch.next_attempt_at is not None and batch.next_attempt_at > now + timedelta(seconds=1):
            return None  # an early copy: the scheduled message comes at next_attempt_at
        public = get_settings().oracles.public_url
        body = service.batch_out(session, batch, found, public).model_dump_json().encode()
        batch.busy_until = now + timedelta(seconds=found.timeout_s + 30)
        number, created_at = batch.attempts + 1, batch.retry_from or batch.created_at

    started, clock = utcnow(), time.perf_counter()
    assert found.url is not None
    assert found.secret is not None
    secret = found.secret.get_secret_value()
    status_code, error = post_signed(found.url, batch_id, body, secret, found.timeout_s)
    duration_ms = (time.perf_counter() - clock) * 1000

    retry: OutboxMessage | None = None
    with transaction() as session:
        batch = repository.lock_batch(session, batch_id)
        assert batch is not None
        now = utcnow()
        batch.attempts, batch.busy_until = number, None
        session.add(
            OracleAttempt(
                batch_id=batch_id, number=number, started_at=started, status_code=status_code,
                error=error, duration_ms=round(duration_ms, 3),
            )
        )  # fmt: skip
        wait_s = backoff_s(number, found.retry_first_s, found.retry_max_s)
        next_at = now + timedelta(seconds=wait_s)
        if error is None:
            batch.state, batch.sent_at, batch.next_attempt_at = "sent", now, None
        elif next_at > created_at + timedelta(seconds=found.retry_for_s):
            batch.state, batch.finished_at, batch.next_attempt_at = "failed", now, None
        else:
            batch.next_attempt_at = next_at
            retry = OutboxMessage(task=service.PUSH_TASK, args=[batch_id],
                                  queue=service.queue_for(batch.oracle), eta=next_at,
                                  created_at=now)  # fmt: skip
            outbox.stage(session, [retry])
        state = batch.state
    if retry is not None:
        sent = outbox.send([retry])
        if sent:
            with transaction() as session:
                outbox.forget(session, sent)
    log.info("oracle push attempt", batch=batch_id, number=number, code=status_code,
             error=error, state=state)  # fmt: skip
    if state == "failed":
        service.fail_batch(
            batch_id, "oracle_unreachable",
            f"batch {batch_id} could not be delivered in {found.retry_for_s:g} s "
            f"({number} attempts; last: {error})",
        )  # fmt: skip
    return state
