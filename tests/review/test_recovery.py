"""Items waiting for people are not lost work: the recovery sweep leaves them alone."""

from __future__ import annotations

from datetime import timedelta

from review_factories import ReviewDb

from verifier_service.core.db import transaction, utcnow
from verifier_service.jobs.service import job_out
from verifier_service.ladder import repository
from verifier_service.ladder.operations import advance_job


def test_the_sweep_does_not_resend_or_end_items_waiting_for_people(review_db: ReviewDb) -> None:
    job_id = review_db.job(review_db.policy(), 2)
    later = utcnow() + timedelta(hours=1)  # as if everything were sent long ago
    with transaction() as session:
        lost = repository.lost_work(
            session,
            sent_before=later,
            unclaimed_before=later,
            dead_workers={"any"},
            claimed_before=later,
            limit=100,
        )
        assert lost == {}
        result = advance_job(session, job_id)  # what ladder.advance does for a job
        assert result.dispatches == []
        assert result.finished_jobs == set()
    with transaction() as session:
        job = job_out(session, job_id)
    assert job.status == "running"
    assert [i.state for i in job.items] == ["deferred", "deferred"]
    assert {i.reward.status for i in job.items if i.reward} == {"pending"}
