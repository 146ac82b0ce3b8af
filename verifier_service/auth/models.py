"""ORM models of principals, their API keys, people's passwords and sessions, and the audit log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base, utcnow


def new_id() -> str:
    return uuid.uuid4().hex


class Principal(Base):
    """Someone who acts on the service: a program (through keys) or a person (through sign-in)."""

    __tablename__ = "principals"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    roles: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(Base):
    """A program's credential: shown once, stored as a SHA-256 hash, found by its prefix."""

    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_principal", "principal_id"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    requests_per_min: Mapped[int | None] = mapped_column(Integer)
    items_per_min: Mapped[int | None] = mapped_column(Integer)


class User(Base):
    """A person's password (argon2id hash) for the sign-in page; the username is the principal's."""

    __tablename__ = "users"

    principal_id: Mapped[str] = mapped_column(
        ForeignKey("principals.id", ondelete="CASCADE"), primary_key=True
    )
    password_hash: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WebSession(Base):
    """A signed-in browser: the cookie holds a random token, this row its SHA-256 hash."""

    __tablename__ = "web_sessions"
    __table_args__ = (Index("ix_web_sessions_principal", "principal_id"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]


class AuditEvent(Base):
    """Who did what to policies, keys, users (and, later, reviews)."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_at", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(256))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
