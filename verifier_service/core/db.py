"""Database engine and sessions. SQLite gets WAL, a busy timeout and BEGIN IMMEDIATE."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import structlog
from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Engine,
    Executable,
    TypeDecorator,
    create_engine,
    event,
)
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from verifier_service.core import jsoncodec
from verifier_service.core.checkpoint import AUTOCHECKPOINT_PAGES
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)
T = TypeVar("T")
M = TypeVar("M", bound="Base")
S = TypeVar("S", bound=Executable)
P = ParamSpec("P")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every database.

    PostgreSQL keeps the zone; SQLite has no zone type and hands back naive values, which
    would print without their "Z" and fail comparisons with aware ones.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, _dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: store timezone-aware UTC values")
        return value

    def process_result_value(self, value: datetime | None, _dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    """Declarative base of every ORM model."""

    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy reads this class attribute
        dict[str, Any]: JSON,
        datetime: UTCDateTime(),
    }


def built_once(make: Callable[P, S]) -> Callable[P, S]:
    """A statement factory that builds its statement once per argument (e.g. a dialect's name)
    and then returns it: for a query on every request's path, with `bindparam`s for what
    changes (an `expanding=True` one for an IN list).

    Building a statement and its cache key costs 0.05-0.3 ms each time, more than writing a
    row or two to SQLite; a statement built once keeps its cache key."""
    return cache(make)  # type: ignore[return-value]


def _configure_sqlite(engine: Engine, busy_timeout_ms: int, autocheckpoint_pages: int) -> None:
    # Several processes (API, workers) share one SQLite file: WAL lets readers run beside the
    # writer, and BEGIN IMMEDIATE takes the write lock up front so a transaction never fails
    # half-way with "database is locked" after reading a stale snapshot.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # With the API's background checkpoint (core.checkpoint), commits checkpoint only
        # past a much longer log than SQLite's 1,000 pages.
        cursor.execute(f"PRAGMA wal_autocheckpoint={int(autocheckpoint_pages)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


#: SQLite's own default: a commit that takes the log past this many pages checkpoints it.
SQLITE_DEFAULT_AUTOCHECKPOINT = 1000


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL; None for another database or an in-memory one."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1]
    return path if path and path != ":memory:" else None


def make_engine(url: str, *, echo: bool = False) -> Engine:
    settings = get_settings()
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30},
            json_serializer=jsoncodec.dumps, json_deserializer=jsoncodec.loads,
        )  # fmt: skip
        background = settings.database.sqlite_checkpoint_s > 0
        pages = AUTOCHECKPOINT_PAGES if background else SQLITE_DEFAULT_AUTOCHECKPOINT
        _configure_sqlite(engine, settings.database.sqlite_busy_timeout_ms, pages)
        return engine
    idle_ms = int(settings.database.idle_in_transaction_timeout_s * 1000)
    # Last in, first out: under load the same few connections stay warm and skip the ping;
    # the rest sit idle and are tested when next used.
    engine = create_engine(
        url, echo=echo, pool_size=10, max_overflow=20, pool_use_lifo=True,
        json_serializer=jsoncodec.dumps, json_deserializer=jsoncodec.loads,
        connect_args={"options": f"-c idle_in_transaction_session_timeout={idle_ms}"},
    )  # fmt: skip
    _ping_when_idle(engine, settings.database.ping_after_idle_s)
    return engine


def _ping_when_idle(engine: Engine, idle_s: float) -> None:
    """Test a pooled connection with a round trip before use, if it sat unused `idle_s`.

    SQLAlchemy's pool_pre_ping tests it before every use: one more round trip per transaction,
    about a twelfth of a one-item request's. A connection used a moment ago was alive a moment
    ago; one that broke since fails its first statement instead, which invalidates the whole
    pool (every connection older than the failure is replaced) and is a transient error the
    callers try again (`with_retries`, the tier tasks' retries).
    """

    @event.listens_for(engine, "checkin")
    def _used(_dbapi_connection: Any, record: Any) -> None:
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        checked_in_at = record.info.get("checked_in_at")
        if checked_in_at is None or time.monotonic() - checked_in_at < idle_s:
            return  # new (it just connected), or used a moment ago
        try:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as exc:  # the driver's own error: the connection is gone
            # The pool drops this connection and checks out another (a few tries).
            raise DisconnectionError(str(exc)) from exc


@lru_cache
def get_engine() -> Engine:
    settings = get_settings()
    return make_engine(settings.database_url, echo=settings.database.echo)


@lru_cache
def get_sessionmaker() -> sessionmaker[Session]:
    return sessionmaker(get_engine(), expire_on_commit=False)


@contextmanager
def transaction() -> Iterator[Session]:
    """A session whose transaction commits on success and rolls back on error."""
    session = get_sessionmaker()()
    try:
        with session.begin():
            yield session
    finally:
        session.close()


def reset_engine_cache() -> None:
    """Forget the cached engine (after settings changed, or in a forked child)."""
    if get_engine.cache_info().currsize:
        get_engine().dispose(close=False)
    get_engine.cache_clear()
    get_sessionmaker.cache_clear()


#: SQLSTATEs of errors that go away on their own: serialization failure, deadlock, the server
#: shutting down or restarting, connection failures.
TRANSIENT_SQLSTATES = frozenset(
    {"40001", "40P01", "57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006"}
)


def is_transient(exc: BaseException) -> bool:
    """Whether a database error is worth trying again: the database was unreachable or
    restarting, or the transaction lost a race it can win next time."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True  # connection refused/dropped, server closed it, SQLite busy
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        return getattr(exc.orig, "sqlstate", None) in TRANSIENT_SQLSTATES
    return False


def with_retries(
    work: Callable[[], T],
    *,
    retries: int,
    first_delay_s: float = 0.5,
    retry_on: Callable[[BaseException], bool] = is_transient,
) -> T:
    """Run `work` (which opens its own transaction), again after a growing pause when it fails
    with a database error `retry_on` accepts, at most `retries` more times."""
    delay = first_delay_s
    for attempt in range(retries + 1):
        try:
            return work()
        except DBAPIError as exc:
            if attempt == retries or not retry_on(exc):
                raise
            log.warning(
                "database error; trying again",
                error=type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__,
                attempt=attempt + 1,
                retry_in_s=delay,
            )
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def retried_transaction(
    work: Callable[[Session], T], *, retries: int = 2, first_delay_s: float = 0.1
) -> T:
    """`work(session)` in a transaction of its own that commits on success; run again, in a new
    transaction, when the database lost the connection or a race (`with_retries`). For a
    request's short reads and writes: nothing of a failed try was stored."""

    def attempt() -> T:
        with transaction() as session:
            return work(session)

    return with_retries(attempt, retries=retries, first_delay_s=first_delay_s)
