"""A long trajectory costs the same statements per tier task and per cancel whatever its
length: nothing the ladder does for one step reads or writes once per step of its trajectory.

Before: every step that finished flushed and read all its siblings (a query per step, each
returning every step), so a 10,000-step trajectory's tier tasks took 30-205 s each under the
job's lock, and cancelling it never returned. Counted with a SQLAlchemy event listener on the
real databases (PostgreSQL, and SQLite as the embedded default runs it).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from sqlalchemy import event

from verifier_service.core.db import get_engine, transaction
from verifier_service.jobs import service as jobs
from verifier_service.jobs.schemas import RewardRequest
from verifier_service.ladder.execute import execute
from verifier_service.ladder.models import Item, Job
from verifier_service.ladder.operations import cancel_job
from verifier_service.ladder.runs import prepare_tier_run, record_tier_run
from verifier_service.policies import service as policies

SCHEMA = {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}}}


@pytest.fixture
def database(in_process_database: str) -> str:
    """A fresh database of either kind, this process's settings on it (tests/conftest.py)."""
    return in_process_database


class Statements:
    """Counts the statements sent on the engine (an executemany counts once)."""

    def __init__(self) -> None:
        self.n = 0

    def __enter__(self) -> Statements:
        event.listen(get_engine(), "before_cursor_execute", self._count)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(get_engine(), "before_cursor_execute", self._count)

    def _count(self, *_: Any, **__: Any) -> None:
        self.n += 1


def _policy() -> str:
    name = f"tools-{uuid.uuid4().hex[:8]}"
    document = {
        "name": name,
        "ladders": {"json": [{"tier": "schema", "config": {"schema": SCHEMA}}]},
    }
    with transaction() as session:
        policies.save(session, document)
    return name


def _submit(policy: str, steps: int) -> tuple[str, list[Any]]:
    marker = uuid.uuid4().hex  # nothing cached from another run
    trajectory = {
        "kind": "trajectory",
        "steps": [
            {"action": {"kind": "json", "payload": {"tool": f"t{i}", "m": marker}}}
            for i in range(steps)
        ],
    }
    body = RewardRequest.model_validate({"policy": policy, "items": [trajectory]})
    with transaction() as session:
        submission = jobs.submit(session, body, principal="trainer", idempotency_key=None)
        return submission.job.id, list(submission.ladder.dispatches)


def _tier_task(work: Any) -> int:
    """Run one dispatched tier task as a worker does; the statements its record sent."""
    with transaction() as session:
        run = prepare_tier_run(session, work.tier, work.kind, work.step, work.item_ids)
    assert run is not None
    verdicts = execute(run)
    with Statements() as counted, transaction() as session:
        record_tier_run(session, run, verdicts, work.item_ids)
    return counted.n


def _task_statements(steps: int) -> list[int]:
    job_id, dispatches = _submit(_policy(), steps)
    counts = [_tier_task(work) for work in dispatches]
    with transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        assert job.status == "completed"
    return counts


def test_tier_tasks_of_a_long_trajectory_send_as_few_statements_as_a_short_ones(
    database: str,
) -> None:
    short = _task_statements(128)  # two tasks of 64 steps (worker.task_items)
    long = _task_statements(1024)  # sixteen
    # A task of 64 steps sends a few statements, not some per step (it sent 200 before),
    # and the same whatever the trajectory's length; the last one also composes it.
    assert max(short + long) < 20, (short, long)
    assert max(long[:-1]) <= max(short[:-1]), (short, long)
    assert long[-1] <= short[-1], (short, long)


def _cancel(steps: int) -> tuple[int, float, dict[str, Any]]:
    job_id, _ = _submit(_policy(), steps)
    started = time.perf_counter()
    with Statements() as counted, transaction() as session:
        cancel_job(session, job_id, "by operator test")
    elapsed = time.perf_counter() - started
    with transaction() as session:
        parent = session.query(Item).filter_by(job_id=job_id, kind="trajectory").one()
        reward = dict(parent.reward or {})
    return counted.n, elapsed, reward


def test_cancelling_a_long_trajectory_is_a_bounded_number_of_statements(database: str) -> None:
    short, _, _ = _cancel(100)
    long, elapsed, reward = _cancel(1024)
    assert long <= short, (short, long)
    assert elapsed < 10, elapsed
    assert reward["status"] == "infra_error"
    assert len(reward["step_rewards"]) == 1024
    # The reason names the first steps and counts the rest, not 1024 copies of the cause.
    assert "cancelled" in reward["reason"]
    assert len(reward["reason"]) < 2000, len(reward["reason"])
