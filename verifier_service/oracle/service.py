"""The oracle domain's logic: items the ladder hands to an oracle wait for selection within its
capacity; the chosen ones travel in batches (pushed, or claimed under a lease); results come
back idempotently and become the oracle tier's verdicts, or revise a fallback reward.

Lock order, as the review queue keeps it: a job (ladder.repository.lock_job) before any
oracle row of its items, so that a job's deadline and a result never deadlock.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import event
from sqlalchemy.orm import Session

from tiers.oracle import (
    OracleDefinition,
    OracleStepConfig,
    failure_verdict,
    result_errors,
    result_verdict,
)
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core import outbox
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.errors import InvalidRequestError
from verifier_service.core.outbox import OutboxMessage
from verifier_service.ladder import dispatch
from verifier_service.ladder import repository as ladder_repository
from verifier_service.ladder.answers import record_deferred
from verifier_service.ladder.deferred import Closing, DeferredWork
from verifier_service.ladder.models import JOB_FINISHED, Item, VerdictRecord
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.service import LadderPass
from verifier_service.ladder.states import ItemState, Stop, StopKind
from verifier_service.oracle import repository
from verifier_service.oracle.errors import (
    LeaseLostError,
    NotResendableError,
    NotThisOraclesError,
    ResultConflictError,
    UnknownBatchError,
    UnknownItemError,
    UnknownOracleError,
    WrongModeError,
)
from verifier_service.oracle.models import OracleBatch, OracleControl, OracleItem, new_id
from verifier_service.oracle.schemas import (
    BatchItemOut,
    BatchOut,
    ClaimOut,
    ResultsIn,
    ResultsOut,
)
from verifier_service.policies.service import resolve
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)

SELECT_TASK = "oracle.select"
PUSH_TASK = "oracle.push"


def queue_for(oracle: str) -> str:
    """The Celery queue of one oracle's tasks (selection, pushes): a partner that is slow or
    down holds up its own queue, not the webhooks' or another oracle's. A worker of the
    `callbacks` queue takes every oracle's queue too unless told which (see `oracle_queues`)."""
    return f"oracle.{oracle}"


def oracle_queues(wanted: list[str], oracles: Iterable[str]) -> list[str]:
    """A worker's queues with the oracles' added: a worker that takes `callbacks` and names no
    `oracle.*` queue itself also takes each defined oracle's."""
    if "callbacks" not in wanted or any(q.startswith("oracle.") for q in wanted):
        return wanted
    return [*wanted, *(queue_for(name) for name in sorted(oracles))]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- definitions and access


def definitions() -> dict[str, OracleDefinition]:
    return get_settings().oracles.definitions


def definition(name: str) -> OracleDefinition:
    found = definitions().get(name)
    if found is None:
        raise UnknownOracleError(
            f"no oracle {name!r}", hint="oracles are defined in VERIFIER_ORACLES__DEFINITIONS"
        )
    return found


def serving(name: str, principal: AuthenticatedPrincipal) -> OracleDefinition:
    """The oracle `name`, if `principal` (role oracle) is the one that serves it (or the local
    admin of a deployment run without auth, which trusts every local caller)."""
    found = definition(name)
    if principal.via != "local" and principal.name != (found.principal or name):
        raise NotThisOraclesError(f"this key does not serve oracle {name!r}")
    return found


def period_start(now: datetime, period_s: float) -> datetime:
    """Start of the capacity period `now` falls in (periods count from the epoch, UTC)."""
    elapsed = (now - EPOCH).total_seconds()
    return EPOCH + timedelta(seconds=elapsed - elapsed % period_s)


def after_commit(session: Session, outgoing: Sequence[dispatch.Outgoing]) -> None:
    """Send staged work (and wake a job's waiters) once this transaction commits; the outbox
    keeps it should this process die first."""
    todo = [o for o in outgoing if o.messages or o.finished_jobs or o.event_jobs]
    if not todo:
        return

    def _after(_session: Session) -> None:
        for one in todo:
            try:
                dispatch.deliver(one)
            except Exception:  # the sweeper sends what is still in the outbox
                log.exception("could not deliver oracle work after commit")

    event.listen(session, "after_commit", _after, once=True)


def _select_message(name: str, at: datetime) -> OutboxMessage:
    return OutboxMessage(
        task=SELECT_TASK, args=[name], queue=queue_for(name), eta=at, created_at=utcnow()
    )


# ---------------------------------------------------------------- from the ladder


def _value(records: Sequence[VerdictRecord], select_by: str) -> float | None:
    field = "uncertainty" if select_by == "uncertainty" else "score"
    values = [v for r in records if (v := getattr(r, field)) is not None]
    return max(values) if values else None


def enqueue(session: Session, work: DeferredWork) -> str:
    """Items the ladder sends to an oracle wait for selection (in the ladder's transaction);
    the reason their pending reward shows."""
    config = OracleStepConfig.model_validate(work.config)
    found = definition(config.oracle)
    now = utcnow()
    for item in work.items:
        candidate = item.candidate
        session.add(
            OracleItem(
                id=new_id("oi_"), oracle=config.oracle, item_id=item.id, job_id=work.job.id,
                step=work.step, kind=item.kind, payload=candidate.get("payload") or {},
                reference=candidate.get("reference"), state="queued", created_at=now,
                value=_value(work.verdicts.get(item.id, []), config.select_by),
            )
        )  # fmt: skip
    _charge(session, [i.id for i in work.items], work.step, found.price_per_item)
    message = _select_message(config.oracle, now + timedelta(seconds=found.gather_s))
    outbox.stage(session, [message])
    after_commit(session, [dispatch.Outgoing([message])])
    days = found.turnaround_s / 86400
    return f"waiting for oracle {config.oracle} (expected within {days:.3g} days)"


def _charge(session: Session, item_ids: Sequence[str], step: int, units: float) -> None:
    """An item sent to an oracle costs the oracle's price (the ledger's entry for the step,
    made at the tier's cost class when the item climbed); one capacity left out costs 0."""
    for entry in ladder_repository.ledger_entries(session, item_ids, step):
        if not entry.cached:
            entry.cost_units = units


def close(
    session: Session, items: Sequence[Item], config: dict[str, Any], *, cancelled: bool
) -> Closing:
    """The items stop waiting (the job's deadline, a cancel, or capacity left them out): what
    their reward falls back to, and whether a later result revises it."""
    step = OracleStepConfig.model_validate(config)
    steps = {i.id: i.step for i in items}
    still_open = False
    for row in repository.items_of_ladder_items(session, list(steps)):
        if steps[row.item_id] != row.step or row.state not in ("queued", "batched"):
            continue
        if cancelled or not step.keep_open_after_deadline:
            row.state = "withdrawn"  # its result, if one comes, is kept but revises nothing
        else:
            still_open = True
    return Closing(step.on_deadline, still_open=still_open)


# ---------------------------------------------------------------- selection and batches


def select(name: str) -> int:
    """Batch the items waiting for `name` within what is left of its capacity this period,
    highest value first; the rest finish now with their step's fallback ("not selected: NAME
    capacity"). How many were batched."""
    found = definitions().get(name)
    if found is None:
        log.error("oracle items wait for an oracle that is not defined", oracle=name)
        return 0
    now = utcnow()
    left_out: dict[str, list[OracleItem]] = defaultdict(list)
    with transaction() as session:
        if paused(session, name):
            return 0  # items wait (their jobs' deadlines give them a fallback meanwhile)
        used = repository.selected_since(session, name, period_start(now, found.period_s))
        waiting = repository.queued(session, name, now - timedelta(seconds=found.gather_s))
        room = max(0, found.capacity - used)
        chosen, overflow = waiting[:room], waiting[room:]
        messages = []
        for start in range(0, len(chosen), found.batch_size):
            batch = OracleBatch(
                id=new_id("ob_"), oracle=name, mode=found.mode, created_at=now,
                state="sending" if found.mode == "push" else "open",
                due_at=now + timedelta(seconds=found.turnaround_s),
                next_attempt_at=now if found.mode == "push" else None,
            )  # fmt: skip
            session.add(batch)
            for row in chosen[start : start + found.batch_size]:
                row.state, row.batch_id, row.selected_at = "batched", batch.id, now
                row.tries += 1
            if found.mode == "push":
                messages.append(
                    OutboxMessage(
                        task=PUSH_TASK,
                        args=[batch.id],
                        queue=queue_for(name),
                        eta=None,
                        created_at=now,
                    )
                )
        for row in overflow:
            row.state = "not_selected"
            left_out[row.job_id].append(row)
        outbox.stage(session, messages)
    dispatch.deliver(dispatch.Outgoing(messages))
    for job_id, rows in left_out.items():
        with transaction() as session:
            outgoing = dispatch.stage(session, _leave_out(session, job_id, rows, name))
        dispatch.deliver(outgoing)
    if chosen or overflow:
        log.info("oracle selection", oracle=name, batched=len(chosen), left_out=len(overflow))
    return len(chosen)


def _leave_out(
    session: Session, job_id: str, rows: Sequence[OracleItem], name: str
) -> LadderResult:
    """Items capacity left out finish now with their step's fallback reward."""
    job = ladder_repository.lock_job(session, job_id)
    if job is None or job.status in JOB_FINISHED:
        return LadderResult()
    steps = {r.item_id: r.step for r in rows}
    items = [
        i
        for i in ladder_repository.items_by_id(session, list(steps))
        if i.state == ItemState.deferred and i.step == steps[i.id]
    ]
    for step in {i.step for i in items}:
        _charge(session, [i.id for i in items if i.step == step], step, 0.0)
    ladder = LadderPass(session, job, resolve(session, job.policy_name, job.policy_version))
    ladder.end(items, Stop(StopKind.budget_exhausted, f"not selected: {name} capacity"))
    return ladder.result


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


# ---------------------------------------------------------------- results


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
        message = _select_message(name, now)
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


# ---------------------------------------------------------------- operators' controls


def paused(session: Session, name: str) -> bool:
    control = session.get(OracleControl, name)
    return bool(control is not None and control.paused)


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
        message = _select_message(name, now)
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
