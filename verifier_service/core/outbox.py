"""A transactional outbox: broker messages written in the transaction that calls for them.

Ladder work (a tier task, a job's deadline) is staged as a row beside the ladder state that
needs it, sent to the broker after the commit, then deleted. When the process dies or the
broker is down in between, the row stays and the sweeper sends it later: work is late, never
lost. Tasks are idempotent, so a message that goes out twice does no harm.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import JSON, Index, String, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from verifier_service.core.broker import BROKER_ERRORS, celery_app
from verifier_service.core.db import Base, utcnow

log = structlog.get_logger(__name__)


def _new_id() -> str:
    return uuid.uuid4().hex


class OutboxMessage(Base):
    """A Celery task to send once the transaction that staged it has committed."""

    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_created", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=_new_id)
    task: Mapped[str] = mapped_column(String(128))
    args: Mapped[list[Any]] = mapped_column(JSON)
    queue: Mapped[str] = mapped_column(String(64))
    eta: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


def due(session: Session, staged_before: datetime, limit: int) -> list[OutboxMessage]:
    """Messages staged before `staged_before` and still not sent, oldest first."""
    query = (
        select(OutboxMessage)
        .where(OutboxMessage.created_at < staged_before)
        .order_by(OutboxMessage.created_at)
        .limit(limit)
    )
    return list(session.scalars(query))


def staged_tier_items(session: Session, limit: int = 10_000) -> set[str]:
    """The items that tier tasks staged here and not yet sent carry."""
    query = select(OutboxMessage.args).where(OutboxMessage.task.like("tier.%")).limit(limit)
    return {str(item_id) for args in session.scalars(query) for item_id in args[2]}


def forget(session: Session, ids: Sequence[str]) -> None:
    """Drop messages that have been sent."""
    if ids:
        session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(list(ids))))


def stage(session: Session, messages: Sequence[OutboxMessage]) -> None:
    session.add_all(messages)


def send(messages: Sequence[OutboxMessage]) -> list[str]:
    """Send messages in order until the broker fails; the ids of those sent (a failure is
    logged: the rest stay in the outbox for the sweeper)."""
    sent: list[str] = []
    try:
        for message in messages:
            celery_app().send_task(
                message.task, args=message.args, queue=message.queue, eta=message.eta
            )
            sent.append(message.id)
    except BROKER_ERRORS as exc:
        log.warning(
            "broker unavailable; messages stay in the outbox for the sweeper",
            error=f"{type(exc).__name__}: {exc}",
            unsent=len(messages) - len(sent),
        )
    return sent
