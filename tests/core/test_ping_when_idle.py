"""PostgreSQL connections are tested before use only after sitting idle (not on every
transaction, as pool_pre_ping would): what a user would notice is a broken connection handed to
a request, so each test breaks the server side of a pooled connection and checks what the next
transaction sees."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from verifier_service.core.db import is_transient, make_engine, with_retries
from verifier_service.settings import get_settings


@pytest.fixture
def engine_idle_after(
    monkeypatch: pytest.MonkeyPatch, own_pg_url: str
) -> Iterator[tuple[Engine, float]]:
    idle_s = 0.3
    monkeypatch.setenv("VERIFIER_DATABASE__PING_AFTER_IDLE_S", str(idle_s))
    get_settings.cache_clear()
    engine = make_engine(own_pg_url)
    yield engine, idle_s
    engine.dispose()
    get_settings.cache_clear()


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(url: str, pid: int) -> None:
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.05)  # the backend is gone before the test goes on


def test_a_connection_idle_longer_than_the_limit_is_replaced_before_use(
    engine_idle_after: tuple[Engine, float], own_pg_url: str
) -> None:
    engine, idle_s = engine_idle_after
    old = _backend_pid(engine)
    _terminate(own_pg_url, old)
    time.sleep(idle_s + 0.1)
    # The ping finds it dead and the pool connects again: the transaction never sees it.
    assert _backend_pid(engine) != old


def test_a_connection_used_a_moment_ago_fails_once_and_the_retry_gets_a_new_one(
    engine_idle_after: tuple[Engine, float], own_pg_url: str
) -> None:
    engine, _ = engine_idle_after
    old = _backend_pid(engine)
    _terminate(own_pg_url, old)
    with pytest.raises(OperationalError) as failed:  # not pinged: it was used just now
        _backend_pid(engine)
    assert is_transient(failed.value)
    # That failure invalidated the pool; what callers do with a transient error (try again)
    # gets a live connection at once.
    assert with_retries(lambda: _backend_pid(engine), retries=1, first_delay_s=0) != old
