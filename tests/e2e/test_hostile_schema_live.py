"""A hostile JSON Schema pattern freezes neither the API nor a worker (issue 36, item 1).

`^(a+)+$` against 40 `a`s and a `!` held the API at full CPU inside Python's `re` (the inline
lane of a `wait_s` request): /healthz timed out and SIGTERM was ignored until it was killed.
Now the pattern runs on RE2: the request is answered with a scored failure while another
client's /healthz keeps answering fast, and a worker that takes the same item from the queue
goes on with the next trainer's work.
"""

from __future__ import annotations

import threading
import time
import uuid

from support import Service, poll_job

HOSTILE_ITEM = {
    "kind": "json",
    "payload": {"q": "a" * 40 + "!"},
    "reference": {"schema": {"properties": {"q": {"pattern": "^(a+)+$"}}}},
}


class HealthProbe:
    """Times GET /healthz from its own client, every 50 ms, while a block runs."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.service.client(timeout=5) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    status = client.get("/healthz").status_code
                except Exception as exc:
                    self.failures.append(type(exc).__name__)
                else:
                    if status != 200:
                        self.failures.append(str(status))
                self.latencies.append(time.monotonic() - started)
                self._stop.wait(0.05)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _assert_scored_failure(item: dict[str, object]) -> None:
    reward = item["reward"]
    assert isinstance(reward, dict)
    assert reward["status"] == "scored", reward
    assert reward["value"] == 0.0


def test_a_backtracking_pattern_inline_leaves_the_api_answering(live_service: Service) -> None:
    item = {**HOSTILE_ITEM, "payload": {"q": "a" * 40 + "!", "n": uuid.uuid4().hex}}
    with HealthProbe(live_service) as probe, live_service.client(timeout=30) as client:
        time.sleep(0.3)  # a few probes before
        started = time.monotonic()
        response = client.post("/v1/rewards", json={"items": [item], "wait_s": 20})
        elapsed = time.monotonic() - started
        time.sleep(0.3)  # and after
    assert response.status_code == 200, response.text
    answered = response.json()["items"][0]
    _assert_scored_failure(answered)
    assert "does not match" in answered["verdicts"][0]["feedback"]
    assert elapsed < 5, elapsed
    assert not probe.failures, probe.failures
    assert len(probe.latencies) >= 5
    # Frozen, the API stopped answering until it was killed (a probe would time out at 5 s and
    # count as a failure). Answering, a probe takes milliseconds; one slow probe on a loaded
    # 2-core CI machine took 1.1 s, so the bound is the stall a person would notice, not jitter.
    latencies = sorted(probe.latencies)
    assert latencies[len(latencies) // 2] < 0.25, latencies[-5:]
    assert latencies[-1] < 3.0, latencies[-5:]


def test_a_backtracking_pattern_queued_leaves_the_worker_serving(live_service: Service) -> None:
    # Queued (no wait_s): tier.fast's worker takes it; the next trainer's work is not held up.
    other = {"kind": "json", "payload": {"q": "ok"}, "reference": {"schema": {"type": "object"}}}
    # Payloads no other test sent: none of them is answered from the verdict cache.
    run = uuid.uuid4().hex
    hostile_items = [
        {**HOSTILE_ITEM, "payload": {"q": "a" * 40 + "!", "n": f"{run}-{i}"}} for i in range(3)
    ]
    with live_service.client(timeout=30) as client:
        hostile = client.post("/v1/rewards", json={"items": hostile_items})
        assert hostile.status_code == 202, hostile.text
        started = time.monotonic()
        after = client.post("/v1/rewards", json={"items": [other]})
        assert after.status_code == 202, after.text
        job = poll_job(client, after.headers["location"], timeout=30)
        assert job["status"] == "completed", job
        assert time.monotonic() - started < 10
        assert job["items"][0]["reward"]["value"] == 1.0
        hostile_job = poll_job(client, hostile.headers["location"], timeout=30)
    assert hostile_job["status"] == "completed"
    for item in hostile_job["items"]:
        _assert_scored_failure(item)
