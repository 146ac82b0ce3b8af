"""Thin, idempotent Celery tasks: load ids, call one service function, store, hand back."""

from __future__ import annotations

from typing import Any

from celery import Task

from tiers.registry import TIER_PATHS
from verifier_service.core.db import transaction
from verifier_service.ladder.service import (
    advance_job,
    expire_job,
    prepare_tier_run,
    record_tier_run,
    run_tier,
)
from workers import dispatch
from workers.celery_app import app


@app.task(name="ladder.advance", acks_late=True)
def ladder_advance(job_id: str) -> None:
    """Advance every open item of a job (first pass, recovery)."""
    with transaction() as session:
        outgoing = dispatch.stage(session, advance_job(session, job_id))
    dispatch.deliver(outgoing)


@app.task(name="ladder.expire", acks_late=True)
def ladder_expire(job_id: str) -> None:
    """A job's deadline: finish its open items with the best reward available."""
    with transaction() as session:
        outgoing = dispatch.stage(session, expire_job(session, job_id))
    dispatch.deliver(outgoing)


def verify(tier_name: str, kind: str, step: int, item_ids: list[str]) -> None:
    """Run one tier over a batch of items of one job and hand the items back to the ladder."""
    with transaction() as session:
        run = prepare_tier_run(session, tier_name, kind, step, item_ids)
    if run is None:
        return
    keys = list(run.candidates)
    # The tier runs outside any transaction: it may take minutes and must not hold locks.
    verdicts = run_tier(tier_name, [run.candidates[k] for k in keys], run.config)
    with transaction() as session:
        result = record_tier_run(session, run, dict(zip(keys, verdicts, strict=True)), item_ids)
        outgoing = dispatch.stage(session, result)
    dispatch.deliver(outgoing)


def _make_tier_task(tier_name: str) -> Task[Any, Any]:
    def run(kind: str, step: int, item_ids: list[str]) -> None:
        verify(tier_name, kind, step, item_ids)

    run.__name__ = run.__qualname__ = f"verify_{tier_name.replace('.', '_')}"
    run.__doc__ = f"Verify a batch of items with the {tier_name} tier."
    task: Task[Any, Any] = app.task(name=dispatch.tier_task_name(tier_name), acks_late=True)(run)
    return task


TIER_TASKS = {name: _make_tier_task(name) for name in TIER_PATHS}
