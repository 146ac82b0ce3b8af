"""All SQL about jobs and items."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from verifier_service.ladder.models import Item, Job


def get_job(session: Session, job_id: str) -> Job | None:
    return session.get(Job, job_id)


def find_by_idempotency_key(session: Session, principal: str, key: str) -> Job | None:
    query = select(Job).where(Job.principal == principal, Job.idempotency_key == key)
    return session.scalar(query)


def items_of(session: Session, job_id: str) -> list[Item]:
    query = select(Item).where(Item.job_id == job_id).order_by(Item.parent_id, Item.index)
    return list(session.scalars(query))
