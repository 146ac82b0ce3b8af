"""Code rewards end to end: the API, a Celery worker on tier.sandbox, a real Docker engine."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from support import Service

import docker
from tiers.code.pool import LABEL, OWNER_LABEL

TESTS = "from solution import add\nassert add(1, 2) == 3\nassert add(-1, 1) == 0\n"


def _worker_containers(client: docker.DockerClient, pids: set[int]) -> list[str]:
    """Sandbox containers owned by a pool of one of these processes."""
    out = []
    for info in client.api.containers(all=True, filters={"label": LABEL}):
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner.split(":")[1:2] and int(owner.split(":")[1]) in pids:
            out.append(info["Id"])
    return out


def _process_tree(pid: int) -> set[int]:
    import psutil

    root = psutil.Process(pid)
    return {root.pid, *(child.pid for child in root.children(recursive=True))}


def _with_pool_size(live: Service, pool_size: int) -> Service:
    """The live service's settings with another pool size, for workers of the test's own."""
    env = {**live.env, "VERIFIER_SANDBOX__POOL_SIZE": str(pool_size)}
    return replace(live, env=env, processes={}, logs={})


@pytest.fixture(scope="module")
def sandbox_worker(live_service: Service) -> Iterator[Service]:
    service = _with_pool_size(live_service, 4)
    service.start_worker("sandbox", "tier.sandbox", concurrency=1)
    yield service
    service.stop_all()


def test_sandbox_worker_warms_its_pool_before_any_candidate(sandbox_worker: Service) -> None:
    client = docker.from_env()
    pids = _process_tree(sandbox_worker.processes["sandbox"].pid)
    deadline = time.monotonic() + 60
    while len(_worker_containers(client, pids)) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(_worker_containers(client, pids)) >= 4, sandbox_worker.log_tail("sandbox")


def test_code_items_are_scored_by_their_tests(sandbox_worker: Service) -> None:
    right = {
        "kind": "code",
        "payload": {"code": "def add(a, b):\n    return a + b\n", "tests": TESTS},
    }
    wrong = {
        "kind": "code",
        "payload": {"code": "def add(a, b):\n    return a - b\n", "tests": TESTS},
    }
    with sandbox_worker.client(timeout=120) as client:
        response = client.post("/v1/rewards", json={"items": [right, wrong], "wait_s": 90})
    assert response.status_code == 200, response.text
    good, bad = response.json()["items"]
    assert good["reward"]["status"] == bad["reward"]["status"] == "scored"
    assert good["reward"]["value"] == 1.0, good["verdicts"][0]["feedback"]
    assert bad["reward"]["value"] < 1.0
    assert good["reward"]["fidelity"] == "code.sandbox"
    assert "AssertionError" in bad["verdicts"][0]["feedback"]


def test_stopped_worker_leaves_no_container(live_service: Service) -> None:
    service = _with_pool_size(live_service, 2)
    service.start_worker("sandbox-stop", "tier.sandbox", concurrency=1)
    pids = _process_tree(service.processes["sandbox-stop"].pid)
    client = docker.from_env()
    deadline = time.monotonic() + 60
    while len(_worker_containers(client, pids)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _worker_containers(client, pids)
    service.stop("sandbox-stop")
    deadline = time.monotonic() + 30
    while _worker_containers(client, pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _worker_containers(client, pids) == []
