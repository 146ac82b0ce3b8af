"""The worker side of the operators' controls: each worker keeps consuming only the queues that
are not paused, and none while it is drained (read from Redis: `verifier_service.core.presence`).

A thread in the worker's main process compares, every `worker.control_poll_s`, the queues this
worker should consume with those it does, and asks the consumer's own event loop to cancel or
add consumers (Celery's `cancel_task_queue` / `add_task_queue`, run by `call_soon` in that loop,
as kombu's connection is not thread-safe). A worker that starts while a queue is paused stops
consuming it before its consumer starts (`celeryd_after_setup`); tasks it already holds (running
or prefetched) finish.
Resuming adds the consumer back: the worker then takes at most its prefetch limit
(concurrency x `worker.prefetch_multiplier`) at a time, so a long paused queue drains at the
workers' pace, not in one flood.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import redis
import structlog
from celery.signals import celeryd_after_setup, worker_ready, worker_shutdown

from verifier_service.core.db import utcnow
from verifier_service.core.notify import sync_client
from verifier_service.core.presence import draining, paused_queues, state_key
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)

#: How long a worker's report of itself outlives its last refresh.
STATE_TTL_S = 15


#: The queues this worker was started for, paused or not (set before its consumer starts).
started_for: list[str] = []


@celeryd_after_setup.connect
def _hold_back_paused(instance: Any = None, **_: Any) -> None:
    # Before the consumer starts: a worker started while a queue is paused takes none of it.
    queues = instance.app.amqp.queues
    started_for[:] = sorted(queues.consume_from or {})
    try:
        paused = paused_queues(sync_client(get_settings().broker_url))
    except redis.RedisError as exc:  # the broker is away: so is its work; the thread catches up
        log.warning("could not read the paused queues", error=str(exc))
        return
    for queue in started_for:
        if queue in paused:
            log.info("not consuming a paused queue", queue=queue)
            queues.deselect(queue)


class Controls:
    """Keeps a worker's consumers in line with the paused queues and its drain order."""

    def __init__(self, consumer: Any, every_s: float) -> None:
        self.consumer = consumer
        self.node: str = consumer.hostname
        self.queues = list(started_for) or sorted(q.name for q in consumer.task_consumer.queues)
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="controls", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 5)

    def _consuming(self) -> set[str]:
        task_consumer = self.consumer.task_consumer
        if task_consumer is None:  # the consumer is restarting (the broker went away)
            return set(self.queues)
        return {q.name for q in task_consumer.queues}

    def apply(self) -> None:
        """One round: read the paused queues and the drain order, change consumers to match,
        and report this worker's state."""
        client = sync_client(get_settings().broker_url)
        paused = paused_queues(client)
        drained = draining(client, self.node)
        wanted = set() if drained else {q for q in self.queues if q not in paused}
        consuming = self._consuming()
        for queue in sorted(consuming - wanted):
            log.info("stop consuming", queue=queue, paused=queue in paused, drained=drained)
            self.consumer.call_soon(self.consumer.cancel_task_queue, queue)
        for queue in sorted(wanted - consuming):
            log.info("consume again", queue=queue)
            self.consumer.call_soon(self.consumer.add_task_queue, queue)
        settings = get_settings().worker
        report = {
            "queues": self.queues,
            "consuming": sorted(wanted),
            "draining": drained,
            "concurrency": self.consumer.pool.num_processes
            if self.consumer.pool is not None
            else settings.concurrency,
            "prefetch_multiplier": settings.prefetch_multiplier,
            "at": utcnow().isoformat(),
        }
        client.set(state_key(self.node), json.dumps(report), ex=STATE_TTL_S)

    def _run(self) -> None:
        while True:
            try:
                self.apply()
            except redis.RedisError as exc:  # the broker is away: so is its work
                log.warning("could not read the operators' controls", error=str(exc))
            except Exception:  # a bug must not stop the worker; try again next round
                log.exception("operators' controls failed")
            if self._stop.wait(self.every_s):
                return


_controls: Controls | None = None


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    global _controls
    _controls = Controls(sender, get_settings().worker.control_poll_s)
    _controls.start()


@worker_shutdown.connect
def _stop(**_: Any) -> None:
    if _controls is not None:
        _controls.stop()
