"""The worker side of the Celery app: its tasks, and the signals of worker processes."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import (
    after_setup_logger,
    celeryd_after_setup,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from verifier_service.core.broker import QUEUES, celery_app
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers
from workers import kombu_patches

kombu_patches.install()  # a Redis restart at the wrong moment: reconnect, don't exit

__all__ = ["QUEUES", "app"]

configure_tiers(get_settings())  # the tiers this worker runs take their settings from these
app = celery_app()
app.conf.include = ["workers.tasks", "workers.callbacks", "workers.oracle"]

# Connect their signals: worker presence; task metrics, request ids in logs, traces.
from workers import control, observability, presence  # noqa: E402, F401

#: The queues this worker consumes (set in the worker's main process, inherited by its children).
_consumed: set[str] = set()


@after_setup_logger.connect
def _plain_logs(**_: Any) -> None:
    # Tracebacks without locals and no passwords in any line, as in the API.
    from verifier_service.core.logging import configure_logging

    configure_logging(get_settings().log_level, json=get_settings().log_json)


@celeryd_after_setup.connect
def _remember_queues(instance: Any = None, **_: Any) -> None:
    # Paused queues included (workers.control, connected first, held them back already).
    _consumed.update(control.started_for or instance.app.amqp.queues.consume_from or {})
    # Before the pool forks: its processes inherit the loaded tables instead of each loading
    # them under its first batch.
    from tiers.registry import warm_up

    try:
        warm_up(_consumed)
    except Exception:  # the first item meets the same error, as an error verdict
        logging.getLogger(__name__).exception("could not warm up the tiers of %s", _consumed)


@worker_process_init.connect
def _fresh_connections(**_: Any) -> None:
    # A forked pool process must not share the parent's database connections.
    from verifier_service.core.db import reset_engine_cache

    reset_engine_cache()
    from verifier_service.core.gc_tuning import tune_gc
    from verifier_service.settings import get_settings

    tune_gc(get_settings().gc_young_threshold)
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


class _Sweeper:
    """The recovery sweep in a worker's main process, so that workers alone recover lost work
    (another process may hold a round: see verifier_service.ladder.recovery)."""

    def __init__(self, every_s: float, grace_s: float) -> None:
        self.every_s = every_s
        self.grace_s = grace_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recovery-sweep", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 5)

    def _run(self) -> None:
        from verifier_service.ladder.dispatch import BROKER_ERRORS
        from verifier_service.ladder.recovery import sweep

        settings = get_settings()
        while not self._stop.wait(self.every_s):
            try:
                sweep(settings, self.every_s, self.grace_s)
            except BROKER_ERRORS as exc:  # no lock, no queues: nothing to do until it is back
                logging.getLogger(__name__).warning("recovery sweep skipped: broker: %s", exc)
            except Exception:  # the database may be away; try again next round
                logging.getLogger(__name__).exception("recovery sweep failed")


_sweeper: _Sweeper | None = None


@worker_ready.connect
def _start_sweeper(**_: Any) -> None:
    global _sweeper
    settings = get_settings()
    if "ladder" in _consumed and settings.worker.sweep_s > 0:
        _sweeper = _Sweeper(settings.worker.sweep_s, settings.api.outbox_grace_s)
        _sweeper.start()


@worker_shutdown.connect
def _stop_sweeper(**_: Any) -> None:
    if _sweeper is not None:
        _sweeper.stop()
