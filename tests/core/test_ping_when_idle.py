"""PostgreSQL connections are tested before use only after sitting idle (not on every
transaction, as pool_pre_ping would): what a user would notice is a broken connection handed to
a request, so each test breaks the server side of a pooled connection and checks what the next
transaction sees."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, Table, func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from verifier_service.core.db import is_transient, make_engine, with_retries
from verifier_service.core.rows import COPY_MIN_ROWS, insert_rows, pipelined
from verifier_service.settings import get_settings

IDLE_S = 0.3


@pytest.fixture
def broken_pooled_connection(
    monkeypatch: pytest.MonkeyPatch, own_pg_url: str
) -> Iterator[tuple[Engine, int]]:
    """An engine pinging after IDLE_S, whose one pooled connection was just used and then
    closed on the server's side; and that connection's backend pid."""
    monkeypatch.setenv("VERIFIER_DATABASE__PING_AFTER_IDLE_S", str(IDLE_S))
    get_settings.cache_clear()
    engine = make_engine(own_pg_url)
    old = _break(engine)
    yield engine, old
    engine.dispose()
    get_settings.cache_clear()


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_idle_longer_than_the_limit_is_replaced_before_use(
    broken_pooled_connection: tuple[Engine, int],
) -> None:
    engine, old = broken_pooled_connection
    time.sleep(IDLE_S + 0.1)
    # The ping finds it dead and the pool connects again: the transaction never sees it.
    assert _backend_pid(engine) != old


def test_a_connection_used_a_moment_ago_fails_once_and_the_retry_gets_a_new_one(
    broken_pooled_connection: tuple[Engine, int],
) -> None:
    engine, old = broken_pooled_connection
    with pytest.raises(OperationalError) as failed:  # not pinged: it was used just now
        _backend_pid(engine)
    assert is_transient(failed.value)
    # That failure invalidated the pool; what callers do with a transient error (try again)
    # gets a live connection at once.
    assert with_retries(lambda: _backend_pid(engine), retries=1, first_delay_s=0) != old


def test_a_copy_or_pipeline_on_a_connection_broken_a_moment_ago_fails_once_and_is_retried(
    monkeypatch: pytest.MonkeyPatch, own_pg_url: str
) -> None:
    """COPY and pipelines run on the driver's connection, past SQLAlchemy's own error handling:
    their failure on a dead connection is still a transient error, and the retry gets a live
    connection and stores every row."""
    # Not pinged before use for a minute, so a loaded machine's pauses between the break and
    # the write cannot turn the broken connection into a replaced one.
    monkeypatch.setenv("VERIFIER_DATABASE__PING_AFTER_IDLE_S", "60")
    get_settings.cache_clear()
    engine = make_engine(own_pg_url)
    table = Table("copied", MetaData(), Column("n", Integer, primary_key=True))
    with engine.begin() as conn:
        table.create(conn)

    def write(first: int, count: int) -> None:
        with Session(engine) as session, session.begin():
            with pipelined(session, count):
                insert_rows(session, table, [{"n": first + i} for i in range(count)])

    for first, count in ((0, COPY_MIN_ROWS), (1000, 3)):  # by COPY, then in a pipeline
        _break(engine)
        with pytest.raises(OperationalError) as failed:
            write(first, count)
        assert is_transient(failed.value)
        with_retries(functools.partial(write, first, count), retries=1, first_delay_s=0)
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(table)) == COPY_MIN_ROWS + 3
    engine.dispose()
    get_settings.cache_clear()


def _break(engine: Engine) -> int:
    """Close, on the server's side, the connection the pool hands out next (just used, so not
    pinged before its next use); its backend's pid."""
    pid = _backend_pid(engine)
    plain = engine.url.render_as_string(hide_password=False)
    with psycopg.connect(
        plain.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.05)  # the backend is gone before the test goes on
    return pid
