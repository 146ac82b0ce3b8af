"""Which queues have a live worker, read from the presence entries workers keep in Redis.

Each worker keeps its name in a sorted set per queue it consumes, scored by when its heartbeat
runs out (the worker side lives in `workers.presence`), so that the API can tell operators
(GET /v1/tiers) and callers (a job's warnings) that tasks wait on a queue nobody serves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis

PREFIX = "verifier:workers:"
#: A hash per worker of the tasks it has taken from the broker and not finished (task id ->
#: JSON [task name, args, queue]), so that the tasks of a worker that died are sent again.
HELD_PREFIX = "verifier:held:"


def text(value: bytes | str) -> str:
    """A Redis reply as text (the clients here do not decode replies)."""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class HeldTask:
    """One task a worker records as taken from the broker (`workers.presence`)."""

    task_id: str
    name: str
    args: list[Any]
    queue: str
    carried: dict[str, Any] | None  # the request's context; absent from older records

    @property
    def item_ids(self) -> list[str]:
        """The items a tier task carries (its third argument)."""
        ids = self.args[2] if len(self.args) > 2 and isinstance(self.args[2], list) else []
        return [str(i) for i in ids]


def held_tasks(client: redis.Redis, node: str) -> list[HeldTask]:
    """The tasks `node` records as taken, by task id order."""
    out = []
    for task_id, entry in sorted(client.hgetall(held_key(node)).items()):
        name, args, queue, *rest = json.loads(entry)
        out.append(HeldTask(text(task_id), name, args, queue, rest[0] if rest else None))
    return out


def presence_key(queue: str) -> str:
    """The sorted set of the workers consuming `queue`."""
    return f"{PREFIX}{queue}"


def held_key(node: str) -> str:
    """The hash of the tasks a worker holds."""
    return f"{HELD_PREFIX}{node}"


def workers_holding_tasks(client: redis.Redis) -> list[str]:
    """Names of the workers that hold tasks (alive or not)."""
    return [
        text(key)[len(HELD_PREFIX) :]
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
            found.setdefault(text(node), set()).add(queue)
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


def paused_queues(client: redis.Redis) -> dict[str, dict[str, str]]:
    """The paused queues, each with who paused it and when."""
    return {text(q): json.loads(v) for q, v in client.hgetall(PAUSED_KEY).items()}


_paused_cache: tuple[float, frozenset[str]] | None = None


def paused_now(client: redis.Redis, max_age_s: float = 1.0) -> frozenset[str]:
    """The paused queues' names, as seen at most `max_age_s` ago by this process."""
    global _paused_cache
    now = time.monotonic()
    if _paused_cache is None or now - _paused_cache[0] > max_age_s:
        _paused_cache = (now, frozenset(text(q) for q in client.hkeys(PAUSED_KEY)))
    return _paused_cache[1]


def draining(client: redis.Redis, node: str) -> bool:
    """Whether an operator drains this worker."""
    return bool(client.exists(drain_key(node)))
