"""Rewards that wait for people reach the trainer on a live service (its own PostgreSQL
database and Redis, with the review and callbacks queues and a webhook secret): people's answer
after the job's deadline revises the fallback reward (GET job, changes feed, SSE, webhook), and a
reviewer judging in the browser with hotkeys alone turns a pending reward into a scored one that
the trainer sees through its open SSE stream and a signed webhook."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from review_page_support import new_reviewer, sign_in, wait_for_task
from support import Service, private_backends, start_service

from verifier_service.client import verify_webhook

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
SCHEMA = {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}}}
RUBRIC = {
    "dimensions": [
        {"name": "sensible", "type": "score", "min": 1, "max": 5},
        {"name": "safe", "type": "label", "labels": ["yes", "no"]},
    ]
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with private_backends("review-late") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("review-late"),
            "ladder,tier.fast,callbacks,review",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
            VERIFIER_WEBHOOKS__SECRET=SECRET,
            VERIFIER_WEBHOOKS__ALLOWED_HOSTS='["127.0.0.1"]',
            VERIFIER_WEBHOOKS__RETRY_FIRST_S="0.5",
            VERIFIER_WEBHOOKS__RETRY_FOR_S="5",
            VERIFIER_WEBHOOKS__STREAM_KEEPALIVE_S="1",
        )
        try:
            yield service
        finally:
            service.stop_all()


class Receiver:
    """A trainer's webhook endpoint: records every request, answers 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.times: list[float] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.requests.append((dict(self.headers), body))
                receiver.times.append(time.time())
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/rewards"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self, n: int, timeout: float = 30) -> list[dict[str, Any]]:
        """The first `n` deliveries, each verified against the secret (raises if forged)."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < n and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(self.requests) >= n, f"{len(self.requests)} webhooks, wanted {n}"
        return [verify_webhook(SECRET, h, b) for h, b in self.requests[:n]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def _stream(client: httpx.Client, job_id: str, after: int | None = None) -> list[dict[str, Any]]:
    """A job's SSE stream read to its end (it ends after job.finished): the events."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    events: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers, timeout=90) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line == "":
                if "data" in fields:
                    events.append({**json.loads(fields["data"]), "received": time.time()})
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
    return events


def _policy(client: httpx.Client, kind: str, ladder: list[dict[str, Any]]) -> str:
    name = f"late-{uuid.uuid4().hex[:8]}"
    made = client.post("/v1/policies", json={"document": {"name": name, "ladders": {kind: ladder}}})
    assert made.status_code == 201, made.text
    return name


def _human(queue: str) -> dict[str, Any]:
    return {"tier": "human", "config": {"queue": queue, "rubric": RUBRIC}}


def _job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_an_answer_after_the_deadline_revises_the_reward_everywhere(
    service: Service, receiver: Receiver
) -> None:
    reviewer_key = service.create_key(f"late-rev-{uuid.uuid4().hex[:6]}", "reviewer")
    queue = f"late-{uuid.uuid4().hex[:8]}"
    with service.client() as trainer:
        policy = _policy(trainer, "json", [{"tier": "schema", "config": {"schema": SCHEMA}},
                                           _human(queue)])  # fmt: skip
        item = {"kind": "json", "payload": {"tool": uuid.uuid4().hex}}
        body = {"policy": policy, "items": [item], "deadline_s": 3,
                "callback": {"url": receiver.url}}  # fmt: skip
        posted = trainer.post("/v1/rewards", json=body)
        assert posted.status_code == 202, posted.text
        job_id = posted.json()["id"]
        first = _stream(trainer, job_id)  # ends at the deadline, with the fallback
        assert [e["type"] for e in first] == ["item.finished", "job.finished"]
        fallback = first[0]["data"]["reward"]
        assert (fallback["status"], fallback["revision"], fallback["fidelity"]) == (
            "scored", 1, "schema"
        )  # fmt: skip
        assert "human had not answered; its answer will revise this reward" in fallback["reason"]
        assert _job(trainer, job_id)["status"] == "completed"
        since = trainer.get("/v1/rewards/changes", params={"since": "now"}).json()["next"]

        with service.client(api_key=reviewer_key) as reviewer:  # the task is still open
            lease = reviewer.post(f"/v1/review/queues/{queue}/next")
            assert lease.status_code == 200, lease.text
            answer = {"values": {"sensible": 4, "safe": "yes"}}
            submitted = reviewer.post(
                f"/v1/review/leases/{lease.json()['lease_id']}/submit",
                json=answer, headers={"Idempotency-Key": uuid.uuid4().hex},
            )  # fmt: skip
            assert submitted.status_code == 204, submitted.text

        job = _job(trainer, job_id)
        assert job["status"] == "completed"
        revised = job["items"][0]["reward"]
        assert (revised["status"], revised["revision"], revised["fidelity"]) == (
            "scored", 2, "human"
        )  # fmt: skip
        assert revised["value"] == pytest.approx(0.75)  # 4 on 1..5
        changes = trainer.get("/v1/rewards/changes", params={"since": since}).json()["changes"]
        assert [(c["job_id"], c["type"], c["revision"]) for c in changes] == [
            (job_id, "item.revised", 2)
        ]
        late = _stream(trainer, job_id, after=first[-1]["id"])
        assert [(e["type"], e["data"]["revision"]) for e in late] == [("item.revised", 2)]
        assert late[0]["data"]["reward"] == revised

    hooks = {e["type"]: e for e in receiver.events(3)}  # sent in parallel: in any order
    assert sorted(hooks) == ["item.finished", "item.revised", "job.finished"]
    assert hooks["item.finished"]["data"]["reward"] == fallback
    assert hooks["item.revised"]["data"]["reward"] == revised


def test_the_trainer_sees_a_hotkey_judgement_through_sse_and_a_signed_webhook(
    service: Service,
    browser: Any,
    receiver: Receiver,
) -> None:
    name = new_reviewer(service)
    queue = f"live-{uuid.uuid4().hex[:8]}"
    text = f"Is this sensible? {uuid.uuid4().hex}"
    with service.client() as trainer:
        policy = _policy(trainer, "text", [_human(queue)])
        body = {"policy": policy, "items": [{"kind": "text", "payload": {"text": text}}],
                "callback": {"url": receiver.url}}  # fmt: skip
        posted = trainer.post("/v1/rewards", json=body)
        assert posted.status_code == 202, posted.text
        job_id = posted.json()["id"]
        pending = _job(trainer, job_id)["items"][0]["reward"]
        assert pending["status"] == "pending"
        assert "waiting for people" in pending["reason"]

        streamed: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: streamed.extend(_stream(trainer, job_id)))
        reader.start()  # the trainer's stream is open while the reviewer works
        time.sleep(0.5)
        assert streamed == []

        context, page = sign_in(browser, service.base_url, name)
        try:
            wait_for_task(page, service.base_url, queue)
            assert page.locator(".item .text").inner_text() == text
            page.keyboard.press("4")  # sensible: 4
            page.keyboard.press("1")  # safe: yes
            answered = time.time()
            page.keyboard.press("Control+Enter")
            page.wait_for_selector("text=No more tasks")
        finally:
            context.close()
        reader.join(timeout=60)
        assert not reader.is_alive(), "the SSE stream did not end after job.finished"

    assert [e["type"] for e in streamed] == ["item.finished", "job.finished"]
    reward = streamed[0]["data"]["reward"]
    assert (reward["status"], reward["fidelity"], reward["revision"]) == ("scored", "human", 1)
    assert reward["value"] == pytest.approx(0.75)
    print(f"answer to SSE item.finished: {streamed[0]['received'] - answered:.3f} s")
    hooks = {e["type"]: e for e in receiver.events(2)}
    assert sorted(hooks) == ["item.finished", "job.finished"]
    assert hooks["item.finished"]["data"]["reward"] == reward
    assert all(e["job_id"] == job_id for e in hooks.values())
    assert all(h["webhook-signature"].startswith("v1,") for h, _ in receiver.requests)
    print(f"answer to first webhook received: {min(receiver.times) - answered:.3f} s")
