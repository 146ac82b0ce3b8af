"""`pipelined`: a pass's INSERTs sent to PostgreSQL together (one round trip), on both
databases. What a user would notice if it went wrong: rows missing or written out of order (a
verdict before its item), or a failed INSERT that no longer raises the error the caller
handles (an Idempotency-Key race answers with the first job because of an IntegrityError)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, Table, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from verifier_service.core.db import Base, utcnow
from verifier_service.core.ids import new_id
from verifier_service.core.rows import pipelined, plain_row
from verifier_service.events.models import JobEvent
from verifier_service.events.repository import append
from verifier_service.ladder.models import Item, Job, VerdictRecord


def _job(job_id: str, key: str | None = None) -> dict[str, object]:
    now = utcnow()
    return {
        "id": job_id, "principal": "trainer", "idempotency_key": key, "request_hash": "h",
        "policy_name": "default", "policy_version": 1, "status": "running", "created_at": now,
        "deadline_at": now + timedelta(seconds=60), "n_items": 1, "n_done": 0,
        "finished_at": None, "request_id": None,
    }  # fmt: skip


def _item(job_id: str) -> dict[str, object]:
    return {
        "id": new_id(), "job_id": job_id, "index": 0, "parent_id": None, "role": "item",
        "kind": "molecule", "candidate": {"kind": "molecule", "payload": {"smiles": "C"}},
        "content_hash": "c", "group_key": None, "state": "done", "step": 1, "reward": None,
        "finished_at": None, "dispatched_at": None, "claimed_by": None, "claimed_at": None,
        "dispatches": 1,
    }  # fmt: skip


def _verdict(item_id: str) -> dict[str, object]:
    return {
        "id": new_id(), "item_id": item_id, "step": 0, "tier": "chem.fast", "tier_version": "1",
        "status": "passed", "score": 0.5, "uncertainty": None, "components": {"qed": 0.5},
        "feedback": "", "reason": None, "cpu_s": 0.0, "wall_s": 0.0, "cached": False,
        "cache_key": None, "created_at": utcnow(),
    }  # fmt: skip


def _insert(session: Session, model: type[Base], row: dict[str, object]) -> None:
    table = model.__table__
    assert isinstance(table, Table)
    session.execute(insert(table), [row])


def test_rows_that_refer_to_each_other_are_written_in_order(engine: Engine) -> None:
    job_id = new_id()
    item = _item(job_id)
    with Session(engine) as session, session.begin(), pipelined(session):
        _insert(session, Job, _job(job_id))
        _insert(session, Item, item)
        _insert(session, VerdictRecord, _verdict(str(item["id"])))
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(VerdictRecord)) == 1
        assert session.get(Item, str(item["id"])) is not None


def test_an_insert_that_fails_raises_its_integrity_error_and_keeps_nothing(
    engine: Engine,
) -> None:
    first = new_id()
    with Session(engine) as session, session.begin():
        _insert(session, Job, _job(first, key="k"))
    second = new_id()

    def both() -> None:
        with Session(engine) as session, session.begin(), pipelined(session):
            _insert(session, Job, _job(second))
            _insert(session, Job, _job(new_id(), key="k"))

    with pytest.raises(IntegrityError):  # what `_submit` catches to answer with the first job
        both()
    with Session(engine) as session:
        assert session.get(Job, second) is None  # the statement before it was rolled back too
        assert session.scalar(select(func.count()).select_from(Job)) == 1


@pytest.mark.parametrize("n", [1, 3])
def test_events_appended_without_ids_are_written(engine: Engine, n: int) -> None:
    # One row is the case to watch: SQLAlchemy fetches a single row's new id unless told not
    # to, and nothing can be fetched inside a pipeline.
    job_id = new_id()
    with Session(engine) as session, session.begin():
        _insert(session, Job, _job(job_id))
        drafts = [
            plain_row(
                JobEvent, id=None, job_id=job_id, principal="trainer", kind="item.scored",
                item_index=i, revision=1, data={}, created_at=utcnow(),
            )
            for i in range(n)
        ]  # fmt: skip
        append(session, drafts, with_ids=False)
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(JobEvent)) == n
