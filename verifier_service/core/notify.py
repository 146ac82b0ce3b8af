"""Job-finished notifications over Redis pub/sub, and the API's waiter for them."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

import redis
import redis.asyncio as aioredis

CHANNEL_PREFIX = "verifier:job:"


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


@lru_cache(maxsize=4)
def sync_client(url: str) -> redis.Redis:
    return redis.Redis(**redis_kwargs(url), socket_timeout=5)


def publish_job_finished(url: str, job_ids: set[str]) -> None:
    if not job_ids:
        return
    client = sync_client(url)
    pipe = client.pipeline(transaction=False)
    for job_id in job_ids:
        pipe.publish(CHANNEL_PREFIX + job_id, "finished")
    pipe.execute()


class JobWaiter:
    """One pattern subscription per API process that wakes up requests waiting on jobs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
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
                await pubsub.psubscribe(CHANNEL_PREFIX + "*")
                self._ready.set()
                async for message in pubsub.listen():
                    channel = message.get("channel", b"")
                    job_id = channel.decode()[len(CHANNEL_PREFIX) :]
                    for event in self._waiters.get(job_id, ()):
                        event.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                # Broker gone for a moment: waiters fall back to their timeout; reconnect.
                await asyncio.sleep(0.5)

    @contextlib.contextmanager
    def watch(self, job_id: str) -> Any:
        """Register interest before checking the database, so no notification is missed."""
        event = asyncio.Event()
        self._waiters[job_id].add(event)
        try:
            yield event
        finally:
            self._waiters[job_id].discard(event)
            if not self._waiters[job_id]:
                del self._waiters[job_id]
