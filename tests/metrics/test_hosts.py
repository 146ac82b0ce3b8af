"""The per-host model: each host (here: a metrics directory) is scraped on its own, a worker
host on its worker port; the hosts' counters add up to what was done."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import Service, free_port, poll_job, start_service

N_JOBS = 4
SUCCEEDED = "celery_task_succeeded_total"


def _succeeded(text: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == SUCCEEDED and s.labels.get("name") == "tier.chem_fast.verify"
    )


@pytest.fixture(scope="module")
def two_hosts(
    tmp_path_factory: pytest.TempPathFactory,
    private_redis: Callable[[], AbstractContextManager[tuple[str, str]]],
) -> Iterator[tuple[Service, Service, int]]:
    """Host A: the API and a worker; host B: a worker alone, serving its metrics on a port."""
    with private_redis() as (pg_url, redis_url):
        yield from _hosts(tmp_path_factory, pg_url, redis_url)


def _hosts(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, redis_url: str
) -> Iterator[tuple[Service, Service, int]]:
    a = start_service(
        tmp_path_factory.mktemp("host-a"), "ladder,tier.fast",
        VERIFIER_DATABASE__URL=pg_url, VERIFIER_BROKER__URL=redis_url,
        VERIFIER_API__INLINE_MAX_ITEMS="0",
    )  # fmt: skip
    port = free_port()
    b_dir = tmp_path_factory.mktemp("host-b")
    b_env = {
        **a.env,
        "VERIFIER_DATA_DIR": str(b_dir),
        "VERIFIER_METRICS__WORKER_PORT": str(port),
    }
    b = dataclasses.replace(a, env=b_env, data_dir=b_dir, processes={}, logs={})
    try:
        b.start_worker("worker-b", "ladder,tier.fast")
        yield a, b, port
    finally:
        b.stop_all()
        a.stop_all()


def test_hosts_add_up_to_the_work_done(two_hosts: tuple[Service, Service, int]) -> None:
    a, _, port = two_hosts
    with a.client() as client:
        before = _succeeded(client.get("/metrics").text)
        locations = []
        for _ in range(N_JOBS):
            bits = uuid.uuid4().int
            smiles = "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))
            body = {
                "policy": "default",
                "items": [{"kind": "molecule", "payload": {"smiles": smiles}}],
            }
            locations.append(client.post("/v1/rewards", json=body).headers["location"])
        assert all(poll_job(client, loc, timeout=60)["status"] == "completed" for loc in locations)
        deadline = time.monotonic() + 20
        while True:
            on_a = _succeeded(client.get("/metrics").text) - before
            # The worker port needs no key: it serves on the host's private interface.
            response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            assert response.status_code == 200
            on_b = _succeeded(response.text)
            if on_a + on_b >= N_JOBS or time.monotonic() > deadline:
                break
            time.sleep(0.3)
    assert on_a + on_b == N_JOBS
    # Host B's port shows its own processes only: no HTTP series of the API's host.
    assert "verifier_http_request_duration_seconds" not in response.text
