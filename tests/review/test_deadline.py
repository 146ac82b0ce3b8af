"""At a job's deadline, items still waiting for people take their step's `on_deadline`; their
tasks stay open (people's later answer, or an adjudication, revises the reward) unless the step
says `keep_open_after_deadline: false`."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from review_factories import ReviewDb
from test_leases import GOOD, tx

from verifier_service.core.db import transaction
from verifier_service.core.errors import ConflictError
from verifier_service.jobs.service import job_out
from verifier_service.ladder.dispatch import expire_overdue
from verifier_service.ladder.operations import expire_job
from verifier_service.review import operators, service
from verifier_service.review.schemas import AdjudicationIn, AnswerIn

SCHEMA = {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}}}
LOWER = [{"tier": "schema", "config": {"schema": SCHEMA}}]


def _calls() -> list[dict[str, Any]]:
    return [{"kind": "json", "payload": {"tool": uuid.uuid4().hex}}]


@pytest.mark.parametrize(
    ("on_deadline", "status", "value"),
    [("best_lower_tier", "scored", 1.0), ("infra_error", "infra_error", None)],
)
def test_an_item_still_waiting_at_the_deadline_takes_on_deadline_and_its_task_closes(
    review_db: ReviewDb, on_deadline: str, status: str, value: float | None
) -> None:
    policy = review_db.policy(
        "json", LOWER, on_deadline=on_deadline, keep_open_after_deadline=False
    )
    job_id = review_db.job(policy, 1, items=_calls(), deadline_s=1.5)
    with transaction() as session:
        waiting = job_out(session, job_id)
    assert waiting.status == "running"
    item = waiting.items[0]
    assert item.reward is not None
    assert item.reward.status == "pending"
    assert "waiting for people" in (item.reward.reason or "")
    assert [v.tier for v in item.verdicts] == ["schema"]  # the lower tier's verdict shows
    view = tx(service.next_task, "nia", policy)
    assert view is not None
    assert [v["tier"] for v in view.task.verdicts] == ["schema"]

    time.sleep(1.7)
    assert expire_overdue() == 1  # what the recovery sweep runs

    with transaction() as session:
        job = job_out(session, job_id)
    assert job.status == "completed"
    reward = job.items[0].reward
    assert reward is not None
    assert reward.status == status
    assert reward.value == value
    assert "human had not answered" in (reward.reason or "")
    with pytest.raises(ConflictError):  # the task closed with its lease
        tx(service.submit, view.lease_id, "nia", GOOD, uuid.uuid4().hex)
    assert tx(service.next_task, "omar", policy) is None


def _expired_job(review_db: ReviewDb, policy: str) -> str:
    job_id = review_db.job(policy, 1, items=_calls(), deadline_s=1.0)
    time.sleep(1.2)
    assert expire_overdue() == 1
    return job_id


def _reward(job_id: str) -> Any:
    with transaction() as session:
        job = job_out(session, job_id)
    assert job.status == "completed"
    return job.items[0]


def test_people_answering_after_the_deadline_revise_the_fallback_reward(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy("json", LOWER)
    job_id = _expired_job(review_db, policy)
    fallback = _reward(job_id).reward
    assert fallback.status == "scored"
    assert fallback.revision == 1
    assert fallback.fidelity == "schema"
    assert "human had not answered; its answer will revise this reward" in fallback.reason

    view = tx(service.next_task, "nia", policy)  # the task is still open
    assert view is not None
    tx(service.submit, view.lease_id, "nia", GOOD, uuid.uuid4().hex)

    item = _reward(job_id)
    revised = item.reward
    assert revised.revision == 2
    assert revised.status == "scored"
    assert revised.fidelity == "human"
    assert [v.tier for v in item.verdicts] == ["schema", "human"]
    assert revised.reason is None or "deadline" not in revised.reason
    assert tx(service.next_task, "omar", policy) is None  # done: nothing left to judge


def test_an_adjudication_after_the_deadline_revises_the_reward(review_db: ReviewDb) -> None:
    policy = review_db.policy("json", LOWER, overlap=2, min_agreement=0.9)
    job_id = _expired_job(review_db, policy)
    assert _reward(job_id).reward.revision == 1
    for reviewer, answer in (
        ("nia", AnswerIn(values={"quality": 5, "verdict": "good"})),
        ("omar", AnswerIn(values={"quality": 1, "verdict": "bad"})),
    ):
        view = tx(service.next_task, reviewer, policy)
        assert view is not None
        tx(service.submit, view.lease_id, reviewer, answer, uuid.uuid4().hex)
    assert _reward(job_id).reward.revision == 1  # disagreement: waits for an operator
    (task,) = tx(operators.adjudications, policy)
    decision = AdjudicationIn(values={"quality": 3, "verdict": "good"})
    tx(operators.adjudicate, task.task_id, decision, "olga")
    revised = _reward(job_id).reward
    assert revised.revision == 2
    assert revised.fidelity == "human"


def test_a_deadline_and_an_answer_at_once_never_deadlock(review_db: ReviewDb) -> None:
    # The deadline locks the job, then the tasks and leases; a submit locks the job first too
    # (not lease, task, then job), so the two wait for each other instead of deadlocking: each
    # item ends either with people's verdict, or with the fallback and its task closed.
    policy = review_db.policy("json", LOWER, keep_open_after_deadline=False)
    jobs = [review_db.job(policy, 1, items=_calls(), deadline_s=1.0) for _ in range(8)]
    leases = []
    for n in range(len(jobs)):
        view = tx(service.next_task, f"r{n}", policy)
        assert view is not None
        leases.append((f"r{n}", view.lease_id))
    time.sleep(1.2)
    errors: list[BaseException] = []
    start = threading.Barrier(2 * len(jobs))

    def expire(job_id: str) -> None:
        start.wait()
        try:
            with transaction() as session:
                expire_job(session, job_id)
        except BaseException as exc:
            errors.append(exc)

    def answer(reviewer: str, lease_id: str) -> None:
        start.wait()
        try:
            with transaction() as session:
                service.submit(session, lease_id, reviewer, GOOD, uuid.uuid4().hex)
        except ConflictError:
            pass  # the deadline came first and closed the task
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=expire, args=(j,)) for j in jobs]
    threads += [threading.Thread(target=answer, args=lease) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    for job_id in jobs:
        item = _reward(job_id)
        tiers = [v.tier for v in item.verdicts]
        if tiers == ["schema", "human"]:
            assert item.reward.fidelity == "human"
        else:
            assert tiers == ["schema"]
            assert "human had not answered" in item.reward.reason
        assert item.reward.revision == 1
