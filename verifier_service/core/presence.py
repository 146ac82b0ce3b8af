"""Which queues have a live worker, read from the presence entries workers keep in Redis.

Each worker keeps its name in a sorted set per queue it consumes, scored by when its heartbeat
runs out (the worker side lives in `workers.presence`), so that the API can tell operators
(GET /v1/tiers) and callers (a job's warnings) that tasks wait on a queue nobody serves.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import redis

PREFIX = "verifier:workers:"
#: A hash per worker of the tasks it has taken from the broker and not finished (task id ->
#: JSON [task name, args, queue]), so that the tasks of a worker that died are sent again.
HELD_PREFIX = "verifier:held:"


def presence_key(queue: str) -> str:
    """The sorted set of the workers consuming `queue`."""
    return f"{PREFIX}{queue}"


def held_key(node: str) -> str:
    """The hash of the tasks a worker holds."""
    return f"{HELD_PREFIX}{node}"


def workers_holding_tasks(client: redis.Redis) -> list[str]:
    """Names of the workers that hold tasks (alive or not)."""
    return [
        (key.decode() if isinstance(key, bytes) else str(key))[len(HELD_PREFIX) :]
        for key in client.scan_iter(match=f"{HELD_PREFIX}*", count=1000)
    ]


def live_nodes(client: redis.Redis, queues: Iterable[str]) -> set[str]:
    """Names of the workers whose presence has not run out, on any of `queues`."""
    pipe = client.pipeline(transaction=False)
    now = time.time()
    for queue in queues:
        pipe.zrangebyscore(presence_key(queue), now, "+inf")
    return {n.decode() if isinstance(n, bytes) else str(n) for ns in pipe.execute() for n in ns}


def workers_per_queue(client: redis.Redis, queues: list[str]) -> dict[str, int]:
    """How many live workers consume each queue (one round trip)."""
    pipe = client.pipeline(transaction=False)
    now = time.time()
    for queue in queues:
        pipe.zcount(presence_key(queue), now, "+inf")
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
