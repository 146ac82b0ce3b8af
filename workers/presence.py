"""Which queues have a live worker: each worker keeps its name in a Redis sorted set per queue
it consumes, scored by when its heartbeat runs out, so that the API can tell operators
(GET /v1/tiers) and callers (a job's warnings) that tasks wait on a queue nobody serves."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
import structlog
from celery.signals import worker_ready, worker_shutdown

from verifier_service.core.notify import sync_client
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)

PREFIX = "verifier:workers:"
HEARTBEAT_S = 5.0
TTL_S = 15


def _key(queue: str) -> str:
    return f"{PREFIX}{queue}"


def workers_per_queue(client: redis.Redis, queues: list[str]) -> dict[str, int]:
    """How many live workers consume each queue (one round trip)."""
    pipe = client.pipeline(transaction=False)
    now = time.time()
    for queue in queues:
        pipe.zcount(_key(queue), now, "+inf")
    return {queue: int(n) for queue, n in zip(queues, pipe.execute(), strict=True)}


_live_cache: dict[str, tuple[float, int]] = {}


def live_workers(client: redis.Redis, queue: str, max_age_s: float = 5.0) -> int:
    """Live workers on a queue, as seen at most `max_age_s` ago by this process."""
    now = time.monotonic()
    seen = _live_cache.get(queue)
    if seen is None or now - seen[0] > max_age_s:
        seen = (now, workers_per_queue(client, [queue])[queue])
        _live_cache[queue] = seen
    return seen[1]


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
                pipe.zrem(_key(queue), self.node)
            pipe.execute()
        except redis.RedisError:
            pass  # the entries run out on their own

    def _run(self) -> None:
        while True:
            try:
                pipe = sync_client(get_settings().broker_url).pipeline(transaction=False)
                now = time.time()
                for queue in self.queues:
                    pipe.zadd(_key(queue), {self.node: now + TTL_S})
                    pipe.zremrangebyscore(_key(queue), "-inf", now)  # workers that died
                    pipe.expire(_key(queue), 2 * TTL_S)
                pipe.execute()
            except redis.RedisError as exc:
                log.warning("presence heartbeat failed", error=str(exc))
            if self._stop.wait(HEARTBEAT_S):
                return


_heartbeat: Heartbeat | None = None


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    global _heartbeat
    queues = sorted(q.name for q in sender.task_consumer.queues)
    _heartbeat = Heartbeat(sender.hostname, queues)
    _heartbeat.start()


@worker_shutdown.connect
def _stop(**_: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()
