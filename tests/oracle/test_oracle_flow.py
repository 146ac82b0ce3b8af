"""The oracle domain in this process on a fresh real database (PostgreSQL, and SQLite as the
embedded default runs it): jobs submitted through the jobs service reach a pull oracle through
the real ladder; selection keeps to capacity by value, a lease that expires gives its batch
back, results are idempotent, late ones revise, a cancel withdraws what was not measured."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import transaction
from verifier_service.jobs import service as jobs
from verifier_service.jobs.schemas import RewardRequest
from verifier_service.ladder.models import CostLedgerEntry, Item
from verifier_service.ladder.operations import cancel_job, expire_job
from verifier_service.oracle import service, views
from verifier_service.oracle.errors import (
    LeaseLostError,
    NotResendableError,
    ResultConflictError,
)
from verifier_service.oracle.schemas import ClaimOut, ResultsIn
from verifier_service.policies import service as policies

PLATE = "plate"
PARTNER = AuthenticatedPrincipal(name=PLATE, roles=frozenset({"oracle"}), via="key")
DEFINITION = {
    "mode": "pull",
    "capacity": 3,
    "period_s": 864000,
    "batch_size": 2,
    "lease_s": 0.5,
    "turnaround_s": 0.5,
    "result_schema": {"pnl": {"unit": "USD"}},
    "score": {"field": "pnl", "low": -100, "high": 100},
    "price_per_item": 250.0,
}


@pytest.fixture
def database_env() -> dict[str, str]:
    return {"VERIFIER_ORACLES__DEFINITIONS": json.dumps({PLATE: DEFINITION})}


@pytest.fixture
def database(in_process_database: str) -> str:
    """A fresh database of either kind, this process's settings on it (tests/conftest.py)."""
    return in_process_database


def _policy(**config: Any) -> str:
    name = f"market-{uuid.uuid4().hex[:8]}"
    step = {"tier": "oracle", "config": {"oracle": PLATE, **config}}
    document = {"name": name, "ladders": {"json": [{"tier": "schema"}, step]}}
    with transaction() as session:
        policies.save(session, document)
    return name


def _job(policy: str, n: int, **request: Any) -> str:
    # The schema tier scores every action 1.0: equal values, so the oldest are chosen first.
    schema = {"schema": {"type": "object"}}
    items = [{"kind": "json", "payload": {"buy": i}, "reference": schema} for i in range(n)]
    body = RewardRequest.model_validate({"policy": policy, "items": items, **request})
    with transaction() as session:
        submission = jobs.submit(
            session, body, principal="trainer", idempotency_key=None, runs_here=lambda _: True
        )
        return submission.job.id


def _rewards(job_id: str) -> list[dict[str, Any]]:
    with transaction() as session:
        query = select(Item).where(Item.job_id == job_id).order_by(Item.index)
        return [dict(i.reward or {}) for i in session.scalars(query)]


def _oracle_costs(job_id: str) -> list[float]:
    """The ledger's cost of each of the job's items at the oracle step (step 1)."""
    with transaction() as session:
        query = select(CostLedgerEntry.cost_units).where(
            CostLedgerEntry.job_id == job_id, CostLedgerEntry.step == 1
        )
        return sorted(session.scalars(query))


def _claim() -> ClaimOut | None:
    with transaction() as session:
        return service.claim(session, PLATE, PARTNER, "http://verifier")


def _post(claim: ClaimOut, pnl: float = 50.0) -> tuple[int, int]:
    body = ResultsIn.model_validate(
        {"results": [{"item_id": i.item_id, "values": {"pnl": pnl}} for i in claim.batch.items]}
    )
    with transaction() as session:
        out = service.record_results(session, PLATE, PARTNER, body)
    return out.accepted, out.duplicates


def test_capacity_batches_and_a_lease_that_expires(database: str) -> None:
    del database
    job_id = _job(_policy(), 5)
    assert {r["status"] for r in _rewards(job_id)} == {"pending"}
    assert service.select(PLATE) == 3  # capacity 3: two batches (batch_size 2) and the rest out
    rewards = _rewards(job_id)
    left_out = [r for r in rewards if r["status"] == "scored"]
    assert len(left_out) == 2
    assert all("not selected: plate capacity" in r["reason"] for r in left_out)
    assert all(r["fidelity"] == "schema" for r in left_out)
    first = _claim()
    second = _claim()
    assert first is not None
    assert second is not None
    assert sorted([len(first.batch.items), len(second.batch.items)]) == [1, 2]
    assert _claim() is None  # both held
    time.sleep(0.7)  # the first client died: its lease expires
    again = _claim()
    assert again is not None
    assert again.batch.batch_id in (first.batch.batch_id, second.batch.batch_id)
    with transaction() as session:
        [plate] = views.overview(session)
    assert (plate.in_flight, plate.overdue_batches, plate.turnaround_p50_s) == (3, 2, None)
    held = first if again.batch.batch_id == first.batch.batch_id else second
    with transaction() as session, pytest.raises(LeaseLostError):
        service.heartbeat(session, PLATE, PARTNER, held.batch.batch_id, held.lease_id)
    n = len(first.batch.items)
    assert _post(first) == (n, 0)
    assert _post(first) == (0, n)  # the same again: duplicates
    with pytest.raises(ResultConflictError):
        _post(first, pnl=-5.0)
    assert _post(second) == (len(second.batch.items), 0)
    scored = [r for r in _rewards(job_id) if r.get("fidelity") == "oracle"]
    assert [(r["status"], r["value"], r["revision"]) for r in scored] == [("scored", 0.75, 1)] * 3
    assert _oracle_costs(job_id) == [0.0, 0.0, 250.0, 250.0, 250.0]  # the left out cost 0
    costs = sorted(r["cost"]["cost_units"] for r in _rewards(job_id))  # with the schema tier's
    assert costs == pytest.approx([0, 0, 250, 250, 250], abs=0.01)
    assert service.select(PLATE) == 0  # the period's capacity is spent
    with transaction() as session:
        [plate] = views.overview(session)
    assert (plate.used_this_period, plate.items) == (3, {"answered": 3, "not_selected": 2})
    assert (plate.in_flight, plate.overdue_batches) == (0, 0)
    assert plate.turnaround_p50_s is not None
    assert plate.turnaround_p95_s is not None
    assert 0.7 <= plate.turnaround_p50_s <= plate.turnaround_p95_s < 30


def test_a_late_result_revises_and_a_cancel_withdraws(database: str) -> None:
    del database
    late_job = _job(_policy(), 1)
    cancelled_job = _job(_policy(), 1)
    service.select(PLATE)
    claim = _claim()
    assert claim is not None
    assert len(claim.batch.items) == 2
    with transaction() as session:
        expire_job(session, late_job)
    with transaction() as session:
        cancel_job(session, cancelled_job, "by operator test")
    [fallback] = _rewards(late_job)
    assert (fallback["fidelity"], fallback["revision"]) == ("schema", 1)
    assert "its answer will revise this reward" in fallback["reason"]
    [cancelled] = _rewards(cancelled_job)
    assert cancelled["status"] == "infra_error"
    assert _post(claim, pnl=-100.0) == (2, 0)  # both taken; only the late one revises
    [revised] = _rewards(late_job)
    assert (revised["fidelity"], revised["value"], revised["revision"]) == ("oracle", 0.0, 2)
    assert _rewards(cancelled_job) == [cancelled]
    with transaction() as session:
        [plate] = views.overview(session)
    assert plate.items == {"answered": 1, "withdrawn": 1}


def test_a_paused_oracle_gives_out_nothing_and_a_batch_can_be_given_back(database: str) -> None:
    del database
    job_id = _job(_policy(), 2)
    with transaction() as session:
        service.set_paused(session, PLATE, True, "op")
    assert service.select(PLATE) == 0
    assert _claim() is None
    with transaction() as session:
        [plate] = views.overview(session)
    assert (plate.paused, plate.items) == (True, {"queued": 2})
    with transaction() as session:
        service.set_paused(session, PLATE, False, "op")
    assert service.select(PLATE) == 2
    first = _claim()
    assert first is not None
    assert _claim() is None  # held by its lease
    with transaction() as session:  # an operator gives the held batch back
        assert service.resend(session, PLATE, first.batch.batch_id, "op") == "open"
    again = _claim()
    assert again is not None
    assert again.batch.batch_id == first.batch.batch_id
    assert _post(again) == (2, 0)
    assert {r["fidelity"] for r in _rewards(job_id)} == {"oracle"}
    with transaction() as session, pytest.raises(NotResendableError, match="is done"):
        service.resend(session, PLATE, again.batch.batch_id, "op")


def test_an_oracles_tasks_go_to_its_own_queue(database: str, redis_url: str) -> None:
    # A partner that is slow or down holds up only its own queue (oracle.NAME), not the
    # webhooks' (callbacks) or another oracle's.
    import redis

    broker = redis.Redis.from_url(redis_url)
    broker.delete("oracle.plate")
    _job(_policy(), 2)
    deadline = time.monotonic() + 10
    while broker.llen("oracle.plate") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    tasks = [json.loads(m)["headers"]["task"] for m in broker.lrange("oracle.plate", 0, -1)]
    broker.delete("oracle.plate")
    assert "oracle.select" in tasks, tasks


def test_a_callbacks_worker_takes_the_oracles_queues_unless_told_which() -> None:
    oracles = ["plate", "lab"]
    assert service.oracle_queues(["ladder", "callbacks"], oracles) == [
        "ladder", "callbacks", "oracle.lab", "oracle.plate",
    ]  # fmt: skip
    # A worker of its own for one oracle, and webhooks' workers naming those they still serve.
    assert service.oracle_queues(["oracle.lab"], oracles) == ["oracle.lab"]
    assert service.oracle_queues(["callbacks", "oracle.plate"], oracles) == [
        "callbacks", "oracle.plate",
    ]  # fmt: skip
    assert service.oracle_queues(["tier.fast"], oracles) == ["tier.fast"]
