"""All SQL about jobs and items."""

from __future__ import annotations

from sqlalchemy import Select, bindparam, select
from sqlalchemy.orm import Session

from verifier_service.core.db import built_once
from verifier_service.ladder.models import Item, Job
from verifier_service.ladder.repository import get_job

__all__ = ["find_by_idempotency_key", "get_job", "items_of"]


def find_by_idempotency_key(session: Session, principal: str, key: str) -> Job | None:
    return session.scalar(_by_key(), {"principal": principal, "key": key})


@built_once
def _by_key() -> Select[Job]:
    return select(Job).where(
        Job.principal == bindparam("principal"), Job.idempotency_key == bindparam("key")
    )


def items_of(session: Session, job_id: str) -> list[Item]:
    return list(session.scalars(_items_of(), {"job_id": job_id}))


@built_once
def _items_of() -> Select[Item]:
    query = select(Item).where(Item.job_id == bindparam("job_id"))
    return query.order_by(Item.parent_id, Item.index)
