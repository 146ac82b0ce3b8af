"""ORM models of the ladder's state: jobs and their items (the state machine's rows), verdicts,
the verdict cache and the cost ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from verifier_service.core.db import Base, utcnow
from verifier_service.core.ids import new_id

#: A job's statuses once every item has its reward: it finished, or an operator cancelled it.
JOB_FINISHED = ("completed", "cancelled")


class Job(Base):
    """One submission: its items, the policy version it runs under, and its progress."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("principal", "idempotency_key", name="uq_jobs_idem"),
        Index("ix_jobs_status_deadline", "status", "deadline_at"),
        Index("ix_jobs_created", "created_at"),  # the console's windows and job search
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    principal: Mapped[str] = mapped_column(String(128), default="anonymous")
    idempotency_key: Mapped[str | None] = mapped_column(String(256))
    request_hash: Mapped[str] = mapped_column(String(64))
    policy_name: Mapped[str] = mapped_column(String(128))
    policy_version: Mapped[int]
    status: Mapped[str] = mapped_column(String(16), default="running")  # running | JOB_FINISHED
    deadline_at: Mapped[datetime | None]
    n_items: Mapped[int]
    n_done: Mapped[int] = mapped_column(default=0)
    #: The X-Request-ID of the request that created the job (also in its tasks' logs).
    request_id: Mapped[str | None] = mapped_column(String(128))

    items: Mapped[list[Item]] = relationship(
        back_populates="job", order_by="Item.index", lazy="raise_on_sql"
    )


class Item(Base):
    """One thing to score. Trajectories are parents whose steps and outcome are child items."""

    __tablename__ = "items"
    __table_args__ = (
        Index("ix_items_job_state", "job_id", "state"),
        Index("ix_items_parent", "parent_id"),
        Index("ix_items_state_dispatched", "state", "dispatched_at"),
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
    state: Mapped[str] = mapped_column(String(16), default="climbing")  # an ItemState
    step: Mapped[int] = mapped_column(default=0)
    reward: Mapped[dict[str, Any] | None]
    finished_at: Mapped[datetime | None]
    # Tier work in flight (state running): when it was last sent, which worker took it and
    # when, and how many times it was sent. The recovery sweep reads these to find work that
    # no task will ever finish (a broker that lost its queues, a worker that died).
    dispatched_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None]
    dispatches: Mapped[int] = mapped_column(default=0, server_default="0")

    job: Mapped[Job] = relationship(back_populates="items", lazy="raise_on_sql")


class VerdictRecord(Base):
    """A stored verdict of one tier on one item at one ladder step."""

    __tablename__ = "verdicts"
    __table_args__ = (
        UniqueConstraint("item_id", "step", name="uq_verdicts_item_step"),
        # The console's per-tier counts and durations over a window, from the index alone.
        Index("ix_verdicts_created_tier", "created_at", "tier", "cached", "wall_s"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    step: Mapped[int]
    tier: Mapped[str] = mapped_column(String(64))
    tier_version: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    score: Mapped[float | None] = mapped_column(Float)
    uncertainty: Mapped[float | None] = mapped_column(Float)
    components: Mapped[dict[str, Any]]
    feedback: Mapped[str] = mapped_column(Text, default="")
    reason: Mapped[str | None] = mapped_column(String(256))
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    cached: Mapped[bool] = mapped_column(default=False)
    cache_key: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class VerdictCacheEntry(Base):
    """Content-addressed verdict: tier, tier version, config hash and canonical payload."""

    __tablename__ = "verdict_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    tier: Mapped[str] = mapped_column(String(64))
    tier_version: Mapped[str] = mapped_column(String(32))
    verdict: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CostLedgerEntry(Base):
    """What one tier call (or cache hit) cost, charged to a job, policy version and principal."""

    __tablename__ = "cost_ledger"
    __table_args__ = (
        UniqueConstraint("item_id", "step", name="uq_cost_item_step"),
        Index("ix_cost_job", "job_id"),
        Index("ix_cost_principal_time", "principal", "created_at"),
        Index("ix_cost_policy", "policy_name", "policy_version"),
        Index("ix_cost_created", "created_at"),  # the console's cost over a window
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    step: Mapped[int]
    tier: Mapped[str] = mapped_column(String(64))
    principal: Mapped[str] = mapped_column(String(128))
    policy_name: Mapped[str] = mapped_column(String(128))
    policy_version: Mapped[int]
    cost_units: Mapped[float] = mapped_column(Float)
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    cached: Mapped[bool] = mapped_column(default=False)
    audit: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
