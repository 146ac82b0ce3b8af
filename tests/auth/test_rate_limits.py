"""Per-key rate limits in Redis: 429 with Retry-After, and the Python client waits and retries."""

from __future__ import annotations

import uuid

import httpx
import pytest
from support import Service

from verifier_service.client import AuthenticationError, VerifierClient

ITEM = {"kind": "json", "payload": {"tool": "t", "args": {}}, "reference": {"schema": {}}}


class Recording(httpx.HTTPTransport):
    """A real transport that remembers the status of every answer."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        return response


def test_over_the_request_limit_is_429_and_the_client_retries_after(live_service: Service) -> None:
    key = live_service.create_key(f"rl-{uuid.uuid4().hex[:6]}", "trainer", requests_per_min="30")
    with live_service.client(api_key=key) as client:
        statuses = [client.get("/v1/me").status_code for _ in range(40)]
        limited = client.get("/v1/me")
    assert statuses[:25] == [200] * 25  # a minute's worth may come at once
    assert limited.status_code == 429
    assert limited.json()["error"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 2  # 30/min: one more every 2 s

    transport = Recording()
    with VerifierClient(live_service.base_url, api_key=key, transport=transport) as verifier:
        job = verifier.submit([ITEM], wait_s=5)
    assert transport.statuses[0] == 429
    assert transport.statuses[-1] == 200
    assert job.status == "completed"


def test_items_per_minute_are_counted_per_key(live_service: Service) -> None:
    limited = live_service.create_key(f"items-{uuid.uuid4().hex[:6]}", "trainer", items_per_min="5")
    other = live_service.create_key(f"items-{uuid.uuid4().hex[:6]}", "trainer", items_per_min="5")
    body = {"policy": "default", "items": [ITEM] * 4, "wait_s": 5}
    with live_service.client(api_key=limited) as a, live_service.client(api_key=other) as b:
        assert a.post("/v1/rewards", json=body).status_code == 200
        second = a.post("/v1/rewards", json=body)
        assert second.status_code == 429
        assert "items per minute" in second.json()["message"]
        assert int(second.headers["retry-after"]) >= 1
        # Another key has its own budget.
        assert b.post("/v1/rewards", json=body).status_code == 200
        too_many = a.post("/v1/rewards", json={**body, "items": [ITEM] * 6})
        assert too_many.status_code == 429
        assert "exceed" in too_many.json()["message"]


def test_the_client_takes_its_key_from_the_environment(
    live_service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = live_service.create_key(f"env-{uuid.uuid4().hex[:6]}", "trainer")
    monkeypatch.setenv("VERIFIER_API_KEY", key)
    with VerifierClient(live_service.base_url) as client:
        assert client.submit([ITEM], wait_s=5).status == "completed"
    monkeypatch.delenv("VERIFIER_API_KEY")
    with VerifierClient(live_service.base_url) as client, pytest.raises(AuthenticationError) as err:
        client.submit([ITEM], wait_s=5)
    assert err.value.message == "no credentials"
    unknown = "vsk_0123456789ab_" + "A" * 43
    with (
        VerifierClient(live_service.base_url, api_key=unknown) as client,
        pytest.raises(AuthenticationError) as err,
    ):
        client.submit([ITEM], wait_s=5)
    assert err.value.message == "unknown API key"
