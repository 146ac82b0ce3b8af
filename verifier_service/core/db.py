"""Database engine and sessions. SQLite gets WAL, a busy timeout and BEGIN IMMEDIATE."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

import structlog
from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Engine,
    Executable,
    Table,
    TypeDecorator,
    create_engine,
    event,
    insert,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.types import TypeEngine

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


def plain_row(model: type[M], **values: Any) -> M:
    """A new ORM instance with its attributes set directly, without the ORM's attribute events.

    For the hundreds of rows a batch makes per table (verdicts, ledger rows, items, events):
    the generated constructor fires an event per attribute and costs ~20x this. Every column
    must be given (Python-side defaults are not applied; a TypeError names what is missing or
    unknown), so a column added later cannot go unwritten. The instance reads and writes like
    any other; a Core insert can write it (`row_values`), and `session.add` works as usual.
    """
    if values.keys() != _column_keys(model):
        missing = sorted(_column_keys(model) - values.keys())
        unknown = sorted(values.keys() - _column_keys(model))
        raise TypeError(f"{model.__name__} row: missing {missing}, unknown {unknown}")
    instance: M = model.__mapper__.class_manager.new_instance()
    instance.__dict__.update(values)
    return instance


@cache
def _column_keys(model: type[Base]) -> frozenset[str]:
    return frozenset(model.__mapper__.column_attrs.keys())


def row_values(instance: Base, keys: Sequence[str]) -> dict[str, Any]:
    """The values of some columns of a new, unexpired instance (for a Core insert)."""
    state = instance.__dict__
    return {key: state.get(key) for key in keys}


@dataclass(frozen=True)
class _PlainInsert:
    """A table's INSERT as the driver takes it: its text, and how to turn a row into the
    driver's parameters (column keys in order, each with the column type's bind processor)."""

    sql: str
    columns: tuple[tuple[str, Callable[[Any], Any] | None], ...]
    positional: bool

    def parameters(self, row: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        if self.positional:
            return tuple([row[k] if p is None else p(row[k]) for k, p in self.columns])
        return {k: row[k] if p is None else p(row[k]) for k, p in self.columns}


_plain_inserts: WeakKeyDictionary[
    Dialect, dict[tuple[Table, tuple[str, ...], tuple[str, ...]], _PlainInsert]
] = WeakKeyDictionary()


def insert_rows(
    session: Session,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str] | None = None,
    *,
    keep_existing: tuple[str, ...] = (),
) -> None:
    """A plain INSERT of many rows (every column of `keys`, by default all of the table's, in
    each row), sent as the driver's executemany: no RETURNING, nothing read back.

    `keep_existing` names the columns of a unique index: a row whose values there are taken
    already is skipped, the stored row kept (ON CONFLICT DO NOTHING, on SQLite and PostgreSQL).

    The same statement SQLAlchemy would run, and its errors are raised as SQLAlchemy's
    (an IntegrityError stays one). What it skips is SQLAlchemy's generic building of each
    row's parameters (256 ledger rows into SQLite: 3.3 ms with it, 2.4 ms without): the
    column types' bind processors (JSON, timestamps) are looked up once per table and
    dialect and applied here. An instance made by `plain_row` can pass its `__dict__` as its row.
    """
    if not rows:
        return
    connection = session.connection()
    dialect = connection.dialect
    columns = tuple(keys) if keys is not None else tuple(table.columns.keys())
    known = _plain_inserts.setdefault(dialect, {})
    plain = known.get((table, columns, keep_existing))
    if plain is None:
        statement = insert(table)
        if keep_existing:
            make = postgresql.insert if dialect.name == "postgresql" else sqlite.insert
            statement = make(table).on_conflict_do_nothing(index_elements=list(keep_existing))
        compiled = statement.compile(dialect=dialect, column_keys=list(columns))
        order = compiled.positiontup or list(compiled.binds)
        keys_in_order = tuple(compiled.binds[name].key for name in order)
        if set(keys_in_order) != set(columns):  # left out, but with a default made in Python
            missing = sorted(set(keys_in_order) - set(columns))
            raise ValueError(f"{table.name} rows must give {missing} too")
        plain = known[(table, columns, keep_existing)] = _PlainInsert(
            sql=compiled.string,
            columns=tuple((k, _processor(table.c[k].type, dialect)) for k in keys_in_order),
            positional=compiled.positiontup is not None,
        )
    connection.exec_driver_sql(plain.sql, [plain.parameters(row) for row in rows])


def _processor(type_: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    """A column type's bind processor; for timestamps, one that formats the same datetime
    object once: the rows of a pass share theirs (its verdicts', ledger rows', events' and
    finished items' times), and SQLite's text for one costs about 2 us."""
    process: Callable[[Any], Any] | None = type_.dialect_impl(dialect).bind_processor(dialect)
    if process is None or not isinstance(type_, DateTime | UTCDateTime):
        return process
    last: list[tuple[Any, Any]] = [(None, None)]

    def once_per_value(value: Any) -> Any:
        seen = last[0]  # (value, text) read and written whole: threads may share this
        if seen[0] is value and value is not None:
            return seen[1]
        text = process(value)
        last[0] = (value, text)
        return text

    return once_per_value


def built_once(make: Callable[P, S]) -> Callable[P, S]:
    """A statement factory that builds its statement once per argument (e.g. a dialect's name)
    and then returns it: for a query on every request's path, with `bindparam`s for what
    changes (an `expanding=True` one for an IN list).

    Building a statement and its cache key costs 0.05-0.3 ms each time, more than writing a
    row or two to SQLite; a statement built once keeps its cache key."""
    return cache(make)  # type: ignore[return-value]


def write_new(session: Session, models: Sequence[type[Base]]) -> None:
    """Write the session's new rows: those of `models` (in that order) with one Core INSERT per
    model, the rest by a flush after them.

    Flushing a request's job and items through the ORM's unit of work cost more than the
    INSERTs themselves (about 0.3 ms for one job and one item). The rows written here stay in
    the session as persistent, as if flushed: what changes on them later is an UPDATE. A model's
    rows go this way only if every one has a value for every column (`plain_row`: a Core
    INSERT would write NULL over a missing one's default); otherwise the flush writes them and
    those of the models after them. Rows referring to a new row of their own model (a
    trajectory's steps) come after it.
    """
    if not session.new:
        return
    insert_plain_new(session, models)
    if session.new:
        session.flush()


def insert_plain_new(session: Session, models: Sequence[type[Base]]) -> bool:
    """`write_new`'s Core INSERTs alone (no flush: they may run in `pipelined`); whether every
    new row of `models` was written (False: the flush must write the rest)."""
    new = list(session.new)
    with session.no_autoflush:  # the other new rows wait for the flush
        _insert_plain(session, new, models)
    kinds = tuple(models)
    return not any(isinstance(obj, kinds) for obj in session.new)


@contextmanager
def pipelined(session: Session) -> Iterator[None]:
    """Statements sent together: on PostgreSQL one round trip for all of them (psycopg's
    pipeline mode) instead of one each; elsewhere as usual.

    Only statements whose results nobody reads may run inside: Core INSERTs and UPDATEs
    without RETURNING, not an ORM flush (it checks row counts; so the session does not
    autoflush inside: flush before, if pending changes must go first) nor a query. The server
    runs them in order and stops at the first error, which is raised at the end of the block
    as the SQLAlchemy error its statement would have raised (an IntegrityError stays one).
    """
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        yield
        return
    import psycopg  # the postgres extra, present whenever the dialect is

    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with session.no_autoflush, driver.pipeline():
            yield
    except psycopg.Error as exc:
        raise DBAPIError.instance(
            None, None, exc, psycopg.Error, dialect=connection.dialect
        ) from exc


def _insert_plain(session: Session, new: list[Any], models: Sequence[type[Base]]) -> None:
    for model in models:
        keys = _column_keys(model)
        rows = [o for o in new if type(o) is model]
        if not all(keys <= o.__dict__.keys() for o in rows):
            break
        if not rows:
            continue
        table = model.__table__
        assert isinstance(table, Table)
        refs = [(f.parent.key, f.column.key) for f in table.foreign_keys if f.column.table is table]
        insert_rows(session, table, [obj.__dict__ for obj in _parents_first(rows, refs)])
        # Pending -> persistent, as a flush leaves the rows it inserted (what changes on them
        # from now on is an UPDATE). The public way (expunge, make_transient_to_detached, add)
        # walked every row's relationships twice: 4 ms of a 256-item request's 75.
        # `test_write_new` fails if a SQLAlchemy release changes this method.
        session._register_persistent({instance_state(obj) for obj in rows})


def _parents_first(rows: list[Any], refs: Sequence[tuple[str, str]]) -> list[Any]:
    """Rows ordered so that one referring to another of them (column -> key) comes after it."""
    if not refs:
        return rows
    by_key = {(key, getattr(o, key)): o for o in rows for _, key in refs}
    placed: list[Any] = []
    seen: set[int] = set()

    def place(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for column, key in refs:
            parent = by_key.get((key, getattr(obj, column)))
            if parent is not None:
                place(parent)
        placed.append(obj)

    for obj in rows:
        place(obj)
    return placed


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
