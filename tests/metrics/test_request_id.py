"""The request id: from the API's X-Request-ID into the job and into the logs of the Celery
tasks the request caused, carried in the tasks' message headers."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from support import Service, poll_job

from verifier_service.metrics import propagation


def _molecule() -> dict[str, Any]:
    bits = uuid.uuid4().int
    smiles = "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))
    return {"kind": "molecule", "payload": {"smiles": smiles}}


def _task_lines(service: Service, job_id: str) -> list[str]:
    """The workers' log lines of finished tasks of a job."""
    text = service.log_tail("worker", 10**7) + service.log_tail("worker2", 10**7)
    return [line for line in text.splitlines() if "task finished" in line and job_id in line]


def _wait_for_lines(service: Service, job_id: str) -> list[str]:
    deadline = time.monotonic() + 20
    while not (lines := _task_lines(service, job_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return lines


def test_a_callers_request_id_reaches_the_job_and_the_workers_logs(two_workers: Service) -> None:
    request_id = f"trainer-step-{uuid.uuid4().hex[:12]}"
    with two_workers.client() as client:
        response = client.post(
            "/v1/rewards",
            json={"policy": "default", "items": [_molecule(), _molecule()]},
            headers={"X-Request-ID": request_id},
        )
        assert response.status_code == 202, response.text
        assert response.headers["x-request-id"] == request_id
        job = poll_job(client, response.headers["location"], timeout=60)
    assert job["status"] == "completed"
    assert job["request_id"] == request_id

    lines = _wait_for_lines(two_workers, job["id"])
    assert lines, "no worker logged a finished task of the job"
    for line in lines:
        assert f"request_id={request_id}" in line, line
        assert "task=tier.chem_fast.verify" in line, line


def test_without_a_request_id_the_apis_own_is_stored(two_workers: Service) -> None:
    with two_workers.client() as client:
        response = client.post("/v1/rewards", json={"policy": "default", "items": [_molecule()]})
        assert response.status_code == 202, response.text
        given = response.headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", given)
        job = poll_job(client, response.headers["location"], timeout=60)
    assert job["request_id"] == given
    lines = _wait_for_lines(two_workers, job["id"])
    assert lines
    assert all(f"request_id={given}" in line for line in lines)


def test_two_requests_do_not_mix_their_ids(two_workers: Service) -> None:
    ids = [f"mix-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with two_workers.client() as client:
        locations = []
        for request_id in ids:
            response = client.post(
                "/v1/rewards",
                json={"policy": "default", "items": [_molecule()]},
                headers={"X-Request-ID": request_id},
            )
            locations.append(response.headers["location"])
        jobs = [poll_job(client, location, timeout=60) for location in locations]
    assert [j["request_id"] for j in jobs] == ids
    for job, request_id in zip(jobs, ids, strict=True):
        other = ids[1 - ids.index(request_id)]
        lines = _wait_for_lines(two_workers, job["id"])
        assert lines
        assert all(request_id in line and other not in line for line in lines)


# ---------------------------------------------------------------- the publish hook, in-process


@pytest.fixture
def bound() -> Iterator[None]:
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()


@pytest.mark.usefixtures("bound")
def test_publishing_copies_the_bound_ids_into_the_headers() -> None:
    structlog.contextvars.bind_contextvars(request_id="r-1", job_id="j-1", user="not carried")
    headers: dict[str, Any] = {"task": "tier.chem_fast.verify"}
    propagation._on_publish(sender="tier.chem_fast.verify", headers=headers, routing_key="q")
    assert headers == {"task": "tier.chem_fast.verify", "request_id": "r-1", "job_id": "j-1"}
    assert propagation.carried_context(headers) == {"request_id": "r-1", "job_id": "j-1"}


@pytest.mark.usefixtures("bound")
def test_publishing_keeps_ids_already_in_the_headers_and_adds_none_unbound() -> None:
    headers: dict[str, Any] = {"request_id": "from-caller"}
    propagation._on_publish(sender="x", headers=headers)
    assert headers == {"request_id": "from-caller"}
    structlog.contextvars.bind_contextvars(request_id="mine")
    propagation._on_publish(sender="x", headers=headers)
    assert headers["request_id"] == "from-caller"
    assert propagation.carried_context({"request_id": 5, "job_id": None}) == {}
