"""`write_new`: a request's new job and items written with Core INSERTs instead of the ORM's
flush, on both databases. What a user would notice if it went wrong: rows missing or out of
order (a trajectory's steps before their parent), a later change to an item not saved, or a
column's default overwritten with NULL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session

from verifier_service.core.db import Base, make_engine, utcnow
from verifier_service.core.ids import new_id
from verifier_service.core.rows import plain_row, write_new
from verifier_service.ladder.models import Item, Job


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/rows.db"
    return str(request.getfixturevalue("own_pg_url"))


def _job(**values: object) -> Job:
    now = utcnow()
    fields = {
        "id": new_id(), "principal": "trainer", "idempotency_key": None, "request_hash": "h",
        "policy_name": "default", "policy_version": 1, "status": "running", "created_at": now,
        "deadline_at": now + timedelta(seconds=60), "n_items": 2, "n_done": 0,
        "finished_at": None, "request_id": None,
    }  # fmt: skip
    return plain_row(Job, **(fields | values))


def _item(job_id: str, index: int, parent: Item | None = None, kind: str = "molecule") -> Item:
    return plain_row(
        Item, id=new_id(), job_id=job_id, index=index,
        parent_id=None if parent is None else parent.id, role="item" if parent is None else "step",
        kind=kind, candidate={"kind": kind, "payload": {"n": index}}, content_hash=f"c{index}",
        group_key=None, state="climbing", step=0, reward=None, finished_at=None,
        dispatched_at=None, claimed_by=None, claimed_at=None, dispatches=0,
    )  # fmt: skip


def test_new_rows_are_written_parents_first_and_later_changes_are_saved(url: str) -> None:
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    job = _job()
    parent = _item(job.id, 0, kind="trajectory")
    steps = [_item(job.id, i, parent) for i in range(3)]
    with Session(engine, expire_on_commit=False) as session, session.begin():
        session.add_all([*steps, parent])  # the steps first: the write must reorder them
        session.add(job)
        write_new(session, (Job, Item))
        assert not session.new
        assert all(inspect(o).persistent for o in [job, parent, *steps])
        # After the write, the objects are tracked like flushed ones: changes are UPDATEs.
        steps[1].state = "done"
        steps[1].reward = {"value": 0.5}
        job.n_done = 1
    with Session(engine) as session:
        rows = {i.id: i for i in session.scalars(select(Item))}
        stored_job = session.get(Job, job.id)
    assert stored_job is not None
    assert stored_job.n_done == 1
    assert set(rows) == {parent.id, *(s.id for s in steps)}
    assert all(rows[s.id].parent_id == parent.id for s in steps)
    assert rows[steps[1].id].state == "done"
    assert rows[steps[1].id].reward == {"value": 0.5}
    assert rows[steps[0].id].candidate == {"kind": "molecule", "payload": {"n": 0}}
    engine.dispose()


def test_a_row_missing_columns_is_flushed_with_its_defaults_and_its_items_after_it(
    url: str,
) -> None:
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    # Made with the ORM's constructor: created_at, status and n_done come from the column
    # defaults at flush, which a Core INSERT of the object's values would write as NULL.
    job = Job(
        id=new_id(), principal="trainer", request_hash="h", policy_name="default",
        policy_version=1, n_items=1,
    )  # fmt: skip
    item = _item(job.id, 0)
    with Session(engine, expire_on_commit=False) as session, session.begin():
        session.add_all([item, job])
        write_new(session, (Job, Item))  # the job cannot go first by Core: both are flushed
        assert not session.new
    with Session(engine) as session:
        stored = session.get(Job, job.id)
        assert stored is not None
        assert stored.created_at is not None
        assert (stored.status, stored.n_done) == ("running", 0)
        assert session.get(Item, item.id) is not None
    engine.dispose()
