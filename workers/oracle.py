"""Thin tasks of the oracle tier (each oracle's own queue, `oracle.NAME`): select items within
an oracle's capacity into batches, and push one batch to its partner."""

from __future__ import annotations

from verifier_service.core.db import with_retries
from verifier_service.oracle import push, service
from verifier_service.settings import get_settings
from workers.celery_app import app


@app.task(name=service.SELECT_TASK, acks_late=True)
def select_items(oracle: str) -> None:
    """Batch the items waiting for an oracle; those capacity leaves out take their fallback."""
    with_retries(lambda: service.select(oracle), retries=get_settings().worker.db_retries)


@app.task(name=service.PUSH_TASK, acks_late=True)
def push_batch(batch_id: str) -> None:
    """POST one batch to its partner; a failure schedules the next attempt itself."""
    with_retries(lambda: push.attempt(batch_id), retries=get_settings().worker.db_retries)
