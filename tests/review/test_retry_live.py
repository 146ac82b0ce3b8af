"""The trainer's revision contract through a live service (API and workers, PostgreSQL, Redis)
when an operator cancels a job whose items wait for people and then retries them: the SSE
stream opened without Last-Event-ID does not end at the cancel's job.finished but delivers
people's scores as item.revised revision 2 and ends at the job's last job.finished; the changes
feed and GET /v1/jobs/{id} say the same."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import httpx
from support import Service

RUBRIC: dict[str, Any] = {
    "dimensions": [{"name": "helpful", "type": "score", "min": 1, "max": 5}],
    "comment": False,
}


def _stream(client: httpx.Client, job_id: str, into: list[dict[str, Any]]) -> None:
    """A job's SSE stream read to its end, each event's type and data into `into`."""
    fields: dict[str, str] = {}
    with client.stream("GET", f"/v1/jobs/{job_id}/events", timeout=90) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line == "":
                if "data" in fields:
                    into.append({"type": fields["event"], **json.loads(fields["data"])})
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value


def _rewards(client: httpx.Client, job_id: str) -> list[tuple[str, int | None]]:
    job = client.get(f"/v1/jobs/{job_id}").json()
    return [(i["reward"]["status"], i["reward"]["revision"]) for i in job["items"]]


def test_a_retried_cancelled_job_delivers_revision_two_on_sse_feed_and_get(
    live_service: Service,
) -> None:
    tag = uuid.uuid4().hex[:6]
    queue = f"retry-{tag}"
    trainer = live_service.client(api_key=live_service.create_key(f"tr-{tag}", "trainer"))
    reviewer = live_service.client(api_key=live_service.create_key(f"rv-{tag}", "reviewer"))
    operator = live_service.client(api_key=live_service.create_key(f"op-{tag}", "operator"))
    with trainer, reviewer, operator:
        document = {"name": f"retry-{tag}", "ladders": {"text": [
            {"tier": "human", "config": {"queue": queue, "rubric": RUBRIC}}]}}  # fmt: skip
        made = operator.post("/v1/policies", json={"document": document})
        assert made.status_code == 201, made.text
        since = trainer.get("/v1/rewards/changes", params={"since": "now"}).json()["next"]
        items = [{"kind": "text", "payload": {"text": f"{tag} {i}"}} for i in range(2)]
        posted = trainer.post("/v1/rewards", json={"policy": f"retry-{tag}", "items": items})
        assert posted.status_code == 202, posted.text
        job_id = posted.json()["id"]

        assert operator.post(f"/v1/console/jobs/{job_id}/cancel").status_code == 200
        paths = operator.get(f"/v1/console/jobs/{job_id}").json()
        assert paths["job"]["status"] == "cancelled"
        assert all(f"by operator op-{tag}" in i["reason"] for i in paths["items"])
        assert _rewards(trainer, job_id) == [("infra_error", 1)] * 2
        retried = operator.post(f"/v1/console/jobs/{job_id}/retry")
        assert retried.status_code == 200, retried.text
        # The old reward stays until the new one replaces it.
        assert _rewards(trainer, job_id) == [("infra_error", 1)] * 2
        queues = {q["name"]: q["waiting"] for q in reviewer.get("/v1/review/queues").json()}
        assert queues[queue] == 2  # one task per item

        streamed: list[dict[str, Any]] = []
        reader = threading.Thread(target=_stream, args=(trainer, job_id, streamed))
        reader.start()  # a new connection, no Last-Event-ID: it replays the cancel first
        time.sleep(1.0)
        assert reader.is_alive(), "the stream ended at the cancel's job.finished"
        for _ in range(2):
            lease = reviewer.post(f"/v1/review/queues/{queue}/next")
            assert lease.status_code == 200, lease.text
            answered = reviewer.post(
                f"/v1/review/leases/{lease.json()['lease_id']}/submit",
                json={"values": {"helpful": 5}}, headers={"Idempotency-Key": uuid.uuid4().hex},
            )  # fmt: skip
            assert answered.status_code == 204, answered.text
        assert reviewer.post(f"/v1/review/queues/{queue}/next").status_code == 204
        reader.join(timeout=60)
        assert not reader.is_alive(), "the stream did not end at the job's last job.finished"

        assert [e["type"] for e in streamed] == [
            "item.finished", "item.finished", "job.finished",
            "item.revised", "item.revised", "job.finished",
        ]  # fmt: skip
        revised = [e["data"] for e in streamed if e["type"] == "item.revised"]
        assert {(d["revision"], d["reward"]["status"], d["reward"]["value"]) for d in revised} == {
            (2, "scored", 1.0)
        }
        finished = [e["data"]["status"] for e in streamed if e["type"] == "job.finished"]
        assert finished == ["cancelled", "completed"]

        feed = trainer.get("/v1/rewards/changes", params={"since": since}).json()["changes"]
        assert sorted((c["index"], c["revision"], c["type"]) for c in feed) == [
            (0, 1, "item.finished"), (0, 2, "item.revised"),
            (1, 1, "item.finished"), (1, 2, "item.revised"),
        ]  # fmt: skip
        assert _rewards(trainer, job_id) == [("scored", 2)] * 2
        assert trainer.get(f"/v1/jobs/{job_id}").json()["status"] == "completed"
