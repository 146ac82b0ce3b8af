"""The Celery application every process uses to send work: one queue per tier family, late acks,
JSON only. Workers add their tasks to this same app (`workers.celery_app`)."""

from __future__ import annotations

from functools import lru_cache

from celery import Celery
from kombu.entity import Queue
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from verifier_service.settings import Settings, get_settings

#: What a broker that cannot be reached raises (Celery wraps some of it in OperationalError).
BROKER_ERRORS = (OperationalError, RedisError, OSError)

QUEUES = (
    "ladder", "tier.fast", "tier.sim", "tier.hifi", "tier.sandbox", "tier.judge", "review",
    "callbacks",
)  # fmt: skip


def make_celery(settings: Settings | None = None) -> Celery:
    """A Celery app configured from the settings (no tasks registered)."""
    settings = settings or get_settings()
    app = Celery("verifier_service")
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
        task_queues=[Queue(name) for name in QUEUES],  # type: ignore[no-untyped-call]
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


@lru_cache
def celery_app() -> Celery:
    """This process's Celery app."""
    return make_celery()
