"""The request id (and job id) that travel from the API into the Celery tasks a request causes.

Whoever sends a task (the API, or a task sending the next tier's work) copies the ids bound in
its structlog context into the message's headers; the worker binds them back for the task's
logs (`workers.observability`), so one id finds a request's lines in every process. Sending a
task also counts `celery_task_sent_total`.
"""

from __future__ import annotations

from typing import Any

import structlog
from celery.signals import before_task_publish

from verifier_service.metrics.registry import enabled, metrics

#: Context keys that travel in task headers.
CARRIED = ("request_id", "job_id")


def current_request_id() -> str | None:
    """The request id bound in this context (an API request, or a task it caused)."""
    value = structlog.contextvars.get_contextvars().get("request_id")
    return value if isinstance(value, str) else None


def carried_context(headers: dict[str, Any] | None) -> dict[str, str]:
    """The carried ids found in a task's headers (strings only)."""
    found = headers or {}
    return {key: found[key] for key in CARRIED if isinstance(found.get(key), str)}


def install() -> None:
    """Connect the publish hook in this process (idempotent)."""
    before_task_publish.connect(_on_publish, weak=False, dispatch_uid="verifier.propagation")


def _on_publish(
    sender: str | None = None,
    headers: dict[str, Any] | None = None,
    routing_key: str | None = None,
    **_: Any,
) -> None:
    """Copy the carried ids into a task's headers, and count the task as sent."""
    if headers is not None:
        bound = structlog.contextvars.get_contextvars()
        for key in CARRIED:
            value = bound.get(key)
            if isinstance(value, str):
                headers.setdefault(key, value)
    if enabled():
        name = str(sender or (headers or {}).get("task") or "unknown")
        metrics().task_sent.labels(name, routing_key or "").inc()
