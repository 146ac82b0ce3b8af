"""A request that waits (`wait_s`) on a job returns as soon as the job is finished, whatever
way it finished: completed, or cancelled by an operator.

Before: the reward API waited for "completed" only, so an Idempotency-Key sent again for a job
an operator had cancelled waited its whole wait_s for a wake-up that never comes."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from support import Service, fresh_molecules

#: The DFT rung's queue (tier.hifi) has no worker in `live_service`: a job waits there until
#: it is cancelled (or its hour-long deadline passes).
QED = {"name": "qed", "tier": "chem.fast", "component": "qed"}


@pytest.fixture(scope="module")
def policy(live_service: Service) -> str:
    name = f"wait-dft-{uuid.uuid4().hex[:6]}"
    document = {
        "name": name,
        "ladders": {"molecule": [{"tier": "chem.fast"}, {"tier": "chem.dft"}]},
        "reward": {"molecule": {"components": [QED]}},
    }
    with live_service.client() as client:
        created = client.post("/v1/policies", json={"document": document})
    assert created.status_code == 201, created.text
    return name


def _body(policy: str, wait_s: float) -> dict[str, Any]:
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in fresh_molecules(2)]
    return {"policy": policy, "items": items, "wait_s": wait_s, "deadline_s": 3600}


def _cancelled(job: dict[str, Any]) -> None:
    assert job["status"] == "completed"  # as the trainer sees a cancelled job: finished
    for item in job["items"]:
        assert item["reward"]["status"] == "infra_error"
        assert item["reward"]["reason"].startswith("cancelled: by operator"), item["reward"]


def test_a_request_sent_again_for_a_cancelled_job_does_not_wait(
    live_service: Service, policy: str
) -> None:
    key = uuid.uuid4().hex
    body = _body(policy, wait_s=1)
    with live_service.client(timeout=60) as client:
        first = client.post("/v1/rewards", json=body, headers={"Idempotency-Key": key})
        assert first.status_code == 202, first.text  # the DFT rung waits on its queue
        job_id = first.json()["id"]
        cancel = client.post(f"/v1/console/jobs/{job_id}/cancel")
        assert cancel.status_code == 200, cancel.text

        started = time.monotonic()
        again = client.post(
            "/v1/rewards", json={**body, "wait_s": 20}, headers={"Idempotency-Key": key}
        )
        took = time.monotonic() - started
    assert again.status_code == 200, again.text
    assert again.json()["id"] == job_id
    _cancelled(again.json())
    assert took < 5, f"a request on a cancelled job waited {took:.1f} s of its wait_s=20"


def test_a_waiting_request_returns_when_its_job_is_cancelled(
    live_service: Service, policy: str
) -> None:
    answer: dict[str, Any] = {}

    def wait() -> None:
        with live_service.client(timeout=60) as client:
            response = client.post("/v1/rewards", json=_body(policy, wait_s=25))
        answer["response"] = response
        answer["at"] = time.monotonic()

    waiting = threading.Thread(target=wait)
    waiting.start()
    with live_service.client() as client:
        deadline = time.monotonic() + 20
        running: list[dict[str, Any]] = []
        while not running and time.monotonic() < deadline:
            rows = client.get("/v1/console/jobs", params={"policy": policy, "status": "running"})
            running = rows.json()
            time.sleep(0.2)
        assert len(running) == 1, running
        cancelled_at = time.monotonic()
        cancel = client.post(f"/v1/console/jobs/{running[0]['id']}/cancel")
        assert cancel.status_code == 200, cancel.text
    waiting.join(timeout=40)
    response: httpx.Response = answer["response"]
    assert response.status_code == 200, response.text
    _cancelled(response.json())
    woken_after = answer["at"] - cancelled_at
    assert woken_after < 5, f"the waiting request returned {woken_after:.1f} s after the cancel"
