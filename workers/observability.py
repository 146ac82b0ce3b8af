"""Worker side of observability: Celery's task signals counted as the Celery exporter names
them, the request id of the task's message bound into its logs, the host's metrics served on a
port of the worker's main process when configured, and traces when configured."""

from __future__ import annotations

import os
import time
from typing import Any

import structlog
from celery.signals import (
    task_failure,
    task_postrun,
    task_prerun,
    task_received,
    task_retry,
    task_success,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
)
from prometheus_client import start_http_server
from prometheus_client.multiprocess import mark_process_dead

from verifier_service.metrics import propagation, tracing
from verifier_service.metrics.registry import collect_registry, enabled, metrics, setup
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)

setup(get_settings())
propagation.install()

#: When each task running in this process started (by task id), for its runtime.
_started: dict[str, float] = {}


def _queue(request: Any) -> str:
    info = getattr(request, "delivery_info", None) or {}
    return str(info.get("routing_key") or "")


def _name(task: Any) -> str:
    return str(getattr(task, "name", None) or "unknown")


@task_received.connect
def _received(request: Any = None, **_: Any) -> None:
    if enabled() and request is not None:
        metrics().task_received.labels(str(request.name), _queue(request)).inc()


@task_prerun.connect
def _prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    request = getattr(task, "request", None)
    carried = propagation.carried_context(getattr(request, "__dict__", None))
    structlog.contextvars.bind_contextvars(task_id=task_id, task=_name(task), **carried)
    if task_id is not None:
        _started[task_id] = time.perf_counter()
    if enabled():
        metrics().task_started.labels(_name(task), _queue(request)).inc()


@task_success.connect
def _success(sender: Any = None, **_: Any) -> None:
    if enabled():
        metrics().task_succeeded.labels(_name(sender), _queue(sender.request)).inc()


@task_failure.connect
def _failure(sender: Any = None, **_: Any) -> None:
    if enabled():
        metrics().task_failed.labels(_name(sender), _queue(sender.request)).inc()


@task_retry.connect
def _retry(sender: Any = None, request: Any = None, **_: Any) -> None:
    if enabled():
        metrics().task_retried.labels(_name(sender), _queue(request)).inc()


@task_postrun.connect
def _postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    began = _started.pop(task_id, None) if task_id is not None else None
    runtime = time.perf_counter() - began if began is not None else None
    if enabled() and runtime is not None:
        metrics().task_runtime.labels(_name(task), _queue(task.request)).observe(runtime)
    log.info("task finished", state=state, runtime_s=round(runtime or 0.0, 4))
    structlog.contextvars.unbind_contextvars("task_id", "task", *propagation.CARRIED)


@worker_process_init.connect
def _trace_process(**_: Any) -> None:
    # After the fork: the span exporter's thread does not survive one.
    tracing.setup(get_settings(), celery=True)


@worker_process_shutdown.connect
def _process_dead(**_: Any) -> None:
    # Live gauges of a pool process that leaves must not be summed any more (counters and
    # histograms stay: they are what the host counted).
    if enabled():
        mark_process_dead(os.getpid(), str(get_settings().metrics_dir))


@worker_ready.connect
def _serve_metrics(**_: Any) -> None:
    settings = get_settings()
    if enabled() and settings.metrics.worker_port is not None:
        registry = collect_registry(settings.metrics_dir)
        start_http_server(settings.metrics.worker_port, settings.metrics.worker_host, registry)
        log.info("metrics served", port=settings.metrics.worker_port)
