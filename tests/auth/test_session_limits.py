"""A person signed in has the rate limits a key has: requests and items per minute, per principal
(all their sessions together), on an API process with small role limits."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from auth_support import new_person, own_api, sign_in
from support import Service

ITEM = {"kind": "json", "payload": {"tool": "t", "args": {}}, "reference": {"schema": {}}}
LIMITS = {"trainer": 30, "reviewer": 30, "operator": 30, "admin": 30}


@pytest.fixture(scope="module")
def limited_api(live_service: Service) -> Iterator[Service]:
    with own_api(
        live_service,
        VERIFIER_AUTH__REQUESTS_PER_MIN=json.dumps(LIMITS),
        VERIFIER_AUTH__ITEMS_PER_MIN=json.dumps({"trainer": 5}),
    ) as api:
        yield api


def test_a_signed_in_reviewer_is_limited_per_principal(
    limited_api: Service, live_service: Service
) -> None:
    name = new_person(live_service, "reviewer")
    # Two browsers of one person share one limit: a second sign-in is no way around it.
    first, second = sign_in(limited_api.base_url, name), sign_in(limited_api.base_url, name)
    statuses = []
    with httpx.Client(base_url=limited_api.base_url, timeout=30) as http:
        for turn in range(40):
            session = first if turn % 2 else second
            statuses.append(http.get("/v1/me", headers=session.headers()).status_code)
        limited = http.get("/v1/me", headers=first.headers())
    assert statuses[:25] == [200] * 25  # a minute's worth may come at once
    assert 429 in statuses[25:]
    assert limited.status_code == 429
    assert limited.json()["error"] == "rate_limited"
    assert name in limited.json()["message"]
    assert 1 <= int(limited.headers["retry-after"]) <= 2  # 30/min: one more every 2 s


def test_a_trainer_submitting_by_session_is_limited_in_items(
    limited_api: Service, live_service: Service
) -> None:
    name = new_person(live_service, "trainer")
    person = sign_in(limited_api.base_url, name)
    body = {"policy": "default", "items": [ITEM] * 4, "wait_s": 5}
    with httpx.Client(base_url=limited_api.base_url, timeout=30) as http:
        first = http.post("/v1/rewards", json=body, headers=person.headers(write=True))
        assert first.status_code == 200, first.text
        second = http.post("/v1/rewards", json=body, headers=person.headers(write=True))
        assert second.status_code == 429
        assert "items per minute" in second.json()["message"]
        assert int(second.headers["retry-after"]) >= 1
        too_many = http.post(
            "/v1/rewards", json={**body, "items": [ITEM] * 6}, headers=person.headers(write=True)
        )
        assert too_many.status_code == 429
        assert "exceed" in too_many.json()["message"]
