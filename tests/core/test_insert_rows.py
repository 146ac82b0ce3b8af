"""`insert_rows`: a batch's rows written through the driver's executemany, on both databases.
What a user would notice if it went wrong: a verdict, item or event that reads back different
from what was written (JSON, timestamps, flags, NULLs), or a failed INSERT that is no longer
the IntegrityError the submit path handles."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, Table, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from verifier_service.core.db import Base, utcnow
from verifier_service.core.ids import new_id
from verifier_service.core.rows import COPY_MIN_ROWS, insert_rows, plain_row
from verifier_service.events.models import JobEvent
from verifier_service.ladder.models import Item, Job, VerdictCacheEntry, VerdictRecord


def _table(model: type[Base]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _job() -> Job:
    now = utcnow()
    return plain_row(
        Job, id=new_id(), principal="trainer", idempotency_key=None, request_hash="h",
        policy_name="default", policy_version=1, status="running", created_at=now,
        deadline_at=now + timedelta(seconds=60), n_items=2, n_done=0, finished_at=None,
        request_id=None,
    )  # fmt: skip


def _item(job_id: str, index: int, **changes: object) -> Item:
    values: dict[str, object] = {
        "id": new_id(), "job_id": job_id, "index": index, "parent_id": None, "role": "item",
        "kind": "molecule", "content_hash": "c", "group_key": None, "state": "done", "step": 1,
        "candidate": {"kind": "molecule", "payload": {"smiles": "CCO", "note": "é ✓"}},
        "reward": {"value": 0.25, "status": "scored", "components": {"qed": 0.25}},
        "finished_at": utcnow(), "dispatched_at": None, "claimed_by": None, "claimed_at": None,
        "dispatches": 0,
    }  # fmt: skip
    return plain_row(Item, **(values | changes))


def test_rows_read_back_as_written(engine: Engine) -> None:
    job = _job()
    items = [_item(job.id, 0), _item(job.id, 1, reward=None, finished_at=None, group_key="g")]
    verdict = plain_row(
        VerdictRecord, id=new_id(), item_id=items[0].id, step=0, tier="chem.fast",
        tier_version="1", status="passed", score=0.5, uncertainty=None,
        components={"qed": 0.5, "alerts": 0.0}, feedback="ok", reason=None, cpu_s=0.001,
        wall_s=0.002, cached=True, cache_key="k", created_at=utcnow(),
    )  # fmt: skip
    expected = [
        {k: getattr(o, k) for k in _table(type(o)).columns.keys()} for o in (job, *items, verdict)
    ]
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Job), [job.__dict__])
        insert_rows(session, _table(Item), [i.__dict__ for i in items])
        insert_rows(session, _table(VerdictRecord), [verdict.__dict__])
    with Session(engine) as session:
        got = [session.get(type(o), o.id) for o in (job, *items, verdict)]
        read = [
            {k: getattr(o, k) for k in _table(type(o)).columns.keys()} for o in got if o is not None
        ]
    assert read == expected


def _event(job_id: str, index: int) -> dict[str, object]:
    return {
        "job_id": job_id, "principal": "trainer", "kind": "item.finished", "item_index": index,
        "revision": 1, "data": {"reward": {"value": index / 2}}, "created_at": utcnow(),
    }  # fmt: skip


def test_event_rows_take_their_ids_from_the_database(engine: Engine) -> None:
    job = _job()
    columns = [c for c in _table(JobEvent).columns.keys() if c != "id"]
    events = [_event(job.id, i) for i in range(3)]
    assert set(events[0]) == set(columns)
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Job), [job.__dict__])
        insert_rows(session, _table(JobEvent), events, columns)
    with Session(engine) as session:
        stored = session.scalars(select(JobEvent).order_by(JobEvent.id)).all()
        assert [(e.item_index, e.data) for e in stored] == [
            (i, {"reward": {"value": i / 2}}) for i in range(3)
        ]
        assert len({e.id for e in stored}) == 3


def test_a_row_that_breaks_a_constraint_raises_integrity_error(engine: Engine) -> None:
    job = _job()
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Job), [job.__dict__])
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Item), [_item(job.id, 0).__dict__])
        with pytest.raises(IntegrityError):
            insert_rows(session, _table(Job), [job.__dict__])  # the same id again
        session.rollback()
    with Session(engine) as session:  # the failed transaction left nothing
        assert session.scalars(select(Item)).all() == []


def test_rows_sharing_a_timestamp_and_rows_not_read_back_each_their_own(engine: Engine) -> None:
    # A pass's rows share one datetime object, which is formatted once: the next value, or the
    # same one after another, must not come back as the one before it.
    job = _job()
    first, second = utcnow(), utcnow() + timedelta(seconds=1)
    times = [first, first, second, first, None, None, second, second]
    items = [_item(job.id, i, finished_at=at) for i, at in enumerate(times)]
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Job), [job.__dict__])
        insert_rows(session, _table(Item), [i.__dict__ for i in items])
    with Session(engine) as session:
        stored = session.scalars(select(Item).order_by(Item.index)).all()
        assert [i.finished_at for i in stored] == times


def test_keep_existing_skips_a_taken_key_and_inserts_the_rest(engine: Engine) -> None:
    # The verdict cache's insert-or-keep: two requests that computed the same verdict both go
    # on, the first entry stays, and a new key in the same statement is still written.
    def entry(key: str, score: float) -> dict[str, object]:
        return {
            "key": key, "tier": "chem.fast", "tier_version": "1",
            "verdict": {"status": "passed", "score": score}, "created_at": utcnow(),
        }  # fmt: skip

    table = _table(VerdictCacheEntry)
    with Session(engine) as session, session.begin():
        insert_rows(session, table, [entry("a", 0.1)], keep_existing=("key",))
    with Session(engine) as session, session.begin():
        insert_rows(session, table, [entry("a", 0.9), entry("b", 0.5)], keep_existing=("key",))
        with pytest.raises(IntegrityError):  # without it, a taken key is an error as before
            with session.begin_nested():
                insert_rows(session, table, [entry("b", 0.7)])
    with Session(engine) as session:
        stored = session.execute(select(table.c.key, table.c.verdict).order_by(table.c.key))
        assert [(k, v["score"]) for k, v in stored] == [("a", 0.1), ("b", 0.5)]


def test_a_batch_of_rows_reads_back_as_written(engine: Engine) -> None:
    # From COPY_MIN_ROWS rows on, PostgreSQL gets them by COPY (text format): what COPY treats
    # specially in text (tabs, newlines, backslashes, \N) must come back as sent, as must
    # JSON, NULLs, booleans and timestamps.
    job = _job()
    tricky = ["a\tb", "line\nnext", "back\\slash", "\\N", "", "é ✓ 😀", "quote \" and '", "\r"]
    items = [
        _item(job.id, i, group_key=tricky[i % len(tricky)] if i % 3 else None)
        for i in range(COPY_MIN_ROWS + 8)
    ]
    items[1].reward = None
    # a candidate's own text (a trainer's policy wrote it), NUL included, inside the JSON
    items[2].candidate = {"kind": "molecule", "payload": {"smiles": "C\tC\n\x00", "x": [1, None]}}
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Job), [job.__dict__])
        insert_rows(session, _table(Item), [i.__dict__ for i in items])
    columns = _table(Item).columns.keys()
    with Session(engine) as session:
        stored = session.scalars(select(Item).order_by(Item.index)).all()
        read = [{k: getattr(i, k) for k in columns} for i in stored]
    assert read == [{k: getattr(i, k) for k in columns} for i in items]


def test_a_batch_that_breaks_a_constraint_raises_integrity_error(engine: Engine) -> None:
    job = _job()
    items = [_item(job.id, i) for i in range(COPY_MIN_ROWS + 1)]
    items[-1].id = items[0].id  # the same id twice in one statement
    with Session(engine) as session, session.begin():
        insert_rows(session, _table(Job), [job.__dict__])
    with Session(engine) as session, session.begin():
        with pytest.raises(IntegrityError):
            insert_rows(session, _table(Item), [i.__dict__ for i in items])
        session.rollback()
    with Session(engine) as session:
        assert session.scalars(select(Item)).all() == []
