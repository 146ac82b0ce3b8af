"""All SQL about policies and their versions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.orm import Session

from verifier_service.core.db import built_once
from verifier_service.policies.models import PolicyRecord, PolicyVersionRecord


def get_policy(session: Session, name: str) -> PolicyRecord | None:
    return session.get(PolicyRecord, name)


def list_policies(session: Session) -> list[PolicyRecord]:
    return list(session.scalars(select(PolicyRecord).order_by(PolicyRecord.name)))


def active_version(session: Session, name: str) -> int | None:
    """A policy's active version; None if it has none or does not exist (no ORM object)."""
    return session.scalar(_active_version(), {"name": name})


@built_once
def _active_version() -> Select[int | None]:
    return select(PolicyRecord.active_version).where(PolicyRecord.name == bindparam("name"))


def get_version(session: Session, name: str, version: int) -> PolicyVersionRecord | None:
    return session.get(PolicyVersionRecord, (name, version))


def list_versions(session: Session, name: str) -> list[PolicyVersionRecord]:
    query = (
        select(PolicyVersionRecord)
        .where(PolicyVersionRecord.name == name)
        .order_by(PolicyVersionRecord.version)
    )
    return list(session.scalars(query))


def add_version(
    session: Session, name: str, document: dict[str, Any], source: str, created_by: str
) -> PolicyVersionRecord:
    """Store a new immutable version (creating the policy on first use); not yet active."""
    policy = session.get(PolicyRecord, name, with_for_update=True)
    if policy is None:
        policy = PolicyRecord(name=name, active_version=None)
        session.add(policy)
        session.flush()
    latest = session.scalar(
        select(func.max(PolicyVersionRecord.version)).where(PolicyVersionRecord.name == name)
    )
    record = PolicyVersionRecord(
        name=name,
        version=(latest or 0) + 1,
        document=document,
        source=source,
        created_by=created_by,
    )
    session.add(record)
    session.flush()
    return record


def set_active(session: Session, name: str, version: int) -> None:
    policy = session.get(PolicyRecord, name, with_for_update=True)
    assert policy is not None
    policy.active_version = version
