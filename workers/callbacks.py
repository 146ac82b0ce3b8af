"""Thin task of the `callbacks` queue: one webhook delivery attempt."""

from __future__ import annotations

from verifier_service.core.db import with_retries
from verifier_service.events import webhooks
from verifier_service.settings import get_settings
from workers.celery_app import app


@app.task(name=webhooks.DELIVER_TASK, acks_late=True)
def deliver_callback(delivery_id: str) -> None:
    """POST one job event to its callback; a failure schedules the next attempt itself."""
    with_retries(lambda: webhooks.attempt(delivery_id), retries=get_settings().worker.db_retries)
