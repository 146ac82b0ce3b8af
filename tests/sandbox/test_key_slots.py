"""The per-key cap of `/run_code` counts in Redis: every API process sees the same runs, and a
run whose process died frees its slot when its lease ends. On the real Redis."""

from __future__ import annotations

import time
import uuid

import redis

from verifier_service.sandbox.capacity import KeySlots


def test_two_api_processes_share_one_keys_slots(redis_url: str) -> None:
    # Two clients, as two API processes would hold them.
    first = KeySlots(redis.Redis.from_url(redis_url))
    second = KeySlots(redis.Redis.from_url(redis_url))
    owner, other = f"key:{uuid.uuid4().hex}", f"key:{uuid.uuid4().hex}"
    a = first.take(owner, 2, lease_s=60)
    b = second.take(owner, 2, lease_s=60)
    assert a is not None
    assert b is not None
    assert first.take(owner, 2, lease_s=60) is None
    assert second.take(owner, 2, lease_s=60) is None
    assert first.take(other, 2, lease_s=60) is not None  # another key has its own
    second.give_back(owner, a)  # a run of the first process ended: given back by either
    assert first.take(owner, 2, lease_s=60) is not None


def test_a_slot_frees_itself_when_its_lease_ends(redis_url: str) -> None:
    slots = KeySlots(redis.Redis.from_url(redis_url))
    owner = f"key:{uuid.uuid4().hex}"
    assert slots.take(owner, 1, lease_s=0.3) is not None  # its process dies: never given back
    assert slots.take(owner, 1, lease_s=60) is None
    time.sleep(0.5)
    assert slots.take(owner, 1, lease_s=60) is not None
    # A short lease after a long one does not shorten the long one's life in Redis.
    assert slots.take(owner, 2, lease_s=0.2) is not None
    time.sleep(1.5)
    assert slots.take(owner, 2, lease_s=60) is not None
    assert slots.take(owner, 2, lease_s=60) is None
