"""From the ladder to a batch: items the ladder hands to an oracle wait for selection (with
the oracle's price charged), `select` batches them within the oracle's capacity this period,
highest value first, and what capacity leaves out finishes with its step's fallback reward;
`close` is what a job's deadline or a cancel does to items still waiting.

Lock order, as the review queue keeps it: a job (ladder.repository.lock_job) before any
oracle row of its items, so that a job's deadline and a result never deadlock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import structlog
from sqlalchemy.orm import Session

from tiers.oracle import OracleStepConfig
from verifier_service.core import outbox
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.outbox import OutboxMessage
from verifier_service.ladder import dispatch
from verifier_service.ladder import repository as ladder_repository
from verifier_service.ladder.deferred import Closing, DeferredWork
from verifier_service.ladder.models import JOB_FINISHED, Item, VerdictRecord
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.service import LadderPass
from verifier_service.ladder.states import ItemState, Stop, StopKind
from verifier_service.oracle import repository
from verifier_service.oracle.access import (
    PUSH_TASK,
    after_commit,
    definition,
    definitions,
    paused,
    period_start,
    queue_for,
    select_message,
)
from verifier_service.oracle.models import OracleBatch, OracleItem, new_id
from verifier_service.policies.service import resolve

log = structlog.get_logger(__name__)


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
    message = select_message(config.oracle, now + timedelta(seconds=found.gather_s))
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
