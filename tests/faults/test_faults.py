"""Faults against real processes: each test ends with every submitted item holding exactly one
final reward, no duplicate verdict or cost-ledger row, and no job left running.

The short forms run in CI; `bench/bench_faults.py` runs long forms under sustained load.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rdkit import RDConfig
from support import (
    PostgresCluster,
    RedisServer,
    Service,
    free_port,
    fresh_molecules,
    poll_job,
    start_service,
    wait_ready,
)

from verifier_service.client import RetryPolicy, VerifierClient
from verifier_service.ladder.recovery import BROKER_MARKER


def nci_smiles(n: int, offset: int = 0) -> list[str]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    lines = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    return lines[offset : offset + n]


def molecules(smiles: list[str]) -> list[dict[str, Any]]:
    return [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]


def post_until_accepted(client: httpx.Client, body: dict[str, Any], key: str) -> httpx.Response:
    """POST with an Idempotency-Key, again while the service answers 503 or is unreachable
    (what VerifierClient does); any other 5xx fails the test."""
    deadline = time.monotonic() + 60
    while True:
        try:
            response = client.post("/v1/rewards", json=body, headers={"Idempotency-Key": key})
        except httpx.TransportError:
            response = None
        if response is not None and response.status_code in (200, 202):
            return response
        if response is not None:
            assert response.status_code == 503, response.text
            assert "Retry-After" in response.headers
        assert time.monotonic() < deadline, "the service never took the request"
        time.sleep(0.5)


def assert_exactly_once(client: httpx.Client, job: dict[str, Any], steps: int = 1) -> None:
    """Every item of a completed job has one final reward and one verdict per ladder step;
    the cost ledger charged each item once per step."""
    assert job["status"] == "completed", json.dumps(job)[:2000]
    assert job["n_done"] == job["n_items"] == len(job["items"])
    for item in job["items"]:
        assert item["state"] == "done"
        assert item["reward"]["status"] in ("scored", "infra_error", "pending")
        assert len(item["verdicts"]) == steps, item
    cost = client.get(f"/v1/jobs/{job['id']}/cost").json()
    charged = sum(t["calls"] + t["cache_hits"] for t in cost["tiers"].values())
    assert charged == len(job["items"]) * steps, cost


def at_once(
    service: Service, n: int, send: Callable[[httpx.Client], httpx.Response]
) -> list[httpx.Response]:
    """`n` clients of `service` send at the same moment (a barrier); their responses."""
    start = threading.Barrier(n)

    def one(_: int) -> httpx.Response:
        with service.client(timeout=60) as client:
            start.wait()
            return send(client)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_trainers_sending_the_same_molecules_at_once_all_finish(live_service: Service) -> None:
    # Four trainers POST the same 64 new molecules at the same moment, on PostgreSQL: the
    # content-addressed verdict each computes is stored once, and every job ends.
    for round_ in range(3):
        body = {"items": molecules(nci_smiles(64, offset=2000 + 64 * round_))}
        responses = at_once(
            live_service, 4, lambda client, body=body: client.post("/v1/rewards", json=body)
        )
        assert [r.status_code for r in responses] == [202] * 4
        with live_service.client() as client:
            for response in responses:
                location = response.headers["location"]
                assert_exactly_once(client, poll_job(client, location, timeout=60))
    assert "UniqueViolation" not in live_service.log_tail("worker", 1_000_000)


def test_small_waiting_requests_racing_on_one_new_molecule(live_service: Service) -> None:
    # The inline lane: eight requests with the same new molecule at once all get its reward.
    smiles = fresh_molecules(1)[0] + "OCCNC(=O)C"
    body = {"items": molecules([smiles]), "wait_s": 10}
    responses = at_once(live_service, 8, lambda client: client.post("/v1/rewards", json=body))
    assert [r.status_code for r in responses] == [200] * 8, [r.text for r in responses]
    rewards = [r.json()["items"][0]["reward"] for r in responses]
    assert all(r["status"] == "scored" for r in rewards)
    assert len({r["value"] for r in rewards}) == 1


@pytest.fixture
def own_pg_service(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> Iterator[tuple[Service, PostgresCluster]]:
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    service = start_service(
        tmp_path,
        "ladder,tier.fast,callbacks,review",
        VERIFIER_DATABASE__URL=pg_cluster.url,
        VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0",
        VERIFIER_API__OUTBOX_SWEEP_S="1",
        VERIFIER_API__OUTBOX_GRACE_S="2",
    )
    yield service, pg_cluster
    service.stop_all()
    broker.stop()


def test_postgres_restart_under_load_loses_nothing(
    own_pg_service: tuple[Service, PostgresCluster],
) -> None:
    service, cluster = own_pg_service
    jobs = 8
    bodies = [{"items": molecules(nci_smiles(64, offset=64 * n))} for n in range(jobs)]
    keys = [uuid.uuid4().hex for _ in range(jobs)]
    locations: list[str] = []
    with service.client() as client:
        for n in range(jobs):
            if n == 3:
                cluster.restart()  # jobs 0-2 are being verified; 3-7 arrive while it is down
            locations.append(post_until_accepted(client, bodies[n], keys[n]).headers["location"])
        for location in locations:
            assert_exactly_once(client, poll_job(client, location, timeout=120))
        # The same keys give the same jobs: nothing was stored twice.
        again = [post_until_accepted(client, b, k) for b, k in zip(bodies, keys, strict=True)]
        assert [r.headers["location"] for r in again] == locations
    assert "Internal Server Error" not in service.log_tail("api", 1_000_000)


@pytest.fixture
def restartable_broker(tmp_path: Path, own_pg_url: str) -> Iterator[tuple[Service, RedisServer]]:
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    # The API does not sweep: only the workers recover lost work here.
    service = start_service(
        tmp_path,
        "ladder,callbacks",
        VERIFIER_DATABASE__URL=own_pg_url,
        VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0",
        VERIFIER_API__OUTBOX_SWEEP_S="0",
        VERIFIER_WORKER__SWEEP_S="1",
    )
    yield service, broker
    service.stop_all()
    broker.stop()


def test_redis_restart_with_queued_work_workers_alone_recover(
    restartable_broker: tuple[Service, RedisServer],
) -> None:
    service, broker = restartable_broker
    # The workers' sweep has seen this broker (its first round marks it): from here on, only a
    # broker that loses its data makes it send work again.
    until = time.monotonic() + 30
    while redis.Redis(port=broker.port).get(BROKER_MARKER) is None:
        assert time.monotonic() < until, "the workers' sweep never ran"
        time.sleep(0.2)
    # No worker consumes tier.fast yet: the jobs' tier tasks wait in Redis...
    with service.client() as client:
        locations = [
            client.post(
                "/v1/rewards", json={"items": molecules(nci_smiles(16, offset=1000 + 16 * n))}
            ).headers["location"]
            for n in range(4)
        ]
        assert redis.Redis(port=broker.port).llen("tier.fast") == 4
        # ...when Redis restarts without persistence and loses them.
        broker.stop()
        broker.start()
        assert redis.Redis(port=broker.port).llen("tier.fast") == 0
        service.start_worker("fast", "tier.fast")
        for location in locations:
            assert_exactly_once(client, poll_job(client, location, timeout=60))
    assert "sent lost tier work again" in service.log_tail("worker", 1_000_000)


@pytest.fixture
def no_fast_worker_yet(tmp_path: Path) -> Iterator[tuple[Service, RedisServer]]:
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    service = start_service(
        tmp_path, "ladder,callbacks", VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0"
    )
    yield service, broker
    service.stop_all()
    broker.stop()


def _queued_task_ids(client: redis.Redis, queue: str) -> list[str]:
    return [json.loads(m)["headers"]["id"] for m in client.lrange(queue, 0, -1)]


def test_work_that_keeps_killing_its_worker_is_given_up(
    no_fast_worker_yet: tuple[Service, RedisServer],
) -> None:
    # A task's deliveries are counted; each one after the first means a worker died under it.
    # Here the counts of two queued tasks are set as if they had killed workers already.
    service, broker = no_fast_worker_yet
    client_redis = redis.Redis(port=broker.port)
    with service.client() as client:
        poison = client.post("/v1/rewards", json={"items": molecules(["CCO"])})
        batch = client.post("/v1/rewards", json={"items": molecules(["CCN", "CCC", "CCCl"])})
        poison_task, batch_task = _queued_task_ids(client_redis, "tier.fast")[::-1]
        client_redis.set(f"verifier:deliveries:{poison_task}", 3)  # next: the 4th delivery
        client_redis.set(f"verifier:deliveries:{batch_task}", 1)  # next: the 2nd delivery
        service.start_worker("fast", "tier.fast")
        given_up = poll_job(client, poison.headers["location"], timeout=30)
        split = poll_job(client, batch.headers["location"], timeout=30)
    reward = given_up["items"][0]["reward"]
    assert given_up["status"] == "completed"
    assert reward["status"] == "infra_error"
    assert "ended its worker process 3 times" in reward["reason"]
    # The batch delivered again was split, and every item still got its reward.
    assert [i["reward"]["status"] for i in split["items"]] == ["scored"] * 3
    assert "splitting its batch" in service.log_tail("fast", 100_000)


def test_api_killed_while_trainers_wait_same_jobs_after_restart(live_service: Service) -> None:
    # Trainers wait on their requests (wait_s) when the API is SIGKILLed; they retry with their
    # Idempotency-Key until it is back, and get the jobs they first submitted, complete.
    keys = [uuid.uuid4().hex for _ in range(3)]
    bodies = [
        {"items": molecules(nci_smiles(48, offset=3000 + 48 * n)), "wait_s": 30} for n in range(3)
    ]
    with live_service.client() as client:
        first = [
            client.post(
                "/v1/rewards", json={**b, "wait_s": 0}, headers={"Idempotency-Key": k}
            ).json()["id"]
            for b, k in zip(bodies, keys, strict=True)
        ]
    port = live_service.base_url.rsplit(":", 1)[1]
    answers: list[dict[str, Any]] = []

    def trainer(body: dict[str, Any], key: str) -> None:
        retry = RetryPolicy(retries=40, backoff_s=0.25, max_backoff_s=1.0)
        with VerifierClient(live_service.base_url, api_key=live_service.api_key, retry=retry) as c:
            answers.append(c.submit(body["items"], wait_s=30, idempotency_key=key).model_dump())

    threads = [threading.Thread(target=trainer, args=bk) for bk in zip(bodies, keys, strict=True)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    live_service.stop("api", sig=9)
    time.sleep(1.0)
    api = live_service.start("api", "api", "--port", port)
    wait_ready(live_service.base_url, process=api)
    for thread in threads:
        thread.join(timeout=90)
    assert sorted(a["id"] for a in answers) == sorted(first)
    with live_service.client() as client:
        for job_id in first:
            assert_exactly_once(client, poll_job(client, f"/v1/jobs/{job_id}", timeout=60))
