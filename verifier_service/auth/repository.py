"""All SQL about principals, keys, users, web sessions and audit events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session

from verifier_service.auth.models import ApiKey, AuditEvent, Principal, User, WebSession


def principal_by_name(session: Session, name: str) -> Principal | None:
    return session.scalar(select(Principal).where(Principal.name == name))


def key_by_prefix(session: Session, prefix: str) -> tuple[ApiKey, Principal] | None:
    query = (
        select(ApiKey, Principal)
        .join(Principal, Principal.id == ApiKey.principal_id)
        .where(ApiKey.prefix == prefix)
    )
    row = session.execute(query).one_or_none()
    return None if row is None else (row[0], row[1])


def key_by_id_or_prefix(session: Session, ref: str) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(or_(ApiKey.id == ref, ApiKey.prefix == ref)))


def list_keys(session: Session) -> list[tuple[ApiKey, Principal]]:
    query = (
        select(ApiKey, Principal)
        .join(Principal, Principal.id == ApiKey.principal_id)
        .order_by(ApiKey.created_at)
    )
    return [(k, p) for k, p in session.execute(query).tuples()]


def user_by_name(session: Session, name: str) -> tuple[User, Principal] | None:
    query = (
        select(User, Principal)
        .join(Principal, Principal.id == User.principal_id)
        .where(Principal.name == name)
    )
    row = session.execute(query).one_or_none()
    return None if row is None else (row[0], row[1])


def any_usable_credential(session: Session, now: datetime) -> bool:
    """Whether anyone can get in: a live key or a user."""
    live_key = exists().where(
        ApiKey.revoked_at.is_(None), or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now)
    )
    return bool(session.scalar(select(live_key))) or bool(
        session.scalar(select(exists().where(User.principal_id.is_not(None))))
    )


def session_principal(session: Session, session_id: str, now: datetime) -> Principal | None:
    query = (
        select(Principal)
        .join(WebSession, WebSession.principal_id == Principal.id)
        .where(WebSession.id == session_id, WebSession.expires_at > now)
    )
    return session.scalar(query)


def delete_web_session(session: Session, session_id: str) -> None:
    session.execute(delete(WebSession).where(WebSession.id == session_id))


def delete_web_sessions_of(session: Session, principal_id: str, keep: str | None = None) -> int:
    """End a person's sessions (all, or all but `keep`); how many ended."""
    query = delete(WebSession).where(WebSession.principal_id == principal_id)
    if keep is not None:
        query = query.where(WebSession.id != keep)
    return int(session.execute(query).rowcount or 0)  # type: ignore[attr-defined]


def delete_expired_web_sessions(session: Session, now: datetime) -> None:
    session.execute(delete(WebSession).where(WebSession.expires_at <= now))


def add_audit(
    session: Session, actor: str, action: str, target: str, detail: dict[str, Any]
) -> None:
    session.add(AuditEvent(actor=actor, action=action, target=target, detail=detail))


def list_audit(
    session: Session, *, limit: int, before_id: int | None, action: str | None
) -> list[AuditEvent]:
    query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(AuditEvent.id < before_id)
    if action is not None:
        query = query.where(AuditEvent.action == action)
    return list(session.scalars(query))
