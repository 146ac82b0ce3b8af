"""Job notifications over Redis pub/sub (a job finished; a job has new events), and the API's
waiter for them."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

import redis
import redis.asyncio as aioredis

from verifier_service.core.redis_client import BrokerRedis

CHANNEL_PREFIX = "verifier:job:"
EVENTS_PREFIX = "verifier:job-events:"


def redis_kwargs(url: str) -> dict[str, Any]:
    """redis-py connection arguments for a broker URL, including Celery's redis+socket://."""
    if url.startswith(("redis+socket://", "socket://", "unix://")):
        return {"unix_socket_path": urlparse(url).path}
    parsed = urlparse(url)
    db = int(parsed.path.lstrip("/") or 0) if parsed.path.lstrip("/").isdigit() else 0
    return {
        "host": parsed.hostname or "localhost",
        "port": parsed.port or 6379,
        "db": db,
        "password": parsed.password,
        "username": parsed.username,
        "ssl": parsed.scheme == "rediss",
    }


#: Seconds a process stops calling the broker after a call could not reach it (`BrokerRedis`).
BROKER_PAUSE_S = 2.0


@lru_cache(maxsize=4)
def sync_client(url: str) -> redis.Redis:
    """This process's client of the broker at `url`: fails fast while the broker is away."""
    return BrokerRedis(pause_s=BROKER_PAUSE_S, **redis_kwargs(url), socket_timeout=5)


def publish_jobs(url: str, finished: set[str], with_events: set[str]) -> None:
    """Wake the waiters of jobs that finished and the event streams of jobs with new events
    (they read those from the database), in one round trip."""
    if not finished and not with_events:
        return
    pipe = sync_client(url).pipeline(transaction=False)
    for job_id in finished:
        pipe.publish(CHANNEL_PREFIX + job_id, "finished")
    for job_id in with_events:
        pipe.publish(EVENTS_PREFIX + job_id, "events")
    pipe.execute()


class JobWaiter:
    """One pattern subscription per API process that wakes up requests waiting on jobs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._event_waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout=5)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _listen(self) -> None:
        while True:
            try:
                client = aioredis.Redis(**redis_kwargs(self.url))
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                await pubsub.psubscribe(CHANNEL_PREFIX + "*", EVENTS_PREFIX + "*")
                self._ready.set()
                async for message in pubsub.listen():
                    channel = message.get("channel", b"").decode()
                    if channel.startswith(EVENTS_PREFIX):
                        waiters = self._event_waiters.get(channel[len(EVENTS_PREFIX) :], ())
                    else:
                        waiters = self._waiters.get(channel[len(CHANNEL_PREFIX) :], ())
                    for event in waiters:
                        event.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                # Broker gone for a moment: waiters fall back to their timeout; reconnect.
                await asyncio.sleep(0.5)

    @contextlib.contextmanager
    def watch(self, job_id: str) -> Any:
        """Register interest before checking the database, so no notification is missed."""
        with self._watch(self._waiters, job_id) as event:
            yield event

    @contextlib.contextmanager
    def watch_events(self, job_id: str) -> Any:
        """An event set whenever the job has new events (clear it before each read)."""
        with self._watch(self._event_waiters, job_id) as event:
            yield event

    @staticmethod
    @contextlib.contextmanager
    def _watch(waiters: dict[str, set[asyncio.Event]], job_id: str) -> Any:
        event = asyncio.Event()
        waiters[job_id].add(event)
        try:
            yield event
        finally:
            waiters[job_id].discard(event)
            if not waiters[job_id]:
                del waiters[job_id]
