"""SQLite's log is checkpointed by the API's background thread, not by a request's commit.

What a user would notice: a request that happens to commit when the log passes 1,000 pages
waits 5-15 ms for everyone's writes (the p99 of one-item requests), or a log that grows without
bound. Each test writes about 1,500 pages (6 MB) and looks at where they are: still only in
the log, or copied into the database file."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from verifier_service.app import _wal_checkpointer
from verifier_service.core.checkpoint import RESTART_WAIT_S, WalCheckpointer
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

    checkpointer = _CountedRounds(str(path), every_s=0.05)
    checkpointer.start()
    deadline = time.monotonic() + 10
    while path.stat().st_size < PAGES * PAGE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.stat().st_size >= PAGES * PAGE  # the thread copied it
    # The log was long, so the thread made it start over: the next commits reuse it from
    # the beginning instead of growing it. (The copy is seen before the round that made it
    # has ended: two more ends, and one whole round has run since.)
    assert checkpointer.rounds_ended(2, timeout_s=10)
    _commit_a_row(engine)
    checkpointer.stop()  # (the probe's checkpoint would find the thread's running: -1)
    assert 0 <= _frames_in_log(path) < 50
    engine.dispose()


class _CountedRounds(WalCheckpointer):
    """The background checkpoint, telling the test when its rounds end."""

    def __init__(self, path: str, every_s: float) -> None:
        super().__init__(path, every_s)
        self._ended = 0
        self._changed = threading.Condition()

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        super().checkpoint(connection)
        with self._changed:
            self._ended += 1
            self._changed.notify_all()

    def rounds_ended(self, n: int, timeout_s: float) -> bool:
        """Wait until `n` more rounds have ended; whether they did within `timeout_s`."""
        with self._changed:
            target = self._ended + n
            return self._changed.wait_for(lambda: self._ended >= target, timeout_s)


def test_a_long_log_starts_over_though_a_reader_holds_back_the_copy(
    settings_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under a steady stream of requests the PASSIVE round seldom copies the whole log: a
    request still reading an older snapshot holds back the pages committed after it. Then the
    log would not start over and would grow to the safety limit. The RESTART round that
    follows a long log waits for that reader (`RESTART_WAIT_S`) and copies the rest."""
    path = tmp_path / "rows.db"
    engine = make_engine(f"sqlite:///{path}")
    _write_pages(engine)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM scratch").fetchone()  # its snapshot: the log so far
    _commit_a_row(engine)  # after that snapshot: the PASSIVE round may not copy it

    class ReaderEndsAfterThePassiveRound(sqlite3.Connection):
        """The round's connection; the reader's request ends as its PASSIVE copy ends."""

        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            cursor = super().execute(sql, parameters)
            if "PASSIVE" in sql and reader.in_transaction:
                row = cursor.fetchone()
                reader.execute("COMMIT")
                return super().execute("SELECT ?, ?, ?", row)
            return cursor

    connection = sqlite3.connect(
        path, timeout=RESTART_WAIT_S, isolation_level=None, factory=ReaderEndsAfterThePassiveRound
    )
    WalCheckpointer(str(path), every_s=1).checkpoint(connection)
    assert not reader.in_transaction  # the round did go through the PASSIVE copy
    connection.close()
    reader.close()
    _commit_a_row(engine)
    assert 0 <= _frames_in_log(path) < 50
    engine.dispose()


def _commit_a_row(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO scratch (b) VALUES (x'00')"))


def _frames_in_log(path: Path) -> int:
    """The pages in the log now (-1: another checkpoint was running and SQLite could not
    count): what a PASSIVE checkpoint reports, not the file's size, which a log that started
    over keeps."""
    probe = sqlite3.connect(path)
    try:
        _, in_log, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        probe.close()
    return int(in_log)


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
