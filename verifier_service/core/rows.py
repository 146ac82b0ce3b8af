"""Many rows at once: plain ORM rows, written by the driver's executemany or PostgreSQL's COPY,
and statements sent together (psycopg's pipeline mode).

A batch makes hundreds of rows per table (items, verdicts, ledger rows, cache entries, events);
what SQLAlchemy's unit of work spends on each of them is most of a batch's cost. The rows go in
here with their column types' bind processors looked up once per table, as the same SQL, with
the same errors (an IntegrityError stays one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, DateTime, Dialect, Table, insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.types import TypeEngine

from verifier_service.core.db import Base, UTCDateTime

M = TypeVar("M", bound=Base)

#: From this many rows on, an INSERT into PostgreSQL goes by COPY (psycopg writes the rows in
#: C): 256 verdict rows took 7.2 ms of client CPU as an executemany in a pipeline, 2.7 ms by
#: COPY. COPY costs less CPU from a handful of rows on (16: 0.40 against 0.61 ms), but each is a
#: round trip of its own, where a pipeline sends a pass's statements together: alone, its wall
#: time was the same or up to 0.1 ms longer from 4 to 64 rows. So small passes (a one-item
#: request) keep their pipeline; the bound between is a judgement, not a measured optimum.
COPY_MIN_ROWS = 32


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
    #: The same rows' COPY statement (PostgreSQL, a plain INSERT), else None.
    copy: str | None

    def parameters(self, row: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        if self.positional:
            return self.values(row)
        return {k: row[k] if p is None else p(row[k]) for k, p in self.columns}

    def values(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple([row[k] if p is None else p(row[k]) for k, p in self.columns])


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
    each row), sent as the driver's executemany: no RETURNING, nothing read back. On
    PostgreSQL, `COPY_MIN_ROWS` rows or more go by COPY instead, unless a pipeline is open
    (`pipelined`: COPY cannot run in one) or `keep_existing` is given.

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
        copy = None
        if dialect.name == "postgresql" and not keep_existing:
            quote = dialect.identifier_preparer.quote
            names = ", ".join(quote(table.c[k].name) for k in keys_in_order)
            copy = f"COPY {dialect.identifier_preparer.format_table(table)} ({names}) FROM STDIN"
        plain = known[(table, columns, keep_existing)] = _PlainInsert(
            sql=compiled.string,
            columns=tuple((k, _processor(table.c[k].type, dialect)) for k in keys_in_order),
            positional=compiled.positiontup is not None,
            copy=copy,
        )
    if plain.copy is not None and len(rows) >= COPY_MIN_ROWS and not _in_pipeline(connection):
        _copy_rows(connection, plain.copy, [plain.values(row) for row in rows])
        return
    connection.exec_driver_sql(plain.sql, [plain.parameters(row) for row in rows])


def _in_pipeline(connection: Connection) -> bool:
    driver: Any = connection.connection.driver_connection
    return bool(driver.pgconn.pipeline_status)  # psycopg's PipelineStatus.OFF is 0


def _copy_rows(connection: Connection, statement: str, rows: list[tuple[Any, ...]]) -> None:
    """Rows (values in the statement's column order) through PostgreSQL's COPY FROM STDIN, in
    the connection's transaction; a failure is raised as SQLAlchemy's error for it."""
    import psycopg  # the postgres extra, present whenever the dialect is

    driver: Any = connection.connection.driver_connection
    try:
        with (
            _copy_span(statement, driver.info, len(rows)),
            driver.cursor() as cursor,
            cursor.copy(statement) as copy,
        ):
            for row in rows:
                copy.write_row(row)
    except psycopg.Error as exc:
        raise DBAPIError.instance(
            statement, None, exc, psycopg.Error, dialect=connection.dialect
        ) from exc


def _copy_span(statement: str, info: Any, rows: int) -> AbstractContextManager[Any]:
    """A COPY's trace span, when traces are on (`metrics.tracing`): SQLAlchemy's
    instrumentation sees the statements run through its cursor only, so without this a batch's
    rows would be missing from its trace. Named and described as that instrumentation does its
    spans (the operation and the database: `info`, psycopg's ConnectionInfo), with the row
    count."""
    trace = _otel_trace()
    if trace is None:
        return nullcontext()
    span = trace.get_current_span()
    if not span.is_recording():  # traces off, or this work is not traced
        return nullcontext()
    db_name = info.dbname
    started: AbstractContextManager[Any] = trace.get_tracer(__name__).start_as_current_span(
        f"COPY {db_name}",
        kind=trace.SpanKind.CLIENT,
        attributes={
            "db.system": "postgresql",
            "db.name": db_name,
            "db.statement": statement,
            "db.operation.batch.size": rows,
        },
    )
    return started


@cache
def _otel_trace() -> Any:
    """OpenTelemetry's trace API, or None without the otel extra (looked for once)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


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
def pipelined(session: Session, rows: int = 0) -> Iterator[None]:
    """Statements sent together: on PostgreSQL one round trip for all of them (psycopg's
    pipeline mode) instead of one each; elsewhere as usual. With `rows` (the most rows one of
    its INSERTs writes) at `COPY_MIN_ROWS` or more, no pipeline: those go by COPY, one round
    trip each and less client CPU per row.

    Only statements whose results nobody reads may run inside: Core INSERTs and UPDATEs
    without RETURNING, not an ORM flush (it checks row counts; so the session does not
    autoflush inside: flush before, if pending changes must go first) nor a query. The server
    runs them in order and stops at the first error, which is raised at the end of the block
    as the SQLAlchemy error its statement would have raised (an IntegrityError stays one).
    """
    connection = session.connection()
    if connection.dialect.name != "postgresql" or rows >= COPY_MIN_ROWS:
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
