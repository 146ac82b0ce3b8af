"""Operators find jobs, read each item's path up the ladder, and cancel a running job.

Runs after test_console_api and test_console_browser (file order): the job it cancels would
change the overview's counts that those check."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from console_support import Console, unique_smiles


def test_search_by_principal_policy_status_and_time(console: Console) -> None:
    first, second = console.jobs
    with console.service.client() as client:

        def ids(**params: Any) -> list[str]:
            answer = client.get("/v1/console/jobs", params=params)
            assert answer.status_code == 200, answer.text
            return [row["id"] for row in answer.json()]

        assert ids(principal="trainer-a") == [first["id"]]
        assert ids(principal="trainer-b", status="completed") == [second["id"]]
        assert ids(policy="default") == [second["id"], first["id"]]  # newest first
        assert ids(policy="default", status="running") == []
        assert ids(since=first["created_at"], until=second["created_at"]) == [first["id"]]
        assert ids(since="2999-01-01T00:00:00") == []
        bad = client.get("/v1/console/jobs", params={"status": "lost"})
    assert bad.status_code == 422
    assert "status" in bad.json()["message"]


def test_job_paths_match_the_job(console: Console) -> None:
    job = console.jobs[1]
    with console.service.client() as client:
        paths = client.get(f"/v1/console/jobs/{job['id']}").json()
        missing = client.get("/v1/console/jobs/nosuchjob")
    assert missing.status_code == 404
    assert paths["job"]["principal"] == "trainer-b"
    assert paths["job"]["n_done"] == job["n_done"]
    for item, shown in zip(job["items"], paths["items"], strict=True):
        assert [r["tier"] for r in shown["path"]] == [v["tier"] for v in item["verdicts"]]
        assert [r["status"] for r in shown["path"]] == [v["status"] for v in item["verdicts"]]
        assert [r["cached"] for r in shown["path"]] == [v["cached"] for v in item["verdicts"]]
        assert shown["reward_status"] == item["reward"]["status"]
        assert shown["reward_value"] == item["reward"]["value"]
        assert shown["cost_units"] == pytest.approx(item["reward"]["cost"]["cost_units"])


def test_cancel_a_job_that_waits_on_a_queue_nobody_serves(console: Console) -> None:
    # No worker consumes tier.hifi here: without the cancel, the DFT step would wait an hour.
    qed = {"name": "qed", "tier": "chem.fast", "component": "qed"}
    policy = {
        "name": f"console-dft-{uuid.uuid4().hex[:6]}",
        "ladders": {"molecule": [{"tier": "chem.fast"}, {"tier": "chem.dft"}]},
        "reward": {"molecule": {"components": [qed]}},
    }
    items = [{"kind": "molecule", "payload": {"smiles": unique_smiles()}} for _ in range(2)]
    with console.service.client() as client:
        assert client.post("/v1/policies", json={"document": policy}).status_code == 201
        body = {"policy": policy["name"], "items": items, "wait_s": 2, "deadline_s": 3600}
        submitted = client.post("/v1/rewards", json=body)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        running = client.get("/v1/console/jobs", params={"status": "running"}).json()
        assert [row["id"] for row in running] == [job_id]

        trainer = console.service.create_key("console-trainer-2", "trainer")
        denied = httpx.post(
            f"{console.service.base_url}/v1/console/jobs/{job_id}/cancel",
            headers={"Authorization": f"Bearer {trainer}"},
        )
        assert denied.status_code == 403
        cancelled = client.post(f"/v1/console/jobs/{job_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        again = client.post(f"/v1/console/jobs/{job_id}/cancel")
        job = client.get(f"/v1/jobs/{job_id}").json()
        audit = client.get("/v1/audit", params={"action": "job.cancel"})
    assert cancelled.json()["job"]["status"] == "cancelled"
    assert again.status_code == 409
    # The trainer's own view: finished, every item an infra_error that says why.
    assert job["status"] == "completed"
    for item in job["items"]:
        assert item["reward"]["status"] == "infra_error"
        assert item["reward"]["reason"].startswith("cancelled: by operator test-root")
        assert [v["tier"] for v in item["verdicts"]] == ["chem.fast"]
    assert cancelled.json()["job"]["infra_errors"] == 2
    assert audit.status_code == 200, audit.text
    assert any(e["target"] == job_id and e["actor"] == "test-root" for e in audit.json())
