"""Through a live service (API and worker processes, PostgreSQL, Redis): a job whose policy
sends items to people is pending until a reviewer answers over the JSON API, then scored."""

from __future__ import annotations

import uuid
from typing import Any

from support import Service, poll_job

RUBRIC: dict[str, Any] = {
    "dimensions": [
        {"name": "helpful", "type": "score", "min": 1, "max": 5},
        {"name": "safe", "type": "label", "labels": ["yes", "no"]},
    ]
}


def _policy(service: Service, config: dict[str, Any]) -> Any:
    name = f"people-live-{uuid.uuid4().hex[:6]}"
    document = {"name": name, "ladders": {"text": [{"tier": "human", "config": config}]}}
    with service.client() as client:
        return client.post("/v1/policies", json={"document": document}), name


def test_a_bad_human_step_is_refused_naming_the_field(live_service: Service) -> None:
    response, _ = _policy(live_service, {"rubric": RUBRIC, "overlap": 0})
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert [e["loc"] for e in errors] == ["ladders.text[0].config"]
    assert errors[0]["msg"].startswith("overlap: ")
    response, _ = _policy(live_service, {"rubric": {"dimensions": []}})
    assert "rubric.dimensions" in response.json()["errors"][0]["msg"]


def test_a_pending_job_is_scored_when_a_reviewer_answers_over_the_api(
    live_service: Service,
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    response, policy = _policy(
        live_service, {"queue": queue, "guidelines": "Is it **helpful**?", "rubric": RUBRIC}
    )
    assert response.status_code == 201, response.text
    tag = uuid.uuid4().hex[:6]
    trainer = live_service.client(api_key=live_service.create_key(f"tr-{tag}", "trainer"))
    reviewer = live_service.client(api_key=live_service.create_key(f"rv-{tag}", "reviewer"))
    operator = live_service.client(api_key=live_service.create_key(f"op-{tag}", "operator"))
    text = f"How do I reset my password? ({uuid.uuid4().hex})"
    with trainer, reviewer, operator:
        created = trainer.post(
            "/v1/rewards",
            json={"policy": policy, "items": [{"kind": "text", "payload": {"text": text}}]},
        )
        assert created.status_code == 202, created.text
        location = created.headers["Location"]
        job = trainer.get(location).json()
        assert job["status"] == "running"
        assert job["items"][0]["reward"]["status"] == "pending"

        queues = {q["name"]: q for q in reviewer.get("/v1/review/queues").json()}
        assert queues[queue]["waiting"] == 1
        assert queues[queue]["guidelines_excerpt"] == "Is it **helpful**?"
        assert trainer.post(f"/v1/review/queues/{queue}/next").status_code == 403

        lease = reviewer.post(f"/v1/review/queues/{queue}/next")
        assert lease.status_code == 200, lease.text
        view = lease.json()
        assert view["task"]["payload"] == {"text": text}
        assert view["task"]["rubric"]["dimensions"][0]["name"] == "helpful"
        lease_id = view["lease_id"]
        assert reviewer.post(f"/v1/review/leases/{lease_id}/heartbeat").status_code == 200
        draft = reviewer.put(f"/v1/review/leases/{lease_id}/draft", json={"draft": {"helpful": 4}})
        assert draft.status_code == 204
        assert reviewer.get(f"/v1/review/leases/{lease_id}").json()["draft"] == {"helpful": 4}

        submit = f"/v1/review/leases/{lease_id}/submit"
        key = {"Idempotency-Key": uuid.uuid4().hex}
        bad = reviewer.post(submit, json={"values": {"helpful": 9, "safe": "yes"}}, headers=key)
        assert bad.status_code == 422
        assert "helpful" in bad.json()["message"]
        answer = {"values": {"helpful": 4, "safe": "yes"}, "comment": "clear steps"}
        assert reviewer.post(submit, json=answer, headers=key).status_code == 204
        assert reviewer.post(submit, json=answer, headers=key).status_code == 204  # a retry
        assert reviewer.post(f"/v1/review/queues/{queue}/next").status_code == 204

        job = poll_job(trainer, location, timeout=10)
        assert job["status"] == "completed"
        reward = job["items"][0]["reward"]
        assert reward["status"] == "scored"
        assert reward["fidelity"] == "human"
        assert reward["value"] == 0.75
        assert reviewer.get("/v1/review/stats/me").json()["answered"] == 1

        exported = operator.get("/v1/review/export.jsonl", params={"queue": queue})
        assert exported.status_code == 200
        lines = exported.text.splitlines()
        assert len(lines) == 1
        assert f"rv-{tag}" in lines[0]
        assert reviewer.get("/v1/review/export.csv").status_code == 403
