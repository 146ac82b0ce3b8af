"""The broker's sync client (core/redis_client.py) against a real redis-server that the test
stops and starts: a call that cannot reach it fails within a fraction of a second, the calls
right after fail at once, and once the pause is over the client reaches the broker again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from support import RedisServer, free_port

from verifier_service.core.redis_client import BrokerRedis


def _seconds_to_fail(call: Callable[[], object]) -> float:
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        call()
    return time.monotonic() - started


def test_calls_fail_fast_while_the_broker_is_away_and_work_again_after(tmp_path: Path) -> None:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    client = BrokerRedis(pause_s=2.0, port=server.port, socket_timeout=5)
    try:
        client.set("k", "v")
        server.stop()
        # The first call retries briefly (redis-py's default would take ~4.5 s).
        assert _seconds_to_fail(lambda: client.get("k")) < 1.0
        # The next ones, and pipelines, do not try the broker at all during the pause.
        assert _seconds_to_fail(lambda: client.get("k")) < 0.05
        pipe = client.pipeline(transaction=False)
        pipe.get("k")
        assert _seconds_to_fail(pipe.execute) < 0.05
        server.start()
        with pytest.raises(redis.ConnectionError, match="not tried again"):
            client.get("k")  # still within the pause, though the broker is back
        time.sleep(2.1)
        client.set("k", "back")
        pipe = client.pipeline(transaction=False)
        pipe.get("k")
        assert pipe.execute() == [b"back"]
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop()
