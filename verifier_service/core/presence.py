"""Which queues have a live worker, read from the presence entries workers keep in Redis.

Each worker keeps its name in a sorted set per queue it consumes, scored by when its heartbeat
runs out (the worker side lives in `workers.presence`), so that the API can tell operators
(GET /v1/tiers) and callers (a job's warnings) that tasks wait on a queue nobody serves.
"""

from __future__ import annotations

import json
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
    return set(live_queues(client, queues))


def live_queues(client: redis.Redis, queues: Iterable[str]) -> dict[str, set[str]]:
    """The queues of `queues` each live worker consumes, by worker name (one round trip)."""
    pipe = client.pipeline(transaction=False)
    now = time.time()
    queues = list(queues)
    for queue in queues:
        pipe.zrangebyscore(presence_key(queue), now, "+inf")
    found: dict[str, set[str]] = {}
    for queue, nodes in zip(queues, pipe.execute(), strict=True):
        for node in nodes:
            found.setdefault(node.decode() if isinstance(node, bytes) else str(node), set()).add(
                queue
            )
    return found


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


# ---------------------------------------------------------------- operators' controls
#: A hash of the paused queues (queue -> JSON {"by": operator, "at": ISO time}). In the broker's
#: Redis, which keeps its data across restarts (append-only file): workers that start later
#: read it before they take work, and it lives as long as the queued messages it holds back.
PAUSED_KEY = "verifier:paused-queues"
#: A key per worker an operator drains (JSON {"by", "at"}): it takes no new work.
DRAIN_PREFIX = "verifier:drain:"
#: A key per worker with what it reports of itself (queues, consuming, concurrency, draining).
STATE_PREFIX = "verifier:worker-state:"
#: How long a drain order outlives its worker (node names are unique per start).
DRAIN_TTL_S = 7 * 86_400


def drain_key(node: str) -> str:
    """The drain order of one worker."""
    return f"{DRAIN_PREFIX}{node}"


def state_key(node: str) -> str:
    """What one worker reports of itself."""
    return f"{STATE_PREFIX}{node}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def paused_queues(client: redis.Redis) -> dict[str, dict[str, str]]:
    """The paused queues, each with who paused it and when."""
    return {_text(q): json.loads(v) for q, v in client.hgetall(PAUSED_KEY).items()}


_paused_cache: tuple[float, frozenset[str]] | None = None


def paused_now(client: redis.Redis, max_age_s: float = 1.0) -> frozenset[str]:
    """The paused queues' names, as seen at most `max_age_s` ago by this process."""
    global _paused_cache
    now = time.monotonic()
    if _paused_cache is None or now - _paused_cache[0] > max_age_s:
        _paused_cache = (now, frozenset(_text(q) for q in client.hkeys(PAUSED_KEY)))
    return _paused_cache[1]


def draining(client: redis.Redis, node: str) -> bool:
    """Whether an operator drains this worker."""
    return bool(client.exists(drain_key(node)))
