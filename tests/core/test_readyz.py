"""GET /readyz over a real database and broker: ready only when the schema is at the code's
revision and Redis answers, and otherwise a 503 that says which and what to do."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from verifier_service.app import create_app
from verifier_service.core.db import reset_engine_cache
from verifier_service.core.migrate import upgrade
from verifier_service.settings import get_settings


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the probe closes


@pytest.fixture
def ready_at(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[pytest.MonkeyPatch, str]]:
    url = f"sqlite:///{tmp_path / 'ready.db'}"
    monkeypatch.setenv("VERIFIER_DATABASE__URL", url)
    yield monkeypatch, url
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()


def _readyz(monkeypatch: pytest.MonkeyPatch, broker_url: str) -> tuple[int, dict[str, object]]:
    monkeypatch.setenv("VERIFIER_BROKER__URL", broker_url)
    get_settings.cache_clear()
    reset_engine_cache()
    # No lifespan (TestClient not entered): the app starts whatever state the database is in.
    response = TestClient(create_app(check_migrations=False)).get("/readyz")
    return response.status_code, response.json()


def test_readyz_says_which_dependency_is_not_ready(
    ready_at: tuple[pytest.MonkeyPatch, str], redis_url: str
) -> None:
    monkeypatch, url = ready_at
    status, body = _readyz(monkeypatch, redis_url)
    assert status == 503
    database = body["checks"]["database"]  # type: ignore[index]
    assert "has no schema" in database
    assert "verifier-service migrate" in database
    assert body["checks"]["broker"] == "ok"  # type: ignore[index]

    upgrade(url)
    assert _readyz(monkeypatch, redis_url) == (
        200,
        {"ready": True, "checks": {"database": "ok", "broker": "ok"}},
    )

    status, body = _readyz(monkeypatch, f"redis://127.0.0.1:{_closed_port()}/0")
    assert status == 503
    assert body["ready"] is False
    assert body["checks"]["database"] == "ok"  # type: ignore[index]
    assert body["checks"]["broker"].startswith("error:")  # type: ignore[index]


def test_readyz_names_an_unreachable_database_without_its_password(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    port = _closed_port()
    monkeypatch.setenv(
        "VERIFIER_DATABASE__URL", f"postgresql+psycopg://svc:hunter2@127.0.0.1:{port}/v"
    )
    try:
        status, body = _readyz(monkeypatch, redis_url)
    finally:
        reset_engine_cache()
        monkeypatch.undo()
        get_settings.cache_clear()
    assert status == 503
    database = body["checks"]["database"]  # type: ignore[index]
    assert database.startswith("error:")
    assert str(port) in database
    assert "hunter2" not in database
    assert body["checks"]["broker"] == "ok"  # type: ignore[index]
