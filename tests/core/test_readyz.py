"""GET /readyz over a real database and broker: ready only when the schema is at the code's
revision and Redis answers, and otherwise a 503 that says which and what to do."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The settings' environment for a test; the service's settings and engine forgotten after."""
    yield monkeypatch
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()


def _readyz(
    env: pytest.MonkeyPatch, database_url: str, broker_url: str
) -> tuple[int, dict[str, Any]]:
    env.setenv("VERIFIER_DATABASE__URL", database_url)
    env.setenv("VERIFIER_BROKER__URL", broker_url)
    get_settings.cache_clear()
    reset_engine_cache()
    # No lifespan (TestClient not entered): the app starts whatever state the database is in.
    response = TestClient(create_app(check_migrations=False)).get("/readyz")
    return response.status_code, response.json()


def test_readyz_says_which_dependency_is_not_ready(
    env: pytest.MonkeyPatch, tmp_path: Path, redis_url: str
) -> None:
    url = f"sqlite:///{tmp_path / 'ready.db'}"
    status, body = _readyz(env, url, redis_url)
    assert status == 503
    assert "has no schema" in body["checks"]["database"]
    assert "verifier-service migrate" in body["checks"]["database"]
    assert body["checks"]["broker"] == "ok"

    upgrade(url)
    assert _readyz(env, url, redis_url) == (
        200,
        {"ready": True, "checks": {"database": "ok", "broker": "ok"}},
    )

    status, body = _readyz(env, url, f"redis://127.0.0.1:{_closed_port()}/0")
    assert status == 503
    assert body["ready"] is False
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"].startswith("error:")


def test_readyz_names_an_unmigrated_postgresql_without_its_password(
    env: pytest.MonkeyPatch, own_pg_url: str, redis_url: str
) -> None:
    # The local server trusts its clients: the password is accepted, and ignored.
    with_password = own_pg_url.replace("//postgres@", "//postgres:hunter2@")
    assert with_password != own_pg_url
    status, body = _readyz(env, with_password, redis_url)
    assert status == 503
    database = body["checks"]["database"]
    assert "has no schema" in database
    assert "postgres:***@" in database  # the URL is named, its password masked
    assert "hunter2" not in database


def test_readyz_names_an_unreachable_database(env: pytest.MonkeyPatch, redis_url: str) -> None:
    port = _closed_port()
    status, body = _readyz(env, f"postgresql+psycopg://svc@127.0.0.1:{port}/v", redis_url)
    assert status == 503
    assert body["checks"]["database"].startswith("error:")
    assert str(port) in body["checks"]["database"]
    assert body["checks"]["broker"] == "ok"
