"""The overview's live workers per queue: a worker's presence heartbeat (the worker side's own
code) against the real Redis, and an operator's drain, the console's own operation: a drained
worker takes no new work, so the overview does not count it live."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from verifier_service.console.operations import service as ops_service
from verifier_service.console.overview import service
from verifier_service.core.db import make_engine
from verifier_service.core.migrate import upgrade
from verifier_service.settings import get_settings
from workers.presence import Heartbeat

QUEUE = "tier.fast"


@pytest.fixture
def heartbeats(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Two workers on the fast queue and one on the sandbox queue, beating into `redis_url`.
    Yields the live workers per queue before they started: the session's Redis database is
    shared with the live service, whose own workers beat there too."""
    monkeypatch.setenv("VERIFIER_BROKER__URL", redis_url)
    get_settings.cache_clear()
    others = {q: n or 0 for q, n in _workers(redis_url).items()}
    beats = [
        Heartbeat("fast-1@test", [QUEUE]),
        Heartbeat("fast-2@test", [QUEUE, "tier.sandbox"]),
    ]
    for beat in beats:
        beat.start()
    try:
        yield others
    finally:
        for beat in beats:
            beat.stop()
        get_settings.cache_clear()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def _workers(redis_url: str) -> dict[str, int | None]:
    return {q.queue: q.workers for q in service.queues(redis_url)}


def test_a_drained_worker_is_not_counted_live(
    redis_url: str, heartbeats: dict[str, int], session: Session
) -> None:
    others = heartbeats
    deadline = time.monotonic() + 10
    while _workers(redis_url)[QUEUE] != others[QUEUE] + 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the heartbeat threads' first beat
    before = _workers(redis_url)
    assert before[QUEUE] == others[QUEUE] + 2
    assert before["tier.sandbox"] == others["tier.sandbox"] + 1

    ops_service.drain(session, redis_url, "fast-2@test", "op", on=True)
    drained = _workers(redis_url)
    assert drained[QUEUE] == others[QUEUE] + 1
    assert drained["tier.sandbox"] == others["tier.sandbox"]
    assert {q: n for q, n in drained.items() if q not in (QUEUE, "tier.sandbox")} == {
        q: n for q, n in before.items() if q not in (QUEUE, "tier.sandbox")
    }

    ops_service.drain(session, redis_url, "fast-2@test", "op", on=False)
    assert _workers(redis_url) == before
