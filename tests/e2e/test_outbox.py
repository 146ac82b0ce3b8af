"""Nothing is lost when the broker is away: work is stored in the outbox and sent later.

A Redis server of the test's own is stopped while the API takes a request, then started
again on the same port; the API's outbox sweeper sends the stored work and the job completes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support import RedisServer, Service, free_port, poll_job, start_service


@pytest.fixture
def flaky_broker_service(tmp_path: Path, own_pg_url: str) -> Iterator[tuple[Service, RedisServer]]:
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    try:
        service = start_service(
            tmp_path,
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=own_pg_url,
            VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0",
            VERIFIER_API__OUTBOX_SWEEP_S="0.5",
            VERIFIER_API__OUTBOX_GRACE_S="1",
        )
        yield service, broker
        service.stop_all()
    finally:
        if broker.process is not None and broker.process.poll() is None:
            broker.stop()


def test_work_stored_while_the_broker_is_down_is_sent_when_it_is_back(
    flaky_broker_service: tuple[Service, RedisServer],
) -> None:
    service, broker = flaky_broker_service
    # More items than the inline lane takes: all of them need the broker.
    body = {
        "items": [{"kind": "molecule", "payload": {"smiles": "C" * n + "O"}} for n in range(1, 9)]
    }
    broker.stop()
    with service.client(timeout=60) as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 202, response.text  # stored, not a 500
        location = response.headers["location"]
        seen = client.get(location)
        assert seen.json()["status"] == "running", seen.text

        broker.start()
        job = poll_job(client, location, timeout=60)
    assert job["status"] == "completed", service.log_tail("api")
    assert [item["reward"]["status"] for item in job["items"]] == ["scored"] * 8
    assert "broker unavailable" in service.log_tail("api", 20000)


def test_deadline_holds_when_its_broker_message_is_lost(
    flaky_broker_service: tuple[Service, RedisServer],
) -> None:
    service, broker = flaky_broker_service
    qed = {"name": "qed", "tier": "chem.fast", "component": "qed"}
    policy = {
        "name": "needs-dft",
        "ladders": {"molecule": [{"tier": "chem.fast"}, {"tier": "chem.dft"}]},
        "reward": {"molecule": {"components": [qed]}},
    }
    with service.client() as client:
        assert client.post("/v1/policies", json={"document": policy}).status_code == 201
        body = {
            "policy": "needs-dft",
            "items": [{"kind": "molecule", "payload": {"smiles": "CCOC(=O)CC"}}],
            "deadline_s": 3,
        }
        location = client.post("/v1/rewards", json=body).headers["location"]
        # Once chem.fast has judged the item (it waits on chem.dft, which has no worker), the
        # worker holding the delayed expiry message dies, and the broker restarts empty: no
        # worker and no message will ever expire this job.
        until = time.monotonic() + 20
        while not client.get(location).json()["items"][0]["verdicts"]:
            assert time.monotonic() < until, "chem.fast never judged the item"
            time.sleep(0.1)
        service.stop("worker", sig=9)
        redis.Redis(port=broker.port).flushall()
        job = poll_job(client, location, timeout=30)
    assert job["status"] == "completed", service.log_tail("api")
    reward = job["items"][0]["reward"]
    assert reward["status"] == "scored", reward
    assert "deadline" in reward["reason"]


def test_a_small_waiting_request_is_answered_at_once_while_the_broker_is_down(
    flaky_broker_service: tuple[Service, RedisServer],
) -> None:
    """The inline lane needs no broker: with it away, a one-molecule request is still scored
    in its own request, without waiting on the Redis client's reconnection attempts."""
    service, broker = flaky_broker_service
    broker.stop()
    with service.client(timeout=60) as client:
        times = []
        for smiles in ("CCO", "CCCO", "CCCCO"):
            body = {"items": [{"kind": "molecule", "payload": {"smiles": smiles}}], "wait_s": 30}
            started = time.monotonic()
            response = client.post("/v1/rewards", json=body)
            times.append(time.monotonic() - started)
            assert response.status_code == 200, response.text
            assert response.json()["items"][0]["reward"]["status"] == "scored"
    assert max(times) < 1.0, f"seconds per request with the broker down: {times}"
