"""The blocking and the async client send the same requests (paths, bodies, headers,
Idempotency-Keys) and read the same answers: checked over httpx.MockTransport against a small
fake of the service that records every request."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import httpx

from verifier_service.client import AsyncVerifierClient, RetryPolicy, VerifierClient

NOW = datetime.now(UTC).isoformat()
FAST = RetryPolicy(retries=3, backoff_s=0.001, max_backoff_s=0.01, ride_out_s=0.0)


def _job(job_id: str, n: int, done: bool) -> dict[str, Any]:
    reward = {"value": 0.5, "status": "scored"}
    items = [{"index": i, "kind": "text", "state": "done" if done else "queued",
              "reward": reward if done else None} for i in range(n)]  # fmt: skip
    return {"id": job_id, "status": "completed" if done else "running", "policy": "p",
            "policy_version": 1, "created_at": NOW, "finished_at": NOW if done else None,
            "n_items": n, "n_done": n if done else 0, "items": items}  # fmt: skip


def _sse(*events: tuple[int, str, dict[str, Any]]) -> bytes:
    out = [": keep-alive\n\n"]
    for event_id, kind, data in events:
        body = {"id": event_id, "type": kind, "job_id": "j1", "timestamp": NOW, "data": data}
        out.append(f"id: {event_id}\nevent: {kind}\ndata: {json.dumps(body)}\n\n")
    return "".join(out).encode()


class FakeService:
    """Answers like the service: a job completes on its second POST (a long poll); the event
    stream drops after its first event, then resumes after Last-Event-ID; the first POST of
    key `flaky` gets two 503s."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], Any]] = []
        self._posts: Counter[str] = Counter()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        wanted = ("authorization", "x-principal", "idempotency-key", "last-event-id", "accept")
        headers = {k: v for k, v in request.headers.items() if k in wanted}
        body: Any = json.loads(request.content) if request.content else None
        url = request.url.raw_path.decode()
        self.seen.append((request.method, url, headers, body))
        path = request.url.path
        if path == "/v1/rewards":
            key = headers["idempotency-key"]
            self._posts[key] += 1
            if key == "flaky" and self._posts[key] <= 2:
                return httpx.Response(503, json={"error": "busy", "message": "try again"})
            return httpx.Response(200, json=_job(key, len(body["items"]), self._posts[key] > 1))
        if path == "/v1/jobs/j1/events":
            if "last-event-id" not in headers:
                return httpx.Response(200, content=_sse((1, "item.finished", _item(0))))
            return httpx.Response(200, content=_sse(
                (2, "item.finished", _item(1)), (3, "job.finished", {"status": "completed"}),
            ))  # fmt: skip
        if path == "/v1/jobs/j1":
            return httpx.Response(200, json=_job("j1", 2, True))
        if path == "/v1/jobs/j1/cost":
            return httpx.Response(200, json={"items": 2, "cost_units": 1.5})
        if path == "/v1/rewards/changes":
            return httpx.Response(200, json={"changes": [], "next": "c9"})
        if path == "/v1/policies":
            return httpx.Response(201, json={"name": "p", "version": 2})
        return httpx.Response(404, json={"error": "not_found", "message": path})


def _item(index: int) -> dict[str, Any]:
    return {"index": index, "revision": 1, "reward": {"value": 0.5, "status": "scored"}}


def _session_sync(fake: FakeService) -> list[Any]:
    with VerifierClient(
        "http://fake", principal="team-a", api_key="sk-1", retry=FAST, batch_size=2,
        transport=httpx.MockTransport(fake),
    ) as client:  # fmt: skip
        return [
            client.submit([{"kind": "text", "payload": "a"}], idempotency_key="flaky", wait_s=5),
            client.get_job("j1", verdicts=False),
            client.job_cost("j1"),
            client.changes(since="c1", limit=5),
            client.create_policy("name: p", activate=False),
            list(client.stream("j1", timeout_s=10)),
            client.score([{"kind": "text", "payload": str(i)} for i in range(3)],
                         idempotency_key="k", timeout_s=10),
        ]  # fmt: skip


async def _session_async(fake: FakeService) -> list[Any]:
    async with AsyncVerifierClient(
        "http://fake", principal="team-a", api_key="sk-1", retry=FAST, batch_size=2,
        transport=httpx.MockTransport(fake),
    ) as client:  # fmt: skip
        return [
            await client.submit([{"kind": "text", "payload": "a"}], idempotency_key="flaky",
                                wait_s=5),
            await client.get_job("j1", verdicts=False),
            await client.job_cost("j1"),
            await client.changes(since="c1", limit=5),
            await client.create_policy("name: p", activate=False),
            [pair async for pair in client.stream("j1", timeout_s=10)],
            await client.score([{"kind": "text", "payload": str(i)} for i in range(3)],
                               idempotency_key="k", timeout_s=10),
        ]  # fmt: skip


def test_both_clients_send_the_same_requests_and_read_the_same_answers() -> None:
    sync_fake, async_fake = FakeService(), FakeService()
    sync_out = _session_sync(sync_fake)
    async_out = asyncio.run(_session_async(async_fake))
    assert [repr(x) for x in sync_out] == [repr(x) for x in async_out]

    # Up to score_jobs the requests are the same, one for one.
    n_before_score = 9
    assert sync_fake.seen[:n_before_score] == async_fake.seen[:n_before_score]
    posts = sync_fake.seen[:3]
    assert [p[2]["idempotency-key"] for p in posts] == ["flaky"] * 3  # retried with its key
    assert posts[0][2]["authorization"] == "Bearer sk-1"
    assert posts[0][2]["x-principal"] == "team-a"
    assert posts[0][3]["wait_s"] == 5
    paths = [s[1] for s in sync_fake.seen[3:n_before_score]]
    assert paths == ["/v1/jobs/j1?verdicts=false", "/v1/jobs/j1/cost",
                     "/v1/rewards/changes?limit=5&since=c1", "/v1/policies",
                     "/v1/jobs/j1/events", "/v1/jobs/j1/events"]  # fmt: skip
    assert sync_fake.seen[6][3] == {"text": "name: p", "activate": False}
    assert "last-event-id" not in sync_fake.seen[7][2]
    assert sync_fake.seen[8][2]["last-event-id"] == "1"  # resumed after the event it had
    assert [index for index, _ in sync_out[5]] == [0, 1]


def _score_posts(fake: FakeService) -> list[tuple[str, float | None, int]]:
    return [(s[2]["idempotency-key"], s[3].get("wait_s"), len(s[3]["items"]))
            for s in fake.seen[9:]]  # fmt: skip


def test_score_keeps_one_key_per_batch_and_long_polls_it() -> None:
    sync_fake, async_fake = FakeService(), FakeService()
    _session_sync(sync_fake)
    asyncio.run(_session_async(async_fake))
    sync_posts = _score_posts(sync_fake)
    # One batch after another: the first POSTs do not wait, so the second batch is not held
    # up by the first; then each batch is long-polled with its own key.
    assert [(key, wait is None, n) for key, wait, n in sync_posts] == [
        ("k/0", True, 2), ("k/1", True, 1), ("k/0", False, 2), ("k/1", False, 1),
    ]  # fmt: skip
    # Concurrent batches long-poll from their first POST.
    async_posts = sorted(_score_posts(async_fake), key=lambda p: p[0])
    assert [(key, wait is None, n) for key, wait, n in async_posts] == [
        ("k/0", False, 2), ("k/0", False, 2), ("k/1", False, 1), ("k/1", False, 1),
    ]  # fmt: skip
    assert all(0 < wait <= 10 for _, wait, _ in async_posts if wait is not None)
