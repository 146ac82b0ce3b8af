"""A batch at its partner and what comes back: the batch as the partner gets it, claims and
their leases (pull oracles), results taken whole or not at all, each becoming its item's verdict
or revising the fallback reward it took, and a pushed batch that never arrived failing its items.

Lock order, as the review queue keeps it: a job (ladder.repository.lock_job) before any
oracle row of its items, so that a job's deadline and a result never deadlock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.orm import Session

from tiers.oracle import OracleDefinition, failure_verdict, result_errors, result_verdict
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core import outbox
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.errors import InvalidRequestError
from verifier_service.ladder import dispatch
from verifier_service.ladder import repository as ladder_repository
from verifier_service.ladder.answers import record_deferred
from verifier_service.oracle import repository
from verifier_service.oracle.access import after_commit, paused, select_message, serving
from verifier_service.oracle.errors import (
    LeaseLostError,
    ResultConflictError,
    UnknownBatchError,
    UnknownItemError,
    WrongModeError,
)
from verifier_service.oracle.models import OracleBatch, OracleItem, new_id
from verifier_service.oracle.schemas import BatchItemOut, BatchOut, ClaimOut, ResultsIn, ResultsOut

log = structlog.get_logger(__name__)


def batch_out(session: Session, batch: OracleBatch, found: OracleDefinition, base: str) -> BatchOut:
    """A batch as the partner gets it: its items that have no result yet."""
    rows = [r for r in repository.batch_items(session, batch.id) if r.result is None]
    return BatchOut(
        oracle=batch.oracle,
        batch_id=batch.id,
        created_at=batch.created_at,
        due_at=batch.due_at,
        result_schema={k: v.model_dump() for k, v in found.result_schema.items()},
        results_url=f"{base.rstrip('/')}/v1/oracles/{batch.oracle}/results",
        items=[
            BatchItemOut(item_id=r.id, kind=r.kind, payload=r.payload, reference=r.reference)
            for r in rows
        ],
    )


def claim(
    session: Session, name: str, principal: AuthenticatedPrincipal, base: str
) -> ClaimOut | None:
    """Lease the oldest batch of a pull oracle nobody holds (None: nothing waits)."""
    found = serving(name, principal)
    if found.mode != "pull":
        raise WrongModeError(f"oracle {name!r} is a push oracle: its batches are sent to it")
    now = utcnow()
    if paused(session, name):
        return None
    batch = repository.claimable(session, name, now)
    if batch is None:
        return None
    if batch.state == "leased":
        log.warning("oracle lease expired: batch claimed again", batch=batch.id,
                    was=batch.claimed_by)  # fmt: skip
    batch.state, batch.lease_id = "leased", uuid.uuid4().hex
    batch.lease_expires_at = now + timedelta(seconds=found.lease_s)
    batch.claimed_by, batch.claims = principal.key_id or principal.name, batch.claims + 1
    return ClaimOut(
        lease_id=batch.lease_id,
        lease_expires_at=batch.lease_expires_at,
        batch=batch_out(session, batch, found, base),
    )


def heartbeat(
    session: Session, name: str, principal: AuthenticatedPrincipal, batch_id: str, lease_id: str
) -> datetime:
    """Keep a claim's lease; its new expiry."""
    found = serving(name, principal)
    batch = repository.lock_batch(session, batch_id)
    if batch is None or batch.oracle != name:
        raise UnknownBatchError(f"no batch {batch_id!r} of oracle {name!r}")
    if batch.state != "leased" or batch.lease_id != lease_id:
        raise LeaseLostError(
            f"lease {lease_id!r} no longer holds batch {batch_id!r}",
            hint="the lease expired and the batch was claimed again (or is done); claim again",
        )
    batch.lease_expires_at = utcnow() + timedelta(seconds=found.lease_s)
    return batch.lease_expires_at


def _check(
    name: str, found: OracleDefinition, body: ResultsIn, rows: dict[str, OracleItem]
) -> None:
    """Refuse the whole request for an item that is not this oracle's (404) or values that do
    not fit the result schema (422 naming the field)."""
    for i, result in enumerate(body.results):
        row = rows.get(result.item_id)
        if row is None or row.oracle != name or row.batch_id is None:
            raise UnknownItemError(
                f"results[{i}].item_id: no item {result.item_id!r} was sent to oracle {name!r}",
                field=f"results[{i}].item_id",
            )
    errors = [
        {"loc": f"results[{i}].values.{field}", "msg": message, "type": "value_error"}
        for i, result in enumerate(body.results)
        if result.values is not None
        for field, message in result_errors(found, result.values)
    ]
    if errors:
        first = errors[0]
        raise InvalidRequestError(f"{first['loc']}: {first['msg']}", errors=errors)


def record_results(
    session: Session, name: str, principal: AuthenticatedPrincipal, body: ResultsIn
) -> ResultsOut:
    """Take results (whole, or not at all): each becomes its item's verdict, or revises the
    fallback reward its item took; one posted again is a duplicate, a different one a 409."""
    found = serving(name, principal)
    ids = [r.item_id for r in body.results]
    _check(name, found, body, {r.id: r for r in repository.items_by_id(session, ids)})
    for job_id in sorted({r.job_id for r in repository.items_by_id(session, ids)}):
        ladder_repository.lock_job(session, job_id)
    rows = {r.id: r for r in repository.items_by_id(session, ids, lock=True)}
    now, accepted, duplicates, select_again = utcnow(), 0, 0, False
    outgoing: list[dispatch.Outgoing] = []
    for i, result in enumerate(body.results):
        row = rows[result.item_id]
        content: dict[str, Any] = (
            {"values": result.values} if result.values is not None else {"error": result.error}
        )
        if row.result is not None:
            if row.result == content:
                duplicates += 1
                continue
            raise ResultConflictError(
                f"results[{i}]: item {row.id!r} already has a different result",
                field=f"results[{i}]", recorded=row.result,
            )  # fmt: skip
        row.result, row.answered_at = content, now
        accepted += 1
        delivers = row.state == "batched"
        if result.error is not None:
            if delivers and found.on_failure == "retry_once" and row.tries < 2:
                row.state = "failed"
                session.add(_retry_of(row, now))
                select_again = True
                continue
            row.state = "failed" if delivers else row.state
            verdict = failure_verdict(name, "measurement_failed", result.error)
        else:
            row.state = "answered" if delivers else row.state
            verdict = result_verdict(name, found, result.values or {})
        if delivers:
            ladder = record_deferred(session, row.item_id, verdict, row.step)
            outgoing.append(dispatch.stage(session, ladder))
    _finish_batches(session, {r.batch_id for r in rows.values() if r.batch_id}, now)
    if select_again:
        message = select_message(name, now)
        outbox.stage(session, [message])
        outgoing.append(dispatch.Outgoing([message]))
    after_commit(session, outgoing)
    return ResultsOut(accepted=accepted, duplicates=duplicates)


def _retry_of(row: OracleItem, now: datetime) -> OracleItem:
    """A failed measurement tried once more: the item waits for the next selection."""
    return OracleItem(
        id=new_id("oi_"), oracle=row.oracle, item_id=row.item_id, job_id=row.job_id,
        step=row.step, kind=row.kind, payload=row.payload, reference=row.reference,
        value=row.value, state="queued", tries=row.tries, created_at=now,
    )  # fmt: skip


def _finish_batches(session: Session, batch_ids: Iterable[str], now: datetime) -> None:
    for batch_id in sorted(batch_ids):
        batch = repository.lock_batch(session, batch_id)
        if batch is None or batch.state in ("done", "failed"):
            continue
        if all(r.result is not None for r in repository.batch_items(session, batch_id)):
            batch.state, batch.finished_at, batch.lease_id = "done", now, None


def fail_batch(batch_id: str, reason: str, detail: str) -> None:
    """A batch that never reached its partner: each item still waiting gets an error verdict
    that says so (one transaction per job, the job locked first)."""
    with transaction() as session:
        rows = [r for r in repository.batch_items(session, batch_id) if r.state == "batched"]
        jobs = sorted({r.job_id for r in rows})
    for job_id in jobs:
        with transaction() as session:
            ladder_repository.lock_job(session, job_id)
            mine = [
                r
                for r in repository.items_by_id(session, [r.id for r in rows], lock=True)
                if r.job_id == job_id and r.state == "batched"
            ]
            staged = []
            for row in mine:
                row.state = "failed"
                verdict = failure_verdict(row.oracle, reason, detail)
                ladder = record_deferred(session, row.item_id, verdict, row.step)
                staged.append(dispatch.stage(session, ladder))
        for one in staged:
            dispatch.deliver(one)
