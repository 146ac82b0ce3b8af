"""SQL of the console's operations pages: a job's items to retry, reviewers' throughput."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from verifier_service.ladder.models import Item
from verifier_service.review.models import ReviewAnswer, ReviewQueue


def infra_error_leaves(session: Session, job_id: str) -> list[Item]:
    """A job's finished items that climb ladders themselves (not trajectories, whose steps do)
    and whose reward is an infra_error."""
    query = select(Item).where(
        Item.job_id == job_id,
        Item.state == "done",
        Item.kind != "trajectory",
        Item.reward["status"].as_string() == "infra_error",
    )
    return list(session.scalars(query.order_by(Item.parent_id, Item.index)))


def answers_since(session: Session, since: datetime) -> dict[str, int]:
    """Answers to real items (not gold) per reviewer since `since`."""
    rows = session.execute(
        select(ReviewAnswer.reviewer, func.count())
        .where(ReviewAnswer.created_at >= since, ReviewAnswer.gold.is_(False))
        .group_by(ReviewAnswer.reviewer)
    )
    return {str(r): int(n) for r, n in rows}


def answer_times_since(session: Session, since: datetime) -> dict[str, list[datetime]]:
    """When each reviewer answered real items (not gold) since `since`, oldest first."""
    rows = session.execute(
        select(ReviewAnswer.reviewer, ReviewAnswer.created_at)
        .where(ReviewAnswer.created_at >= since, ReviewAnswer.gold.is_(False))
        .order_by(ReviewAnswer.reviewer, ReviewAnswer.created_at)
    )
    out: dict[str, list[datetime]] = {}
    for reviewer, at in rows:
        out.setdefault(str(reviewer), []).append(at)
    return out


def review_queue_names(session: Session) -> list[str]:
    """Every review queue's name."""
    return list(session.scalars(select(ReviewQueue.name).order_by(ReviewQueue.name)))
