"""SQLite's log is checkpointed by the API's background thread, not by a request's commit.

What a user would notice: a request that happens to commit when the log passes 1,000 pages
waits 5-15 ms for everyone's writes (the p99 of one-item requests), or a log that grows without
bound. Each test writes about 1,500 pages (6 MB) and looks at where they are: still only in
the log, or copied into the database file."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from verifier_service.app import _wal_checkpointer
from verifier_service.core.checkpoint import WalCheckpointer
from verifier_service.core.db import make_engine, sqlite_path
from verifier_service.settings import get_settings

PAGE = 4096
PAGES = 1_500


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setenv("VERIFIER_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def _write_pages(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS scratch (id INTEGER PRIMARY KEY, b BLOB)"))
    for _ in range(PAGES // 10):  # one commit per ten pages, as a stream of requests would
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO scratch (b) SELECT randomblob(:n)"), {"n": 10 * PAGE})


def _log_pages(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size // PAGE if wal.exists() else 0


def test_commits_leave_the_log_to_the_background_checkpoint(
    settings_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "rows.db"
    engine = make_engine(f"sqlite:///{path}")
    _write_pages(engine)
    # No commit copied the log into the database, though it passed SQLite's 1,000 pages.
    assert path.stat().st_size < 100 * PAGE
    assert _log_pages(path) > PAGES

    checkpointer = WalCheckpointer(str(path), every_s=0.05)
    checkpointer.start()
    deadline = time.monotonic() + 10
    while path.stat().st_size < PAGES * PAGE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.stat().st_size >= PAGES * PAGE  # the thread copied it
    # The log was long, so the thread made it start over: the next commits reuse it from
    # the beginning instead of growing it.
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO scratch (b) VALUES (x'00')"))
    time.sleep(0.2)
    probe = sqlite3.connect(path)
    _, in_log, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    probe.close()
    assert 0 <= in_log < 50
    checkpointer.stop()
    engine.dispose()


def test_set_to_0_commits_checkpoint_as_sqlite_does(
    settings_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings_env.setenv("VERIFIER_DATABASE__SQLITE_CHECKPOINT_S", "0")
    get_settings.cache_clear()
    path = tmp_path / "rows.db"
    engine = make_engine(f"sqlite:///{path}")
    _write_pages(engine)
    assert path.stat().st_size >= 500 * PAGE  # a commit past 1,000 log pages copied them
    assert _wal_checkpointer(get_settings()) is None
    engine.dispose()


def test_the_api_checkpoints_sqlite_only(settings_env: pytest.MonkeyPatch) -> None:
    checkpointer = _wal_checkpointer(get_settings())  # the data dir's SQLite file
    assert checkpointer is not None
    try:
        assert checkpointer.path == sqlite_path(get_settings().database_url)
    finally:
        checkpointer.stop()
    settings_env.setenv("VERIFIER_DATABASE__URL", "postgresql+psycopg://u@127.0.0.1:1/none")
    get_settings.cache_clear()
    assert _wal_checkpointer(get_settings()) is None
