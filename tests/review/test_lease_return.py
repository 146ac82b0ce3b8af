"""A reviewer's own leases and drafts on a real database (PostgreSQL and SQLite): opening the
queue's page again gives back the task she still holds (a closed tab), with its draft; a draft
outlives its lease's expiry; one reviewer holds at most `review.max_live_leases` tasks of a
queue at once; gold items are served at the queue's gold_rate."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from review_factories import ReviewDb
from test_leases import GOOD, tx
from test_quality import _gold

from verifier_service.core.db import transaction, utcnow
from verifier_service.review import service
from verifier_service.review.models import ReviewLease
from verifier_service.review.service import LeaseLimitError
from verifier_service.settings import get_settings

DRAFT = {"values": {"quality": 2}, "comment": "half way"}


def _expire(lease_id: str) -> None:
    with transaction() as session:
        lease = session.get(ReviewLease, lease_id)
        assert lease is not None
        lease.expires_at = utcnow() - timedelta(seconds=1)


def test_opening_the_queue_again_gives_back_her_own_task_with_its_draft(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy()
    review_db.job(policy, 1)
    first = tx(service.next_task, "una", policy)
    assert first is not None
    tx(service.save_draft, first.lease_id, "una", DRAFT)
    # The tab is closed; she opens the queue's page again before the lease expires.
    again = tx(lambda s: service.next_task(s, "una", policy, resume=True))
    assert again is not None, "locked out of her own task until its lease expires"
    assert (again.task.task_id, again.lease_id, again.draft) == (
        first.task.task_id, first.lease_id, DRAFT
    )  # fmt: skip
    assert tx(service.next_task, "vic", policy) is None  # still hers, no one else's


def test_a_draft_outlives_the_lease_that_saved_it(review_db: ReviewDb) -> None:
    policy = review_db.policy()
    review_db.job(policy, 1)
    first = tx(service.next_task, "wren", policy)
    assert first is not None
    tx(service.save_draft, first.lease_id, "wren", DRAFT)
    _expire(first.lease_id)
    again = tx(service.next_task, "wren", policy)
    assert again is not None
    assert again.lease_id != first.lease_id
    assert again.task.task_id == first.task.task_id
    assert again.draft == DRAFT, "the draft was lost with the lease"


def test_one_reviewer_holds_at_most_the_limit_of_a_queue(
    review_db: ReviewDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFIER_REVIEW__MAX_LIVE_LEASES", "2")
    get_settings.cache_clear()
    policy = review_db.policy()
    review_db.job(policy, 5)
    held = [tx(service.next_task, "xia", policy) for _ in range(2)]
    assert all(v is not None for v in held)
    with pytest.raises(LeaseLimitError) as refused:
        tx(service.next_task, "xia", policy)
    assert refused.value.status_code == 409
    assert tx(service.next_task, "yan", policy) is not None  # others still take tasks
    first = held[0]
    assert first is not None
    tx(service.submit, first.lease_id, "xia", GOOD, uuid.uuid4().hex)
    assert tx(service.next_task, "xia", policy) is not None  # one answered: room for one


def test_gold_is_served_within_a_few_tasks_at_its_rate(review_db: ReviewDb) -> None:
    policy = review_db.policy(gold_rate=0.2)
    gold = _gold(policy, {"quality": 5.0, "verdict": "good"})
    review_db.job(policy, 30)
    for reviewer in ("zoe", "abe", "bea", "cal", "dan", "eve"):
        served = []
        for _ in range(5):
            view = tx(service.next_task, reviewer, policy)
            assert view is not None
            served.append(view.task.task_id)
            tx(service.submit, view.lease_id, reviewer, GOOD, uuid.uuid4().hex)
        assert gold in served, f"{reviewer} saw no gold in 5 tasks at gold_rate 0.2"
