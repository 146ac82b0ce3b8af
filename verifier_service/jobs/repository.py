"""All SQL about jobs and items."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from verifier_service.jobs.models import Item, Job


def get_job(session: Session, job_id: str) -> Job | None:
    return session.get(Job, job_id)


def find_by_idempotency_key(session: Session, principal: str, key: str) -> Job | None:
    query = select(Job).where(Job.principal == principal, Job.idempotency_key == key)
    return session.scalar(query)


def items_of(session: Session, job_id: str) -> list[Item]:
    query = select(Item).where(Item.job_id == job_id).order_by(Item.parent_id, Item.index)
    return list(session.scalars(query))


def overdue_job_ids(session: Session, now: datetime, limit: int) -> list[str]:
    """Running jobs whose deadline has passed (their expiry message was lost or is late)."""
    query = (
        select(Job.id)
        .where(Job.status == "running", Job.deadline_at.is_not(None), Job.deadline_at < now)
        .order_by(Job.deadline_at)
        .limit(limit)
    )
    return list(session.scalars(query))
