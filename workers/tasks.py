"""Thin, idempotent Celery tasks: load ids, call one service function, store, hand back.

A tier task survives what goes wrong around it: a database that is away for a moment (its
transactions are retried with backoff, then its items end as infra_error with the cause), and
items that kill the worker running them (a batch delivered again is split into one task per
item; an item delivered more than `max_deliveries` times ends as infra_error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from celery import Task
from sqlalchemy.orm import Session

from tiers.registry import TIER_PATHS
from verifier_service.core.db import retried_transaction
from verifier_service.core.notify import sync_client
from verifier_service.ladder import dispatch
from verifier_service.ladder.execute import TierRun, execute, sent_keys
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.runs import (
    fail_tier_run,
    prepare_tier_run,
    record_tier_run,
    split_tier_run,
)
from verifier_service.ladder.states import Stop, StopKind
from verifier_service.settings import get_settings
from workers.celery_app import app

log = structlog.get_logger(__name__)

#: Deliveries of a task (by id) are counted here, for a day.
DELIVERIES = "verifier:deliveries:"


@app.task(name="ladder.expire", acks_late=True)
def ladder_expire(job_id: str) -> None:
    """A job's deadline: finish its open items with the best reward available."""
    dispatch.expire(job_id, retries=get_settings().worker.db_retries)


def _deliveries(task_id: str | None) -> int:
    """How many times this task has been delivered, this delivery included."""
    if task_id is None:
        return 1
    client = sync_client(get_settings().broker_url)
    pipe = client.pipeline()
    pipe.incr(DELIVERIES + task_id)
    pipe.expire(DELIVERIES + task_id, 86_400)
    count, _ = pipe.execute()
    return int(count)


def _commit(work: Callable[[Session], LadderResult]) -> None:
    """Stage a ladder pass's result in its transaction (retried), then send it."""
    dispatch.commit_then_send(
        lambda session: dispatch.stage(session, work(session)),
        retries=get_settings().worker.db_retries,
        first_delay_s=0.5,
    )


def verify(
    tier_name: str,
    kind: str,
    step: int,
    item_ids: list[str],
    *,
    keys: list[str] | None = None,
    tier_version: str | None = None,
    task_id: str | None = None,
    worker: str | None = None,
) -> None:
    """Run one tier over a batch of items of one job and hand the items back to the ladder.

    `keys` (with the `tier_version` they were derived under) are the items' cache keys as the
    sending pass derived them; taken when this worker runs the same tier version, else the
    items are keyed here."""
    settings = get_settings().worker
    delivered = _deliveries(task_id)
    if delivered > 1 and len(item_ids) > 1:
        log.warning("tier task delivered again: splitting its batch", tier=tier_name, n=delivered)
        _commit(lambda session: split_tier_run(session, step, item_ids))
        return
    if delivered > settings.max_deliveries:
        stop = Stop(
            StopKind.lost,
            f"{tier_name} work on this item ended its worker process {delivered - 1} times "
            "(a crash, or killed for memory or time); it is not tried again",
        )
        log.error("poison tier task: giving up", tier=tier_name, items=item_ids, n=delivered)
        _commit(lambda session: fail_tier_run(session, step, item_ids, stop))
        return

    known = sent_keys(tier_name, item_ids, keys, tier_version)

    def prepare(session: Session) -> TierRun | None:
        return prepare_tier_run(session, tier_name, kind, step, item_ids, worker, known)

    try:
        run = retried_transaction(prepare, retries=settings.db_retries, first_delay_s=0.5)
        if run is None:
            return
        # The tier runs outside any transaction: it may take minutes and must not hold locks.
        verdicts = execute(run)
        _commit(lambda session: record_tier_run(session, run, verdicts, item_ids))
    except Exception as exc:  # the database stayed away, or a bug: the items must still end
        log.exception("tier task failed; its items end as infra_error", tier=tier_name)
        stop = Stop(StopKind.lost, f"{tier_name} task failed: {type(exc).__name__}")
        _commit(lambda session: fail_tier_run(session, step, item_ids, stop))


def _make_tier_task(tier_name: str) -> Task[Any, Any]:
    def run(
        self: Task[Any, Any],
        kind: str,
        step: int,
        item_ids: list[str],
        keys: list[str] | None = None,
        tier_version: str | None = None,
    ) -> None:
        verify(
            tier_name, kind, step, item_ids, keys=keys, tier_version=tier_version,
            task_id=self.request.id, worker=self.request.hostname,
        )  # fmt: skip

    run.__name__ = run.__qualname__ = f"verify_{tier_name.replace('.', '_')}"
    run.__doc__ = f"Verify a batch of items with the {tier_name} tier."
    task: Task[Any, Any] = app.task(
        name=dispatch.tier_task_name(tier_name), acks_late=True, bind=True
    )(run)
    return task


TIER_TASKS = {name: _make_tier_task(name) for name in TIER_PATHS}
