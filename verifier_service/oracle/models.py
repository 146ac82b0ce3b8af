"""ORM models of the oracle domain: items sent to an oracle, the batches they travel in, and
every attempt to push a batch to its partner."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base, utcnow


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


class OracleItem(Base):
    """One ladder item handed to an oracle, from selection to its result."""

    __tablename__ = "oracle_items"
    __table_args__ = (
        Index("ix_oracle_items_queue", "oracle", "state", "created_at"),
        Index("ix_oracle_items_item", "item_id"),
        Index("ix_oracle_items_batch", "batch_id"),
        Index("ix_oracle_items_selected", "oracle", "selected_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    oracle: Mapped[str] = mapped_column(String(64))
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    job_id: Mapped[str] = mapped_column(String(32))
    step: Mapped[int]
    kind: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    reference: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    #: What selection ranks it by (higher first): the best lower-tier score or uncertainty.
    value: Mapped[float | None] = mapped_column(Float)
    # queued (waits for selection) | batched (in a batch sent or open) | answered | not_selected
    # (capacity left it out) | withdrawn (the job ended before it was sent) | failed
    state: Mapped[str] = mapped_column(String(16), default="queued")
    batch_id: Mapped[str | None] = mapped_column(String(32))
    #: Batches it has been in (a failed measurement may be tried once more).
    tries: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    selected_at: Mapped[datetime | None]
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    answered_at: Mapped[datetime | None]


class OracleBatch(Base):
    """Items sent to an oracle together: pushed to its URL, or claimed by its client."""

    __tablename__ = "oracle_batches"
    __table_args__ = (Index("ix_oracle_batches_claim", "oracle", "state", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    oracle: Mapped[str] = mapped_column(String(64))
    mode: Mapped[str] = mapped_column(String(8))
    # push: sending -> sent (the partner took it) | failed (never delivered)
    # pull: open -> leased (a client holds it; open again when its lease expires)
    # both: done (every item has its result)
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    due_at: Mapped[datetime]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None]
    busy_until: Mapped[datetime | None]
    sent_at: Mapped[datetime | None]
    lease_id: Mapped[str | None] = mapped_column(String(32))
    lease_expires_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    claims: Mapped[int] = mapped_column(Integer, default=0)
    finished_at: Mapped[datetime | None]
    #: Pushes are retried for retry_for_s from here (an operator's resend starts anew).
    retry_from: Mapped[datetime | None]


class OracleControl(Base):
    """An operator's hold on an oracle: while paused, no items are selected or claimed."""

    __tablename__ = "oracle_controls"

    oracle: Mapped[str] = mapped_column(String(64), primary_key=True)
    paused: Mapped[bool] = mapped_column(default=False)
    changed_by: Mapped[str] = mapped_column(String(128))
    changed_at: Mapped[datetime] = mapped_column(default=utcnow)


class OracleAttempt(Base):
    """One HTTP attempt to push a batch: what the partner answered, or why it could not."""

    __tablename__ = "oracle_attempts"
    __table_args__ = (Index("ix_oracle_attempts_batch", "batch_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("oracle_batches.id", ondelete="CASCADE"))
    number: Mapped[int]
    started_at: Mapped[datetime]
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float] = mapped_column(Float)
