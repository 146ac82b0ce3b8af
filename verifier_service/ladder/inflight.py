"""Tier work that a worker took with it as it died.

Kombu's Redis transport takes a message with a blocking pop: from the moment the broker hands it
over until the worker has put it in its unacknowledged set, the message is only in that
worker's socket and memory. A worker killed then takes the message with it, and nothing in the
broker brings it back; its items would wait `unclaimed_timeout_s` (an hour) for the sweep.

So the sweep remembers the workers it saw alive. Once one is gone, every running item sent
before that moment and not yet taken must be somewhere: waiting in a queue, in a consumer's
unacknowledged set, recorded as held by a worker, or staged in the outbox. An item found in
none of them by two looks `CONFIRM_S` apart (a live worker may be between its pop and its
record at the first) is lost and sent again. The broker's tier queues are read whole only
while such a check is open: from a death until every item sent before it is accounted for.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import redis
from celery import Celery
from redis.typing import EncodableT, FieldT

from verifier_service.core import broker_messages, outbox
from verifier_service.core.broker import QUEUES
from verifier_service.core.db import transaction
from verifier_service.core.presence import held_tasks, text, workers_holding_tasks
from verifier_service.ladder import repository

#: The workers the sweep saw alive: name -> the queues it consumed, comma-separated.
KNOWN = "verifier:known-workers"
#: When the sweep last saw a worker gone (epoch seconds), while the check that follows is open.
DIED_AT = "verifier:worker-died-at"
#: Items the open check found nowhere: item id -> when first found so (epoch seconds).
NOWHERE = "verifier:work-nowhere"
CONFIRM_S = 2.0
TIER_QUEUES = tuple(q for q in QUEUES if q.startswith("tier."))


def note_deaths(client: redis.Redis, live: dict[str, set[str]]) -> list[str]:
    """Compare the live workers with those seen before; the ones gone (and open a check)."""
    known = {text(k): text(v) for k, v in client.hgetall(KNOWN).items()}
    gone = [node for node in known if node not in live]
    changed: dict[FieldT, EncodableT] = {
        node: ",".join(sorted(queues))
        for node, queues in live.items()
        if known.get(node) != ",".join(sorted(queues))
    }
    pipe = client.pipeline()
    if gone:
        pipe.hdel(KNOWN, *gone)
        pipe.set(DIED_AT, time.time())
    if changed:
        pipe.hset(KNOWN, mapping=changed)
    pipe.execute()
    return gone


def _held_item_ids(client: redis.Redis) -> set[str]:
    return {
        item
        for node in workers_holding_tasks(client)
        for t in held_tasks(client, node)
        for item in t.item_ids
    }


def lost_in_flight(app: Celery, client: redis.Redis, limit: int = 2000) -> dict[str, list[str]]:
    """The items (by job) that an open check has found nowhere twice; closes the check once
    every item sent before the death is accounted for."""
    raw = client.get(DIED_AT)
    if raw is None:
        return {}
    died_at = float(raw)
    now = time.time()
    with transaction() as session:
        waiting = repository.unclaimed_running(session, datetime.fromtimestamp(died_at, UTC), limit)
        staged = outbox.staged_tier_items(session)
    nowhere: dict[str, str] = {}
    if waiting:
        somewhere = (
            staged | broker_messages.queued_item_ids(app, TIER_QUEUES) | _held_item_ids(client)
        )
        for taken in broker_messages.unacked(app).values():
            somewhere.update(taken.item_ids)
        nowhere = {item: job for item, job in waiting.items() if item not in somewhere}
    seen = {text(k): float(v) for k, v in client.hgetall(NOWHERE).items()}
    due = {item for item in nowhere if now - seen.get(item, now) >= CONFIRM_S}
    pending: dict[FieldT, EncodableT] = {
        item: seen.get(item, now) for item in nowhere if item not in due
    }
    pipe = client.pipeline()
    pipe.delete(NOWHERE)
    if pending:
        pipe.hset(NOWHERE, mapping=pending)
        pipe.expire(NOWHERE, 3600)
    elif client.get(DIED_AT) == raw:  # not reopened by a death seen meanwhile
        pipe.delete(DIED_AT)
    pipe.execute()
    lost: dict[str, list[str]] = {}
    for item in sorted(due):
        lost.setdefault(nowhere[item], []).append(item)
    return lost
