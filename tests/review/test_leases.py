"""Leases on a real database, PostgreSQL and SQLite: reviewers in threads never collide, never
starve, and never give an item more answers than its overlap."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
from review_factories import ReviewDb
from sqlalchemy import func, select

from verifier_service.core.db import transaction, with_retries
from verifier_service.core.errors import ConflictError
from verifier_service.jobs.service import job_out
from verifier_service.review import service
from verifier_service.review.models import ReviewAnswer, ReviewLease
from verifier_service.review.schemas import AnswerIn, LeaseView

T = TypeVar("T")
GOOD = AnswerIn(values={"quality": 4, "verdict": "good"})


def tx(work: Callable[..., T], *args: object) -> T:
    """One service call in its own committed transaction (retried like the API retries)."""

    def attempt() -> T:
        with transaction() as session:
            return work(session, *args)

    return with_retries(attempt, retries=3, first_delay_s=0.05)


def queue_of(policy: str) -> str:
    return policy  # conftest names each policy's queue after it


def test_twenty_reviewers_take_every_unit_once_and_never_beyond_overlap(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy(overlap=2)
    review_db.job(policy, 15)
    reviewers = [f"r{i}-{uuid.uuid4().hex[:4]}" for i in range(20)]
    start = threading.Barrier(len(reviewers))

    def work(reviewer: str) -> list[str]:
        start.wait()
        taken = []
        while (view := tx(service.next_task, reviewer, queue_of(policy))) is not None:
            taken.append(view.task.task_id)
        return taken

    with ThreadPoolExecutor(len(reviewers)) as pool:
        held = dict(zip(reviewers, pool.map(work, reviewers), strict=True))

    per_task = Counter(task for tasks in held.values() for task in tasks)
    assert len(per_task) == 15
    assert set(per_task.values()) == {2}  # every unit taken, none beyond overlap
    for tasks in held.values():
        assert len(tasks) == len(set(tasks))  # never the same item twice to one reviewer
    with transaction() as session:
        live = session.scalar(select(func.count()).where(ReviewLease.state == "live"))
    assert live == 30


def test_a_reviewer_asking_while_another_takes_the_last_unit_but_one_is_given_the_last(
    review_db: ReviewDb,
) -> None:
    """The claim passes over tasks other requests hold locked; when nothing else is left it waits
    for that lock instead of telling the reviewer the queue is empty (CI once ended a 20-reviewer
    run with a unit nobody took)."""
    policy = review_db.policy(overlap=2)
    review_db.job(policy, 1)
    with ThreadPoolExecutor(1) as pool:
        with transaction() as session:
            first = service.next_task(session, "yan", queue_of(policy))
            assert first is not None
            asked = pool.submit(tx, service.next_task, "xia", queue_of(policy))
            time.sleep(0.5)
            assert not asked.done()  # waiting for yan's claim to commit, not answered "nothing"
        second = asked.result(timeout=10)
    assert second is not None
    assert second.task.task_id == first.task.task_id
    assert tx(service.next_task, "zoe", queue_of(policy)) is None  # both units taken now


def test_overlap_three_gives_exactly_three_answers_under_concurrent_submits(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy(overlap=3, claim_ttl_s=1.0)
    job_id = review_db.job(policy, 1)
    first = [tx(service.next_task, f"early{i}", queue_of(policy)) for i in range(3)]
    assert all(v is not None for v in first)
    assert tx(service.next_task, "late0", queue_of(policy)) is None  # 3 live leases: full
    time.sleep(1.3)  # the early leases expire unheartbeated: their units come back at once
    late = [tx(service.next_task, f"late{i}", queue_of(policy)) for i in range(3)]
    assert all(v is not None for v in late)
    leases = [(f"early{i}", v) for i, v in enumerate(first)] + [
        (f"late{i}", v) for i, v in enumerate(late)
    ]
    go = threading.Barrier(len(leases))

    def answer(pair: tuple[str, LeaseView | None]) -> str:
        reviewer, view = pair
        assert view is not None
        go.wait()
        try:
            tx(service.submit, view.lease_id, reviewer, GOOD, uuid.uuid4().hex)
        except ConflictError:
            return "refused"
        return "recorded"

    with ThreadPoolExecutor(len(leases)) as pool:
        outcomes = list(pool.map(answer, leases))

    assert outcomes.count("recorded") == 3
    with transaction() as session:
        answers = session.scalar(select(func.count()).select_from(ReviewAnswer))
        job = job_out(session, job_id)
    assert answers == 3
    assert job.status == "completed"
    reward = job.items[0].reward
    assert reward is not None
    assert reward.status == "scored"
    assert reward.fidelity == "human"
    assert reward.value == pytest.approx(0.75)  # quality 4 on 1..5


def test_a_lease_not_heartbeated_returns_its_item_and_a_heartbeated_one_does_not(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy(claim_ttl_s=1.0)
    review_db.job(policy, 1)
    kept = tx(service.next_task, "alice", queue_of(policy))
    assert kept is not None
    for _ in range(3):  # 1.8 s in all, longer than the TTL: heartbeats keep it
        time.sleep(0.6)
        tx(service.heartbeat, kept.lease_id, "alice")
        assert tx(service.next_task, "bob", queue_of(policy)) is None
    time.sleep(1.2)  # no heartbeat now: the lease expires and the item is bob's at once
    taken = tx(service.next_task, "bob", queue_of(policy))
    assert taken is not None
    assert taken.task.task_id == kept.task.task_id
    with pytest.raises(ConflictError):
        tx(service.heartbeat, kept.lease_id, "alice")


def test_a_retried_submit_records_one_answer(review_db: ReviewDb) -> None:
    policy = review_db.policy(overlap=2)
    review_db.job(policy, 1)
    view = tx(service.next_task, "carol", queue_of(policy))
    assert view is not None
    key = uuid.uuid4().hex
    go = threading.Barrier(4)

    def send(_: int) -> None:
        go.wait()
        tx(service.submit, view.lease_id, "carol", GOOD, key)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(send, range(4)))  # four retries at once: none fails
    tx(service.submit, view.lease_id, "carol", GOOD, key)  # and one more, later
    with transaction() as session:
        answers = session.scalars(select(ReviewAnswer)).all()
    assert [(a.reviewer, a.values) for a in answers] == [
        ("carol", {"quality": 4.0, "verdict": "good"})
    ]


def test_skip_hides_the_item_from_that_reviewer_and_release_does_not(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy()
    review_db.job(policy, 1)
    view = tx(service.next_task, "dan", queue_of(policy))
    assert view is not None
    tx(service.release, view.lease_id, "dan")
    again = tx(service.next_task, "dan", queue_of(policy))
    assert again is not None
    assert again.task.task_id == view.task.task_id
    tx(service.skip, again.lease_id, "dan")
    assert tx(service.next_task, "dan", queue_of(policy)) is None
    other = tx(service.next_task, "erin", queue_of(policy))
    assert other is not None
    assert other.task.task_id == view.task.task_id


def test_drafts_are_kept_on_the_server(review_db: ReviewDb) -> None:
    policy = review_db.policy()
    review_db.job(policy, 1)
    view = tx(service.next_task, "fay", queue_of(policy))
    assert view is not None
    assert view.draft is None
    tx(service.save_draft, view.lease_id, "fay", {"quality": 2})
    assert tx(service.lease, view.lease_id, "fay").draft == {"quality": 2}
    with pytest.raises(ConflictError):
        tx(service.lease, view.lease_id, "someone-else")


def test_one_reviewer_in_many_tabs_never_holds_an_item_twice(review_db: ReviewDb) -> None:
    policy = review_db.policy(overlap=3)
    review_db.job(policy, 5)
    start = threading.Barrier(10)

    def tab(_: int) -> list[str]:
        start.wait()
        taken = []
        while (view := tx(service.next_task, "zed", queue_of(policy))) is not None:
            taken.append(view.task.task_id)
        return taken

    with ThreadPoolExecutor(10) as pool:
        tasks = [t for part in pool.map(tab, range(10)) for t in part]
    assert len(tasks) == 5
    assert len(set(tasks)) == 5
