"""The `human` tier wired into the ladder: items sent to people become review tasks in the
ladder's transaction; at a job's deadline their tasks stay open (people's later answer revises
the fallback reward) or close, as the step's `keep_open_after_deadline` says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from tiers.human import HumanTier
from verifier_service.core.db import utcnow
from verifier_service.ladder.deferred import Closing, DeferredWork, register
from verifier_service.ladder.models import Item, VerdictRecord
from verifier_service.review import repository, service
from verifier_service.review.models import ReviewTask, new_id
from verifier_service.review.schemas import ReviewConfig


def _verdict_view(record: VerdictRecord) -> dict[str, Any]:
    return {
        "tier": record.tier,
        "status": record.status,
        "score": record.score,
        "components": record.components,
        "feedback": record.feedback,
    }


class ReviewTier:
    """The review queue as the `human` tier's deferred handler."""

    def send(self, session: Session, work: DeferredWork) -> str:
        config = ReviewConfig.model_validate(work.config)
        now = utcnow()
        repository.put_queue(session, config.queue, config.model_dump(mode="json"), now)
        rubric = config.rubric.model_dump(mode="json")
        for item in work.items:
            candidate = item.candidate
            session.add(
                ReviewTask(
                    id=new_id(),
                    queue=config.queue,
                    item_id=item.id,
                    job_id=work.job.id,
                    step=work.step,
                    kind=item.kind,
                    payload=candidate.get("payload") or {},
                    reference=candidate.get("reference"),
                    verdicts=[_verdict_view(r) for r in work.verdicts.get(item.id, [])],
                    guidelines=config.guidelines,
                    rubric=rubric,
                    overlap=config.overlap,
                    min_agreement=config.min_agreement,
                    created_at=now,
                )
            )
        people = "person" if config.overlap == 1 else f"{config.overlap} people"
        return f"waiting for people: {people} in review queue {config.queue!r}"

    def close(self, session: Session, items: Sequence[Item], config: dict[str, Any]) -> Closing:
        review = ReviewConfig.model_validate(config)
        if not review.keep_open_after_deadline:
            service.close_items(session, [i.id for i in items])
        return Closing(review.on_deadline, still_open=review.keep_open_after_deadline)


def install_review_tier() -> None:
    """Make the `human` tier's work go to the review queue in this process."""
    register(HumanTier.name, ReviewTier())
