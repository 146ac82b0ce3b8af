"""End to end through real processes: uvicorn + Celery worker on PostgreSQL and Redis."""

from __future__ import annotations

import uuid

from support import Service, poll_job

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
README_REQUEST = {
    "policy": "default",
    "items": [
        {"kind": "molecule", "payload": {"smiles": ASPIRIN}},
        {"kind": "molecule", "payload": {"smiles": "C1CC"}},
        {
            "kind": "json",
            "payload": {"tool": "search", "args": {"q": "x"}},
            "reference": {"schema": {"type": "object", "required": ["tool", "args"]}},
        },
    ],
    "wait_s": 20,
}


def _unique_smiles() -> str:
    """A phenol ether with a random chain of 16 C/N atoms: a molecule no other test sends."""
    bits = uuid.uuid4().int
    return "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))


def test_readme_request_returns_scored_rewards(live_service: Service) -> None:
    with live_service.client() as client:
        response = client.post("/v1/rewards", json=README_REQUEST)
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["status"] == "completed"
    aspirin, broken, tool_call = job["items"]

    assert aspirin["reward"]["status"] == "scored"
    assert 0.5 < aspirin["reward"]["value"] < 0.6  # aspirin's QED is 0.55
    assert aspirin["reward"]["fidelity"] == "chem.fast"
    assert aspirin["verdicts"][0]["components"]["mw"] == __import__("pytest").approx(
        180.16, abs=0.01
    )
    assert aspirin["reward"]["provenance"] == [aspirin["verdicts"][0]["id"]]

    # An unclosed ring is the policy's fault: a scored zero with RDKit's reason, not an error.
    assert broken["reward"]["status"] == "scored"
    assert broken["reward"]["value"] == 0.0
    assert "invalid" in broken["reward"]["reason"]
    assert broken["verdicts"][0]["status"] == "failed"
    assert "ring" in broken["verdicts"][0]["feedback"].lower()

    assert tool_call["reward"] == {**tool_call["reward"], "status": "scored", "value": 1.0}
    assert tool_call["verdicts"][0]["tier"] == "schema"


def test_without_wait_returns_202_then_polling_gives_rewards(live_service: Service) -> None:
    body = {
        "policy": "default",
        # A molecule no other test scored: a cached reward would complete the job at once (200).
        "items": [{"kind": "molecule", "payload": {"smiles": _unique_smiles()}}],
    }
    with live_service.client() as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 202
        location = response.headers["location"]
        assert location == f"/v1/jobs/{response.json()['id']}"
        job = poll_job(client, location, timeout=20)
    assert job["status"] == "completed"
    assert job["items"][0]["reward"]["status"] == "scored"
    assert job["items"][0]["reward"]["value"] > 0


def test_idempotency_key_returns_the_same_job(live_service: Service) -> None:
    key = uuid.uuid4().hex
    body = {"policy": "default", "items": [{"kind": "molecule", "payload": {"smiles": "CCO"}}]}
    with live_service.client() as client:
        first = client.post("/v1/rewards", json=body, headers={"Idempotency-Key": key})
        second = client.post("/v1/rewards", json=body, headers={"Idempotency-Key": key})
        other = client.post(
            "/v1/rewards",
            json={**body, "items": [{"kind": "molecule", "payload": {"smiles": "CCN"}}]},
            headers={"Idempotency-Key": key},
        )
    assert first.json()["id"] == second.json()["id"]
    assert other.status_code == 409
    assert other.json()["job_id"] == first.json()["id"]


def test_unknown_job_is_404(live_service: Service) -> None:
    with live_service.client() as client:
        response = client.get("/v1/jobs/nope")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_readyz_checks_database_and_broker(live_service: Service) -> None:
    with live_service.client() as client:
        body = client.get("/readyz").json()
    assert body == {"ready": True, "checks": {"database": "ok", "broker": "ok"}}


def test_items_waiting_on_a_queue_without_workers_are_named(live_service: Service) -> None:
    # No worker consumes tier.hifi here: the DFT step can only end by the job's deadline.
    qed = {"name": "qed", "tier": "chem.fast", "component": "qed"}
    policy = {
        "name": f"needs-dft-{uuid.uuid4().hex[:6]}",
        "ladders": {"molecule": [{"tier": "chem.fast"}, {"tier": "chem.dft"}]},
        "reward": {"molecule": {"components": [qed]}},
    }
    item = {"kind": "molecule", "payload": {"smiles": "CCOC(=O)C"}}
    with live_service.client() as client:
        assert client.post("/v1/policies", json={"document": policy}).status_code == 201
        body = {"policy": policy["name"], "items": [item], "wait_s": 1, "deadline_s": 4}
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 202
        (warning,) = response.json()["warnings"]
        assert "chem.dft" in warning
        assert "'tier.hifi'" in warning
        job = poll_job(client, response.headers["location"], timeout=30)
    assert job["status"] == "completed"
    assert job["warnings"] == []
    assert job["items"][0]["reward"]["status"] == "scored"
    assert "deadline" in job["items"][0]["reward"]["reason"]
