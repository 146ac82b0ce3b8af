"""The recovery sweep's view of the broker: which work a broker restart lost."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import redis
from support import RedisServer, free_port

from verifier_service.core.db import utcnow
from verifier_service.ladder.recovery import broker_reset_at


def test_only_work_sent_before_the_broker_started_counts_as_lost(tmp_path: Path) -> None:
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    try:
        client = redis.Redis(port=broker.port)
        started = utcnow()
        time.sleep(4)
        # A new deployment: jobs sent to this broker (after its first 2 s) are in it, not lost.
        first = broker_reset_at(client)
        assert first is not None
        assert started - timedelta(seconds=1) < first < utcnow() - timedelta(seconds=1)
        assert broker_reset_at(client) is None  # seen once: nothing lost since
        # A restart without persistence: what was sent before this moment may be gone.
        broker.stop()
        restarted = utcnow()
        broker.start()
        again = broker_reset_at(client)
        assert again is not None
        assert restarted <= again <= utcnow()  # never before the restart: nothing lost is missed
    finally:
        broker.stop()
