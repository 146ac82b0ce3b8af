"""The worker side of presence: a heartbeat that keeps this worker's entry in the sorted set of
each queue it consumes (read by `verifier_service.core.presence`)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import redis
import structlog
from celery.signals import task_postrun, task_received, worker_ready, worker_shutdown

from verifier_service.core.notify import sync_client
from verifier_service.core.presence import held_key, presence_key
from verifier_service.metrics import propagation
from verifier_service.settings import get_settings
from workers import control

log = structlog.get_logger(__name__)

HEARTBEAT_S = 5.0
TTL_S = 15
#: How long the record of a worker's held tasks outlives its last change.
HELD_TTL_S = 86_400


class Heartbeat:
    """Refreshes a worker's presence keys until stopped, then removes them."""

    def __init__(self, node: str, queues: list[str]) -> None:
        self.node = node
        self.queues = queues
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="presence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HEARTBEAT_S)
        try:
            pipe = sync_client(get_settings().broker_url).pipeline(transaction=False)
            for queue in self.queues:
                pipe.zrem(presence_key(queue), self.node)
            pipe.execute()
        except redis.RedisError:
            pass  # the entries run out on their own

    def _run(self) -> None:
        while True:
            try:
                pipe = sync_client(get_settings().broker_url).pipeline(transaction=False)
                now = time.time()
                for queue in self.queues:
                    pipe.zadd(presence_key(queue), {self.node: now + TTL_S})
                    pipe.zremrangebyscore(presence_key(queue), "-inf", now)  # workers that died
                    pipe.expire(presence_key(queue), 2 * TTL_S)
                pipe.execute()
            except redis.RedisError as exc:
                log.warning("presence heartbeat failed", error=str(exc))
            if self._stop.wait(HEARTBEAT_S):
                return


_heartbeat: Heartbeat | None = None


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    global _heartbeat
    # The queues it was started for, paused ones included (workers.control holds those back).
    queues = list(control.started_for) or sorted(q.name for q in sender.task_consumer.queues)
    _heartbeat = Heartbeat(sender.hostname, queues)
    _heartbeat.start()


@worker_shutdown.connect
def _stop(**_: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()


@task_received.connect
def _hold(request: Any = None, **_: Any) -> None:
    # In the worker's main process, as a message is taken (prefetched or run at once): if this
    # worker dies before it finishes the task, the recovery sweep sends the task again.
    if request is None or not str(request.name).startswith("tier."):
        return
    queue = (request.delivery_info or {}).get("routing_key")
    try:
        client = sync_client(get_settings().broker_url)
        key = held_key(request.hostname)
        pipe = client.pipeline(transaction=False)
        # The request id and job id travel with it: work sent again is still the request's.
        carried = propagation.carried_context(getattr(request, "request_dict", None))
        entry = [request.name, list(request.args), queue, carried]
        pipe.hset(key, request.id, json.dumps(entry))
        pipe.expire(key, HELD_TTL_S)
        pipe.execute()
    except redis.RedisError as exc:  # the broker is away: then so are its messages
        log.warning("could not record a held task", error=str(exc))


@task_postrun.connect
def _release(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is None or task is None or not str(task.name).startswith("tier."):
        return
    try:
        sync_client(get_settings().broker_url).hdel(held_key(task.request.hostname), task_id)
    except redis.RedisError as exc:
        log.warning("could not release a held task", error=str(exc))
