"""Deferred rewards reach the trainer without polling: the SSE stream of a job (resumable with
Last-Event-ID), reward revisions in the changes feed (per principal), and signed webhooks that
are retried and recorded. Through a live API and Celery worker on PostgreSQL and Redis."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from support import (
    Service,
    free_port,
    fresh_molecules,
    poll_job,
    private_backends,
    start_service,
)

from verifier_service.client import VerifierClient, verify_webhook

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
KEEPALIVE_S = 1.5


def mol(smiles: str) -> dict[str, Any]:
    return {"kind": "molecule", "payload": {"smiles": smiles}}


def unique_mol() -> dict[str, Any]:
    # A molecule no other test scores: no cached verdict answers for it.
    return mol(fresh_molecules(1)[0])


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    # A database and a Redis database of its own: the callbacks of this service's jobs are
    # delivered by its own worker (which has the webhook secret), never by another test's.
    with private_backends("events") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("events"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
            VERIFIER_WEBHOOKS__SECRET=SECRET,
            VERIFIER_WEBHOOKS__ALLOWED_HOSTS='["127.0.0.1"]',
            VERIFIER_WEBHOOKS__RETRY_FIRST_S="0.5",
            VERIFIER_WEBHOOKS__RETRY_FOR_S="3",
            VERIFIER_WEBHOOKS__STREAM_KEEPALIVE_S=str(KEEPALIVE_S),
        )
        try:
            yield service
        finally:
            service.stop_all()


@pytest.fixture(scope="module")
def trainers(service: Service) -> tuple[str, str]:
    """Two keys with the trainer role only: each sees its own jobs."""
    suffix = uuid.uuid4().hex[:6]
    return (
        service.create_key(f"trainer-a-{suffix}", "trainer"),
        service.create_key(f"trainer-b-{suffix}", "trainer"),
    )


def read_stream(
    client: httpx.Client, job_id: str, last_event_id: int | None = None, timeout: float = 30
) -> tuple[list[dict[str, Any]], list[str]]:
    """Read a job's event stream to its end: the events (with their SSE fields) and comments."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    events: list[dict[str, Any]] = []
    comments: list[str] = []
    fields: dict[str, str] = {}
    with client.stream(
        "GET", f"/v1/jobs/{job_id}/events", headers=headers, timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        deadline = time.monotonic() + timeout
        for line in response.iter_lines():
            assert time.monotonic() < deadline, f"stream still open after {timeout} s: {events}"
            if line.startswith(":"):
                comments.append(line)
            elif line == "":
                if "data" in fields:
                    events.append(
                        {**json.loads(fields["data"]), "sse_id": fields["id"],
                         "sse_event": fields["event"], "received": time.time()}
                    )  # fmt: skip
                fields = {}
            else:
                name, _, value = line.partition(": ")
                fields[name] = value
    return events, comments


def test_sse_streams_item_and_job_events_and_resumes(service: Service) -> None:
    name = f"events-slow-{uuid.uuid4().hex[:6]}"
    with service.client() as client:
        # Items climb to chem.dft, whose queue no worker here consumes: they finish at the
        # job's deadline, while the stream below is already open.
        created = client.post("/v1/policies", json={"text": (
            f"name: {name}\n"
            "ladders: {molecule: [{tier: chem.fast}, {tier: chem.dft}]}\n"
            "reward: {molecule: {components: [{name: qed, tier: chem.fast, component: qed}]}}\n"
        )})  # fmt: skip
        assert created.status_code in (200, 201), created.text
        body = {"policy": name, "items": [unique_mol(), unique_mol()], "deadline_s": 4}
        submitted = client.post("/v1/rewards", json=body)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]

        events, comments = read_stream(client, job_id)
        assert [e["type"] for e in events] == ["item.finished", "item.finished", "job.finished"]
        assert sorted(e["data"]["index"] for e in events[:2]) == [0, 1]
        assert all(e["data"]["revision"] == 1 for e in events[:2])
        assert all(e["sse_event"] == e["type"] and e["sse_id"] == str(e["id"]) for e in events)
        ids = [e["id"] for e in events]
        assert ids == sorted(ids)
        assert len(set(ids)) == 3
        assert events[2]["data"] == {"status": "completed", "n_items": 2, "n_done": 2}
        # The stream was open for the ~4 s until the deadline: kept alive with comments.
        assert comments, "no keep-alive comment while waiting"
        # Woken by the Redis notification, not a slow poll: the event arrives right after it
        # was written.
        written = datetime.fromisoformat(events[2]["timestamp"]).timestamp()
        lag_s = events[2]["received"] - written
        print(f"SSE delivery lag after job.finished: {lag_s:.3f} s")
        assert lag_s < KEEPALIVE_S

        # The job's rewards agree with what was streamed.
        job = client.get(f"/v1/jobs/{job_id}").json()
        streamed = {e["data"]["index"]: e["data"]["reward"] for e in events[:2]}
        assert {i["index"]: i["reward"] for i in job["items"]} == streamed

        # Resumed after the first event: exactly the rest, then the stream ends.
        rest, _ = read_stream(client, job_id, last_event_id=ids[0])
        assert [e["id"] for e in rest] == ids[1:]
        # Resumed after job.finished: nothing more, and it ends instead of hanging.
        tail, _ = read_stream(client, job_id, last_event_id=ids[2], timeout=10)
        assert tail == []

        bad = client.get(f"/v1/jobs/{job_id}/events", headers={"Last-Event-ID": "abc"})
        assert bad.status_code == 422
        assert "not a cursor" in bad.json()["message"]


def test_a_job_finished_in_its_own_request_has_its_events_in_order(service: Service) -> None:
    """The inline lane finishes a small waiting job before its response: its events are written
    without reading their ids back (no callback needs them) and no wake-up is published (no one
    can be waiting yet). A stream opened afterwards must still show them all, in order, with
    ids it can resume from."""
    with service.client() as client:
        body = {"items": [unique_mol(), mol("CCO")], "wait_s": 30}
        done = client.post("/v1/rewards", json=body)
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed"
        job_id = done.json()["id"]
        events, _ = read_stream(client, job_id, timeout=10)
        assert [e["type"] for e in events] == ["item.finished", "item.finished", "job.finished"]
        assert sorted(e["data"]["index"] for e in events[:2]) == [0, 1]
        ids = [e["id"] for e in events]
        assert ids == sorted(ids)
        assert len(set(ids)) == 3
        streamed = {e["data"]["index"]: e["data"]["reward"] for e in events[:2]}
        assert {i["index"]: i["reward"] for i in done.json()["items"]} == streamed
        rest, _ = read_stream(client, job_id, last_event_id=ids[0], timeout=10)
        assert [e["id"] for e in rest] == ids[1:]


def test_python_client_streams_over_sse(service: Service) -> None:
    with VerifierClient(service.base_url, api_key=service.api_key) as client:
        job = client.submit([unique_mol(), unique_mol(), mol("CCO")])
        streamed = dict(client.stream(job.id, timeout_s=60))
        assert sorted(streamed) == [0, 1, 2]
        assert all(r.status == "scored" and r.revision == 1 for r in streamed.values())
        events = list(client.events(job.id))
        resumed = list(client.events(job.id, last_event_id=events[1].id))
        assert [e.id for e in resumed] == [e.id for e in events[2:]]
        assert resumed[-1].type == "job.finished"


def test_python_client_reads_the_changes_feed(service: Service) -> None:
    with VerifierClient(service.base_url, api_key=service.api_key) as client:
        start = client.changes(since="now")
        assert start.changes == []
        job = client.submit([unique_mol(), unique_mol()], wait_s=30)
        assert job.status == "completed"
        seen = [c for c in client.iter_changes(since=start.next) if c.job_id == job.id]
        assert sorted(c.index for c in seen) == [0, 1]
        rest = client.changes(since=seen[-1].cursor)
    assert {c.type for c in seen} == {"item.finished"}
    assert [c.reward for c in sorted(seen, key=lambda c: c.index)] == [
        i.reward.model_dump(mode="json") for i in job.items if i.reward
    ]
    assert [c for c in rest.changes if c.job_id == job.id] == []


def test_changes_feed_lists_revisions_per_principal(
    service: Service, trainers: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key_a, key_b = trainers
    with service.client(api_key=key_a) as a, service.client(api_key=key_b) as b:
        start_a = a.get("/v1/rewards/changes", params={"since": "now"}).json()["next"]
        start_b = b.get("/v1/rewards/changes", params={"since": "now"}).json()["next"]
        job_a = a.post("/v1/rewards", json={"items": [unique_mol(), unique_mol()], "wait_s": 20})
        job_b = b.post("/v1/rewards", json={"items": [unique_mol()], "wait_s": 20})
        assert job_a.status_code == job_b.status_code == 200, (job_a.text, job_b.text)
        job_a_id, job_b_id = job_a.json()["id"], job_b.json()["id"]

        # Page by page with the cursor: A sees its two rewards, one per page, then nothing.
        first = a.get("/v1/rewards/changes", params={"since": start_a, "limit": 1}).json()
        second = a.get("/v1/rewards/changes", params={"since": first["next"], "limit": 1}).json()
        third = a.get("/v1/rewards/changes", params={"since": second["next"]}).json()
        seen = first["changes"] + second["changes"]
        assert [(c["job_id"], c["revision"], c["type"]) for c in seen] == [
            (job_a_id, 1, "item.finished")
        ] * 2
        assert sorted(c["index"] for c in seen) == [0, 1]
        assert third == {"changes": [], "next": second["next"]}
        # B sees only its own job's reward; A's job is as absent to B as a missing one.
        mine = b.get("/v1/rewards/changes", params={"since": start_b}).json()["changes"]
        assert [(c["job_id"], c["index"]) for c in mine] == [(job_b_id, 0)]
        assert b.get(f"/v1/jobs/{job_a_id}/events").status_code == 404
        assert b.get(f"/v1/jobs/{job_a_id}/deliveries").status_code == 404

        # Item 1 of A's job gets a new reward later (as the human tier does when people answer
        # after a deadline fallback): revision 2, in the feed and in the job.
        _revise(service, monkeypatch, job_a_id, index=1, value=0.123)
        changed = a.get("/v1/rewards/changes", params={"since": second["next"]}).json()
        assert [(c["index"], c["revision"], c["type"]) for c in changed["changes"]] == [
            (1, 2, "item.revised")
        ]
        assert changed["changes"][0]["reward"]["value"] == 0.123
        item = a.get(f"/v1/jobs/{job_a_id}").json()["items"][1]
        assert (item["reward"]["revision"], item["reward"]["value"]) == (2, 0.123)
        # A stream resumed after job.finished delivers the revision, then ends.
        finished_id = max(e["id"] for e in read_stream(a, job_a_id)[0])
        late, _ = read_stream(a, job_a_id, last_event_id=finished_id)
        assert [(e["type"], e["data"]["revision"]) for e in late] == [("item.revised", 2)]
        assert b.get(f"/v1/rewards/changes?since={changed['next']}").json()["changes"] == []

        bad = a.get("/v1/rewards/changes", params={"since": "yesterday"})
        assert bad.status_code == 422
        assert bad.json()["error"] == "invalid_request"


def _revise(
    service: Service, monkeypatch: pytest.MonkeyPatch, job_id: str, *, index: int, value: float
) -> None:
    """Give item `index` of a finished job a new reward through the ladder's revision hook,
    in this process, against the service's database and broker."""
    for name, env_value in service.env.items():
        if name.startswith("VERIFIER_"):
            monkeypatch.setenv(name, env_value)
    from verifier_service.core.broker import celery_app
    from verifier_service.core.db import reset_engine_cache, transaction
    from verifier_service.jobs.repository import items_of
    from verifier_service.ladder import dispatch
    from verifier_service.ladder.operations import revise_reward
    from verifier_service.ladder.schemas import Reward, RewardStatus
    from verifier_service.settings import get_settings

    get_settings.cache_clear()
    celery_app.cache_clear()
    reset_engine_cache()
    try:
        with transaction() as session:
            item = next(i for i in items_of(session, job_id) if i.index == index)
            reward = Reward(value=value, status=RewardStatus.scored, fidelity="human")
            outgoing = dispatch.stage(session, revise_reward(session, item.id, reward))
        dispatch.deliver(outgoing)
    finally:
        get_settings.cache_clear()
        celery_app.cache_clear()
        reset_engine_cache()


class Receiver:
    """A trainer's webhook endpoint: records every request; answers 500 to the first one."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes, int]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                code = 500 if not receiver.requests else 200
                receiver.requests.append((dict(self.headers), body, code))
                self.send_response(code)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/rewards"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def test_webhooks_are_signed_retried_and_recorded(service: Service, receiver: Receiver) -> None:
    body = {"items": [unique_mol()], "wait_s": 20, "callback": {"url": receiver.url}}
    with service.client() as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 200, response.text
        job_id = response.json()["id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(c == 200 for *_, c in receiver.requests) < 2:
            time.sleep(0.1)
        time.sleep(1.5)  # anything more would arrive now (retries are 0.5 s apart)
        deliveries = client.get(f"/v1/jobs/{job_id}/deliveries").json()

    accepted = [(h, b) for h, b, code in receiver.requests if code == 200]
    events = [verify_webhook(SECRET, h, b) for h, b in accepted]  # raises on a bad signature
    assert sorted(e["type"] for e in events) == ["item.finished", "job.finished"]
    assert all(e["job_id"] == job_id for e in events)
    # Each event was accepted exactly once; the one refused with 500 came again, same id.
    ids = [h["webhook-id"] for h, _ in accepted]
    assert len(ids) == len(set(ids)) == 2
    assert len(receiver.requests) == 3
    assert receiver.requests[0][0]["webhook-id"] in ids
    assert receiver.requests[0][0]["webhook-signature"].startswith("v1,")

    assert sorted(d["id"] for d in deliveries) == sorted(ids)
    assert all(d["status"] == "delivered" and d["url"] == receiver.url for d in deliveries)
    attempts = {d["id"]: [a["status_code"] for a in d["attempts"]] for d in deliveries}
    retried = receiver.requests[0][0]["webhook-id"]
    assert attempts[retried] == [500, 200]
    assert next(d for d in deliveries if d["id"] == retried)["attempts"][0]["error"].startswith(
        "HTTP 500"
    )
    assert [codes for i, codes in attempts.items() if i != retried] == [[200]]
    durations = [a["duration_ms"] for d in deliveries for a in d["attempts"]]
    print(f"webhook attempt durations (ms): {durations}")
    assert all(0 < ms < 5000 for ms in durations)


def test_a_receiver_that_never_answers_is_retried_with_backoff_then_given_up(
    service: Service,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/nobody-listens"  # connection refused
    body = {"items": [unique_mol()], "wait_s": 20, "callback": {"url": url}}
    with service.client() as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 200, response.text
        path = f"/v1/jobs/{response.json()['id']}/deliveries"
        deadline = time.monotonic() + 30
        deliveries = client.get(path).json()
        while time.monotonic() < deadline and any(d["status"] == "pending" for d in deliveries):
            time.sleep(0.25)
            deliveries = client.get(path).json()
    assert [d["status"] for d in deliveries] == ["failed", "failed"]
    for delivery in deliveries:
        attempts = delivery["attempts"]
        # retry_first_s 0.5 doubling, within retry_for_s 3: attempts at ~0, 0.5, 1.5 s.
        assert len(attempts) == 3, attempts
        assert all(a["status_code"] is None for a in attempts)
        assert all(a["error"].startswith("ConnectError") for a in attempts)
        starts = [datetime.fromisoformat(a["started_at"]).timestamp() for a in attempts]
        assert starts[1] - starts[0] >= 0.45
        assert starts[2] - starts[1] >= 0.95
        assert delivery["next_attempt_at"] is None


def test_callbacks_outside_the_allow_list_are_refused(service: Service) -> None:
    with service.client() as client:
        for url in ("http://localhost:8080/hook", "http://169.254.169.254/latest/meta-data",
                    "https://10.0.0.7/hook"):  # fmt: skip
            response = client.post(
                "/v1/rewards", json={"items": [unique_mol()], "callback": {"url": url}}
            )
            assert response.status_code == 422, response.text
            error = response.json()
            assert error["error"] == "callback_refused"
            assert "not in this service's allowed callback hosts" in error["message"]
            assert "127.0.0.1" in error["hint"]
        not_http = client.post(
            "/v1/rewards", json={"items": [unique_mol()], "callback": {"url": "file:///etc/passwd"}}
        )
        assert not_http.status_code == 422
        assert not_http.json()["error"] == "invalid_request"


def test_a_job_without_callback_has_no_deliveries(service: Service) -> None:
    with service.client() as client:
        response = client.post("/v1/rewards", json={"items": [unique_mol()], "wait_s": 20})
        job = poll_job(client, response.headers["location"], timeout=20)
        assert job["status"] == "completed"
        assert client.get(f"/v1/jobs/{job['id']}/deliveries").json() == []
