"""The tier messages the broker holds: waiting in a queue, or handed to a consumer that has not
acknowledged them yet. Read (and put back) with kombu's own channel, so its key names and its
restore are the ones the workers use.

As kombu hands a message to a consumer it moves it from its queue into a hash (`unacked`, with
when in the sorted set `unacked_index`), and puts it back only once the visibility timeout has
passed (16 minutes by default here) if the consumer dies without acknowledging it. The recovery
sweep uses this module to put a dead worker's messages back at once, and to tell work that is
somewhere in the broker from work that a dying worker took with it. Each function takes the
Celery app whose broker it reads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from celery import Celery

from verifier_service.core.presence import text


@dataclass(frozen=True)
class Taken:
    """A tier task's message that a consumer took and has not acknowledged."""

    tag: str  # kombu's delivery tag: the message's key in the unacked hash
    task_id: str
    taken_at: float  # epoch seconds
    item_ids: tuple[str, ...]


def _tier_task(message: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """A kombu message's task id and the items its tier task carries; None for other tasks."""
    headers = message.get("headers") or {}
    if not str(headers.get("task", "")).startswith("tier.") or not headers.get("id"):
        return None
    body: Any = message.get("body") or ""
    if (message.get("properties") or {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args = json.loads(body)[0]  # Celery's message protocol 2: [args, kwargs, embed]
    return str(headers["id"]), tuple(str(i) for i in args[2])


def unacked(app: Celery, taken_before: float | None = None, limit: int = 5000) -> dict[str, Taken]:
    """The unacknowledged messages of tier tasks, by task id; with `taken_before`, only those
    taken before that time (epoch seconds)."""
    with app.connection_for_write() as connection:
        channel: Any = connection.default_channel
        client = channel.client
        ceiling = "+inf" if taken_before is None else taken_before
        index = client.zrange(
            channel.unacked_index_key, 0, ceiling, byscore=True, offset=0, num=limit,
            withscores=True,
        )  # fmt: skip
        if not index:
            return {}
        tags = [text(tag) for tag, _ in index]
        raws = client.hmget(channel.unacked_key, tags)
    taken: dict[str, Taken] = {}
    for tag, (_, score), raw in zip(tags, index, raws, strict=True):
        if raw is None:  # acknowledged since
            continue
        task = _tier_task(json.loads(raw)[0])
        if task is not None:
            taken[task[0]] = Taken(tag, task[0], float(score), task[1])
    return taken


def queued_item_ids(app: Celery, queues: Iterable[str]) -> set[str]:
    """The items that tier tasks waiting in these queues carry (reads the whole queues)."""
    found: set[str] = set()
    with app.connection_for_write() as connection:
        channel: Any = connection.default_channel
        pipe = channel.client.pipeline(transaction=False)
        for queue in queues:
            pipe.lrange(queue, 0, -1)
        for raws in pipe.execute():
            for raw in raws:
                task = _tier_task(json.loads(raw))
                if task is not None:
                    found.update(task[1])
    return found


def restore(app: Celery, tags: Iterable[str]) -> int:
    """Put these messages back at the head of their queues (kombu marks them redelivered);
    how many were restored. A message acknowledged in the meantime is left alone."""
    restored = 0
    with app.connection_for_write() as connection:
        channel: Any = connection.default_channel
        for tag in tags:
            if channel.client.hexists(channel.unacked_key, tag):
                channel.qos.restore_by_tag(tag)
                restored += 1
    return restored
