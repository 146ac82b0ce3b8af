"""The Celery application: one queue per tier family, late acks, JSON only."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import Celery
from celery.signals import celeryd_after_setup, worker_process_init, worker_process_shutdown
from kombu.entity import Queue

from verifier_service.settings import Settings, get_settings

QUEUES = ("ladder", "tier.fast", "tier.sim", "tier.hifi", "tier.sandbox", "review", "callbacks")


def make_celery(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    app = Celery("verifier_service", include=["workers.tasks"])
    app.conf.update(
        broker_url=settings.broker_url,
        # Results live in the database; no result backend (its Redis subscription per sent
        # task cost a round trip each, and a broker outage left it broken for good).
        result_backend=None,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        task_default_queue="ladder",
        task_queues=[Queue(name) for name in QUEUES],
        task_time_limit=settings.worker.task_time_limit_s,
        worker_prefetch_multiplier=settings.worker.prefetch_multiplier,
        worker_concurrency=settings.worker.concurrency,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.worker.visibility_timeout_s,
            # Check for work of dead workers every few polls instead of every 10th.
            "unacked_restore_throttle": 1,
        },
    )
    return app


app = make_celery()

from workers import presence  # noqa: E402, F401 - connects the worker presence signals

#: The queues this worker consumes (set in the worker's main process, inherited by its children).
_consumed: set[str] = set()


@celeryd_after_setup.connect
def _remember_queues(instance: Any = None, **_: Any) -> None:
    _consumed.update(instance.app.amqp.queues.consume_from or {})


@worker_process_init.connect
def _fresh_connections(**_: Any) -> None:
    # A forked pool process must not share the parent's database connections.
    from verifier_service.core.db import reset_engine_cache

    reset_engine_cache()
    if "tier.sandbox" in _consumed:
        # Warm the sandbox pool now, so that the first batch of candidates finds it full;
        # in a thread, as Celery gives a process only seconds to initialise.
        threading.Thread(target=_warm_sandbox_pool, name="sandbox-warm", daemon=True).start()


@worker_process_shutdown.connect
def _stop_sandbox_pool(**_: Any) -> None:
    # Pool processes leave with os._exit: atexit handlers don't run, so remove the containers
    # of this process's sandbox pool here.
    if "tier.sandbox" in _consumed:
        from tiers.code.pool import shutdown_pool

        shutdown_pool()


def _warm_sandbox_pool() -> None:
    try:
        from tiers.code.pool import get_pool

        get_pool()
    except Exception:  # the first candidate will meet the same error, as an infra_error verdict
        logging.getLogger(__name__).exception("could not start the sandbox pool")
