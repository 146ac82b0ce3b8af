"""The Celery application: one queue per tier family, late acks, JSON only."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_process_init
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


@worker_process_init.connect
def _fresh_connections(**_: Any) -> None:
    # A forked pool process must not share the parent's database connections.
    from verifier_service.core.db import reset_engine_cache

    reset_engine_cache()
