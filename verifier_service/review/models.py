"""ORM models of the review queue: queues, tasks (one per item sent to people, and gold
tasks), leases, answers, adjudications and reviewers' state."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base, utcnow


def new_id() -> str:
    return uuid.uuid4().hex


class ReviewQueue(Base):
    """A named queue and the config its latest tasks came with (guidelines, quality bars)."""

    __tablename__ = "review_queues"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # a ReviewConfig
    show_accuracy: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReviewTask(Base):
    """An item waiting for people (or a gold item with its known answer)."""

    __tablename__ = "review_tasks"
    __table_args__ = (
        Index("ix_review_tasks_claim", "queue", "gold", "state", "created_at", "id"),
        Index("ix_review_tasks_item", "item_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    queue: Mapped[str] = mapped_column(String(64))
    item_id: Mapped[str | None] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    job_id: Mapped[str | None] = mapped_column(String(32))
    step: Mapped[int | None]
    kind: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    reference: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    verdicts: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    guidelines: Mapped[str] = mapped_column(Text, default="")
    rubric: Mapped[dict[str, Any]] = mapped_column(JSON)
    overlap: Mapped[int] = mapped_column(default=1)
    min_agreement: Mapped[float] = mapped_column(Float, default=0.667)
    gold: Mapped[bool] = mapped_column(default=False)
    gold_answer: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    gold_tolerance: Mapped[float] = mapped_column(Float, default=0.0)
    # open | full (answers plus live leases reach overlap) | adjudication | done | closed (the
    # job ended before people answered)
    state: Mapped[str] = mapped_column(String(16), default="open")
    # answers plus live leases: what `overlap` bounds (kept on the row so that a claim is one
    # conditional update of it, rechecked by PostgreSQL under the row lock)
    taken: Mapped[int] = mapped_column(default=0)
    answered: Mapped[int] = mapped_column(default=0)
    agreement: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    closed_at: Mapped[datetime | None]


class ReviewLease(Base):
    """A reviewer's hold on a task: live until it expires, is released, skipped or answered."""

    __tablename__ = "review_leases"
    __table_args__ = (
        Index("ix_review_leases_task_reviewer", "task_id", "reviewer"),
        Index("ix_review_leases_state_expires", "state", "expires_at"),
        Index("ix_review_leases_reviewer_state", "reviewer", "state"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    task_id: Mapped[str] = mapped_column(ForeignKey("review_tasks.id", ondelete="CASCADE"))
    reviewer: Mapped[str] = mapped_column(String(128))
    # live | released | skipped | answered | expired | closed
    state: Mapped[str] = mapped_column(String(16), default="live")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    draft: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class ReviewAnswer(Base):
    """One reviewer's answer to one task (at most one per task and reviewer)."""

    __tablename__ = "review_answers"
    __table_args__ = (
        UniqueConstraint("task_id", "reviewer", name="uq_review_answers_task_reviewer"),
        UniqueConstraint("submit_key", name="uq_review_answers_submit_key"),
        Index("ix_review_answers_reviewer_created", "reviewer", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    task_id: Mapped[str] = mapped_column(ForeignKey("review_tasks.id", ondelete="CASCADE"))
    lease_id: Mapped[str] = mapped_column(String(32))
    reviewer: Mapped[str] = mapped_column(String(128))
    submit_key: Mapped[str] = mapped_column(String(200))
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    comment: Mapped[str | None] = mapped_column(Text)
    steps: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    gold: Mapped[bool] = mapped_column(default=False)
    correct: Mapped[bool | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReviewAdjudication(Base):
    """An operator's final answer for a task whose reviewers disagreed."""

    __tablename__ = "review_adjudications"
    __table_args__ = (UniqueConstraint("task_id", name="uq_review_adjudications_task"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    task_id: Mapped[str] = mapped_column(ForeignKey("review_tasks.id", ondelete="CASCADE"))
    operator: Mapped[str] = mapped_column(String(128))
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    comment: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReviewerState(Base):
    """A reviewer's standing: paused (by gold accuracy or an operator) or not."""

    __tablename__ = "reviewer_states"

    reviewer: Mapped[str] = mapped_column(String(128), primary_key=True)
    paused: Mapped[bool] = mapped_column(default=False)
    paused_reason: Mapped[str | None] = mapped_column(String(256))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
