"""The API's answers to what goes wrong on our side: no internals, a request id to quote."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from verifier_service.app import create_app

SECRET = "postgresql+psycopg://svc:hunter2@db.internal/verifier"


@pytest.fixture(scope="module")
def app() -> FastAPI:
    # No lifespan (TestClient is not entered): no database or broker is needed.
    app = create_app(check_migrations=False)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError(f"could not connect to {SECRET}: SELECT * FROM jobs WHERE id = 42")

    return app


@pytest.fixture
def client(app: FastAPI) -> TestClient:
    return TestClient(app, raise_server_exceptions=False)


def test_unexpected_error_answers_a_generic_500_naming_a_request_id(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    response = client.get("/boom")
    assert response.status_code == 500
    body = response.json()
    request_id = response.headers["x-request-id"]
    assert body["error"] == "internal_error"
    assert body["request_id"] == request_id
    assert request_id in body["message"]
    for internal in ("RuntimeError", "hunter2", "SELECT", "db.internal"):
        assert internal not in response.text
    # The log has what the body lacks, under the same id, with the password masked.
    logged = capsys.readouterr()
    out = logged.out + logged.err
    assert request_id in out
    assert "RuntimeError: could not connect" in out
    assert "hunter2" not in out
    assert "svc:***@db.internal" in out


def test_every_response_carries_a_request_id(client: TestClient) -> None:
    ids = {client.get("/healthz").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert "x-request-id" in client.get("/nowhere").headers  # 404
    assert "x-request-id" in client.post("/v1/rewards", content=b"{").headers  # 422


def test_a_sane_incoming_request_id_is_kept_and_an_odd_one_replaced(client: TestClient) -> None:
    kept = client.get("/healthz", headers={"X-Request-ID": "trainer-7:step-12.3"})
    assert kept.headers["x-request-id"] == "trainer-7:step-12.3"
    for odd in ("has space", "x" * 300, "semi;colon", "<script>"):
        replaced = client.get("/healthz", headers={"X-Request-ID": odd})
        assert replaced.headers["x-request-id"] != odd
        assert re.fullmatch(r"[0-9a-f]{32}", replaced.headers["x-request-id"])
    errored = client.get("/boom", headers={"X-Request-ID": "abc-123"})
    assert errored.headers["x-request-id"] == "abc-123"
    assert errored.json()["request_id"] == "abc-123"


def test_deep_nesting_is_refused_before_parsing(client: TestClient) -> None:
    depth = 500
    body = b'{"items":[{"kind":"json","payload":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}]}"
    response = client.post(
        "/v1/rewards", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "the limit is 64" in response.json()["message"]
    # Without a content type FastAPI still reads the body as JSON: it is checked all the same.
    untyped = client.post("/v1/rewards", content=body)
    assert untyped.status_code == 422
    assert "the limit is 64" in untyped.json()["message"]
    # Brackets inside strings are text, not nesting.
    text = b'{"items":[{"kind":"molecule","payload":{"smiles":"' + b"[" * 1000 + b'"}}]}'
    ok = client.post("/v1/rewards", content=text, headers={"content-type": "application/json"})
    assert "nests" not in ok.text
