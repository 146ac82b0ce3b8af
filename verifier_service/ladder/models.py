"""ORM models of verdicts, the verdict cache and the cost ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base, utcnow
from verifier_service.jobs.models import new_id


class VerdictRecord(Base):
    """A stored verdict of one tier on one item at one ladder step."""

    __tablename__ = "verdicts"
    __table_args__ = (UniqueConstraint("item_id", "step", name="uq_verdicts_item_step"),)

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
    hits: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CostLedgerEntry(Base):
    """What one tier call (or cache hit) cost, charged to a job, policy version and principal."""

    __tablename__ = "cost_ledger"
    __table_args__ = (
        UniqueConstraint("item_id", "step", name="uq_cost_item_step"),
        Index("ix_cost_job", "job_id"),
        Index("ix_cost_principal_time", "principal", "created_at"),
        Index("ix_cost_policy", "policy_name", "policy_version"),
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
