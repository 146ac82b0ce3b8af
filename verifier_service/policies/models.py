"""ORM models of policies and their immutable versions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base, utcnow


class PolicyRecord(Base):
    """A named policy and which of its versions is active."""

    __tablename__ = "policies"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    active_version: Mapped[int | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class PolicyVersionRecord(Base):
    """One immutable version of a policy document."""

    __tablename__ = "policy_versions"

    name: Mapped[str] = mapped_column(
        ForeignKey("policies.name", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(primary_key=True)
    document: Mapped[dict[str, Any]]
    source: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(128), default="anonymous")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
