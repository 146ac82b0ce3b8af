"""ORM models of jobs and their items."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from verifier_service.core.db import Base, utcnow


def new_id() -> str:
    return uuid.uuid4().hex


class Job(Base):
    """One submission: its items, the policy version it runs under, and its progress."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("principal", "idempotency_key", name="uq_jobs_idem"),
        Index("ix_jobs_status_deadline", "status", "deadline_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    principal: Mapped[str] = mapped_column(String(128), default="anonymous")
    idempotency_key: Mapped[str | None] = mapped_column(String(256))
    request_hash: Mapped[str] = mapped_column(String(64))
    policy_name: Mapped[str] = mapped_column(String(128))
    policy_version: Mapped[int]
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | completed
    deadline_at: Mapped[datetime | None]
    n_items: Mapped[int]
    n_done: Mapped[int] = mapped_column(default=0)

    items: Mapped[list[Item]] = relationship(
        back_populates="job", order_by="Item.index", lazy="raise_on_sql"
    )


class Item(Base):
    """One thing to score. Trajectories are parents whose steps and outcome are child items."""

    __tablename__ = "items"
    __table_args__ = (
        Index("ix_items_job_state", "job_id", "state"),
        Index("ix_items_parent", "parent_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    index: Mapped[int]  # position in the request (top level) or in the trajectory (children)
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16), default="item")  # item | step | outcome
    kind: Mapped[str] = mapped_column(String(16))
    candidate: Mapped[dict[str, Any]]
    content_hash: Mapped[str] = mapped_column(String(64))
    group_key: Mapped[str | None] = mapped_column(String(256))
    # Ladder state: `step` is the index of the next ladder step to consider.
    state: Mapped[str] = mapped_column(String(16), default="climbing")  # climbing|running|done
    step: Mapped[int] = mapped_column(default=0)
    reward: Mapped[dict[str, Any] | None]
    finished_at: Mapped[datetime | None]

    job: Mapped[Job] = relationship(back_populates="items", lazy="raise_on_sql")
