"""A worker killed in the moment it takes a tier message from the broker: the work is done
anyway, within seconds, not after the broker's visibility timeout (16 minutes) or the sweep's
unclaimed timeout (an hour).

Two moments, each played by a process that takes the message the way a Celery worker does and
dies before the worker could record it as held:
- kombu has moved the message into its unacknowledged set (the hold not yet recorded);
- the broker has popped the message but kombu never stored it anywhere (a worker killed between
  its blocking pop and its bookkeeping): the message exists nowhere.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from support import REPO, RedisServer, Service, free_port, poll_job, start_service

from verifier_service.core.presence import presence_key
from verifier_service.ladder.inflight import KNOWN

POLICY = {
    "name": "taken-by-dying",
    "ladders": {
        "molecule": [{"tier": "chem.fast"}, {"tier": "chem.surrogate", "config": {"xtb": False}}]
    },
    "reward": {
        "molecule": {"components": [{"name": "qed", "tier": "chem.fast", "component": "qed"}]}
    },
}


@pytest.fixture
def no_sim_worker(tmp_path: Path, own_pg_url: str) -> Iterator[tuple[Service, redis.Redis]]:
    """A service whose tier.sim queue has no worker yet, on a broker of its own."""
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    url = f"redis://127.0.0.1:{broker.port}/0"
    service = start_service(
        tmp_path,
        "ladder,tier.fast,callbacks",
        VERIFIER_DATABASE__URL=own_pg_url,
        VERIFIER_BROKER__URL=url,
        VERIFIER_WORKER__SWEEP_S="1",
        VERIFIER_API__OUTBOX_SWEEP_S="1",
    )
    yield service, redis.Redis.from_url(url)
    service.stop_all()
    broker.stop()


def waiting_on_sim(service: Service, client: redis.Redis, smiles: str) -> str:
    """Post one molecule; once chem.fast has judged it, its chem.surrogate task waits in the
    tier.sim queue. The job's location."""
    with service.client() as http:
        assert http.post("/v1/policies", json={"document": POLICY}).status_code in (200, 201)
        body = {
            "policy": POLICY["name"],
            "items": [{"kind": "molecule", "payload": {"smiles": smiles}}],
        }
        response = http.post("/v1/rewards", json=body)
        assert response.status_code == 202, response.text
    until = time.monotonic() + 60
    while client.llen("tier.sim") == 0:
        assert time.monotonic() < until, "no chem.surrogate task was queued"
        time.sleep(0.1)
    return str(response.headers["location"])


def take_and_die(service: Service, script: str) -> None:
    """Run `script`, which ends its process without any cleanup (`os._exit`, as SIGKILL would
    leave it: a kombu connection closed cleanly would put its messages back)."""
    code = textwrap.dedent(script)
    subprocess.run([sys.executable, "-c", code], env=service.env, cwd=REPO, check=True, timeout=60)


def sim_worker_finishes(service: Service, location: str, seconds: float = 60) -> str:
    """Start a tier.sim worker: the job must end within `seconds`, its molecule scored by both
    tiers. The API's and the worker's logs."""
    service.start_worker("sim", "tier.sim")
    started = time.monotonic()
    with service.client() as http:
        job = poll_job(http, location, timeout=seconds)
    assert job["status"] == "completed", (job, service.log_tail("api"), service.log_tail("worker"))
    assert time.monotonic() - started < seconds
    item = job["items"][0]
    assert [v["tier"] for v in item["verdicts"]] == ["chem.fast", "chem.surrogate"]
    assert item["reward"]["status"] == "scored"
    return service.log_tail("api", 10**6) + service.log_tail("worker", 10**6)


def test_a_message_taken_but_not_yet_recorded_is_put_back(
    no_sim_worker: tuple[Service, redis.Redis],
) -> None:
    service, client = no_sim_worker
    location = waiting_on_sim(service, client, "CC(C)Cc1ccc(cc1)C(C)C(=O)O")
    # Takes the message as a worker's kombu consumer does (into the unacknowledged set).
    take_and_die(
        service,
        """
        import os
        from verifier_service.core.broker import celery_app
        with celery_app().connection_for_read() as connection:
            assert connection.default_channel.basic_get("tier.sim", no_ack=False) is not None
            os._exit(0)
        """,
    )
    assert client.llen("tier.sim") == 0
    assert client.hlen("unacked") == 1
    logs = sim_worker_finishes(service, location)
    # Not restored a second time after the timeout: the entry is gone once the worker that ran
    # the message again has acknowledged it (acks_late: after the commit that ended the job).
    until = time.monotonic() + 10
    while client.hlen("unacked") and time.monotonic() < until:
        time.sleep(0.1)
    assert client.hlen("unacked") == 0
    assert "never recorded" in logs


def test_a_message_a_dying_worker_popped_is_sent_again(
    no_sim_worker: tuple[Service, redis.Redis],
) -> None:
    service, client = no_sim_worker
    location = waiting_on_sim(service, client, "COc1ccc2[nH]cc(CCN(C)C)c2c1")
    # A tier.sim worker the sweep sees alive, whose presence runs out in a few seconds.
    client.zadd(presence_key("tier.sim"), {"doomed@host": time.time() + 4})
    until = time.monotonic() + 30
    while not client.hexists(KNOWN, "doomed@host"):
        assert time.monotonic() < until, "the sweep never saw the worker"
        time.sleep(0.2)
    # It pops the message and dies before kombu has stored it anywhere: gone from the broker.
    take_and_die(
        service,
        """
        import redis, os
        assert redis.Redis.from_url(os.environ["VERIFIER_BROKER__URL"]).rpop("tier.sim")
        os._exit(0)
        """,
    )
    assert client.llen("tier.sim") == 0
    assert client.hlen("unacked") == 0
    assert "sent lost tier work again" in sim_worker_finishes(service, location)
