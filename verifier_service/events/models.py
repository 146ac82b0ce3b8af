"""ORM models of job events, the callbacks jobs name, and webhook deliveries with their attempts."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base, utcnow

#: An autoincrementing key that is BIGINT on PostgreSQL and SQLite's rowid (INTEGER) there.
EventId = BigInteger().with_variant(Integer(), "sqlite")


def new_delivery_id() -> str:
    return "msg_" + uuid.uuid4().hex


class JobEvent(Base):
    """Something a trainer learns of a job: an item's reward finished or revised, the job done.

    Ids grow in commit order (see repository.append), so a reader's last id is a cursor that
    never skips an event.
    """

    __tablename__ = "job_events"
    __table_args__ = (
        Index("ix_job_events_job", "job_id", "id"),
        Index("ix_job_events_principal", "principal", "id"),
    )

    id: Mapped[int] = mapped_column(EventId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    # The job's owner, copied here so the changes feed filters without a join.
    principal: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))  # item.finished | item.revised | job.finished
    item_index: Mapped[int | None]
    revision: Mapped[int | None]
    data: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class JobCallback(Base):
    """The webhook URL a job named when it was submitted."""

    __tablename__ = "job_callbacks"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebhookDelivery(Base):
    """One event sent to one job's callback; its id is the `webhook-id` of every attempt."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_job", "job_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=new_delivery_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    event_id: Mapped[int] = mapped_column(EventId, ForeignKey("job_events.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending|delivered|failed
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None]
    # While an attempt is in flight: a second copy of the task leaves it alone until then.
    busy_until: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]


class WebhookAttempt(Base):
    """One HTTP attempt of a delivery: what the receiver answered, or why it could not."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_delivery", "delivery_id", "number"),)

    id: Mapped[int] = mapped_column(EventId, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE")
    )
    number: Mapped[int]
    started_at: Mapped[datetime]
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float] = mapped_column(Float)
