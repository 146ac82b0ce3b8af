"""An operator cancels a job whose items wait for people, then retries them (real database,
PostgreSQL and SQLite): each item keeps one review task, taken up again, charged once; the
people's answers are the rewards' next revision (item.revised, revision 2) on the changes feed
and the job's view; the cancelled job is "cancelled" for operators and names who cancelled it.
A trajectory whose steps wait for people has a pending reward meanwhile."""

from __future__ import annotations

import uuid
from typing import Any

from review_factories import RUBRIC, ReviewDb
from sqlalchemy import func, select
from test_leases import GOOD, tx
from test_trajectory import LOWER, _trajectory

from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.console.operations import service as ops_service
from verifier_service.console.overview import service as console
from verifier_service.console.overview.schemas import JobQuery
from verifier_service.core.db import transaction
from verifier_service.events import service as events
from verifier_service.jobs.service import job_out
from verifier_service.ladder.models import CostLedgerEntry
from verifier_service.review import service
from verifier_service.review.models import ReviewTask


def _cancel(job_id: str, operator: str = "olga") -> None:
    with transaction() as session:
        console.cancel(session, job_id, operator)


def _retry(job_id: str) -> None:
    with transaction() as session:
        ops_service.retry(session, job_id, "olga")


def _tasks(job_id: str) -> list[tuple[str, str]]:
    """(item id, state) of the job's review tasks."""
    with transaction() as session:
        rows = session.execute(
            select(ReviewTask.item_id, ReviewTask.state).where(ReviewTask.job_id == job_id)
        )
        return sorted((str(i), s) for i, s in rows)


def _human_cost(job_id: str) -> float:
    with transaction() as session:
        total = session.scalar(
            select(func.sum(CostLedgerEntry.cost_units)).where(
                CostLedgerEntry.job_id == job_id, CostLedgerEntry.tier == "human"
            )
        )
        return float(total or 0.0)


def _answer_everything(policy: str, reviewer: str) -> int:
    answered = 0
    while (view := tx(service.next_task, reviewer, policy)) is not None:
        tx(service.submit, view.lease_id, reviewer, GOOD, uuid.uuid4().hex)
        answered += 1
    return answered


def _changes(job_id: str) -> list[tuple[str, int, int, str]]:
    """(type, index, revision, reward status) of the job's entries on the changes feed."""
    principal = AuthenticatedPrincipal(name="trainer", roles=frozenset({"trainer"}), via="key")
    with transaction() as session:
        page = events.changes(session, principal, "0", 1000)
    return [
        (c.type, c.index, c.revision, str(c.reward.get("status")))
        for c in page.changes
        if c.job_id == job_id
    ]


def test_a_retried_cancelled_job_keeps_one_task_per_item_charged_once(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy()
    job_id = review_db.job(policy, 4)
    assert [s for _, s in _tasks(job_id)] == ["open"] * 4
    assert _human_cost(job_id) == 400.0

    _cancel(job_id, "olga")
    assert [s for _, s in _tasks(job_id)] == ["closed"] * 4  # no one works on a cancelled job
    assert tx(service.next_task, "rita", policy) is None
    with transaction() as session:
        job = job_out(session, job_id)
        paths = console.job_paths(session, job_id)
    assert paths.job.status == "cancelled"
    for item in job.items:
        assert item.reward is not None
        assert (item.reward.status, item.reward.revision) == ("infra_error", 1)
        assert item.reward.reason is not None
        assert item.reward.reason.startswith("cancelled: by operator olga; human had not answered")

    _retry(job_id)
    tasks = _tasks(job_id)
    assert [s for _, s in tasks] == ["open"] * 4  # the same four tasks, open again
    assert len({i for i, _ in tasks}) == 4
    with transaction() as session:
        job = job_out(session, job_id)
    # Until people answer, the trainer keeps the earlier reward (revision 1), not a pending
    # reward without a revision.
    assert {(i.reward.status, i.reward.revision) for i in job.items if i.reward} == {
        ("infra_error", 1)
    }

    assert _answer_everything(policy, "rita") == 4  # each item once, not twice
    assert _answer_everything(policy, "sam") == 0
    assert [s for _, s in _tasks(job_id)] == ["done"] * 4  # nothing left open
    assert _human_cost(job_id) == 400.0  # people's cost charged once

    with transaction() as session:
        job = job_out(session, job_id)
        paths = console.job_paths(session, job_id)
    assert job.status == "completed"
    assert paths.job.status == "completed"
    assert {(i.reward.status, i.reward.revision) for i in job.items if i.reward} == {("scored", 2)}
    changes = _changes(job_id)
    assert sorted((t, r, s) for t, _, r, s in changes) == sorted(
        [("item.finished", 1, "infra_error")] * 4 + [("item.revised", 2, "scored")] * 4
    )
    assert sorted(i for _, i, _, _ in changes) == sorted([0, 1, 2, 3] * 2)


def test_the_console_filters_cancelled_jobs(review_db: ReviewDb) -> None:
    policy = review_db.policy()
    cancelled, running = review_db.job(policy, 1), review_db.job(policy, 1)
    _cancel(cancelled)
    with transaction() as session:
        found = console.search_jobs(session, JobQuery(policy=policy, status="cancelled"))
        others = console.search_jobs(session, JobQuery(policy=policy, status="running"))
    assert [j.id for j in found] == [cancelled]
    assert [j.id for j in others] == [running]


def _trajectory_reward(job_id: str) -> Any:
    with transaction() as session:
        job = job_out(session, job_id)
    (item,) = job.items
    return item


def test_a_trajectory_waiting_for_people_has_a_pending_reward(review_db: ReviewDb) -> None:
    policy = review_db.policy("json", LOWER, rubric={**RUBRIC, "per_step": True})
    job_id = review_db.job(policy, 1, items=[_trajectory()])
    item = _trajectory_reward(job_id)
    assert item.reward is not None, "a trajectory waiting for people has no reward at all"
    assert item.reward.status == "pending"
    assert item.reward.value is None
    assert "waiting for people" in (item.reward.reason or "")
    assert item.steps is not None
    assert {s.reward.status for s in item.steps if s.reward} == {"pending"}
    assert _answer_everything(policy, "tia") == 1
    done = _trajectory_reward(job_id)
    assert (done.reward.status, done.reward.revision) == ("scored", 1)
