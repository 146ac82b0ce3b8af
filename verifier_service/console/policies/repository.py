"""All SQL of the console's policy pages: the audit trail of a policy's activations."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from verifier_service.auth.models import AuditEvent

#: The audit actions that change which version of a policy is active.
ACTIVATING = ("policy.create", "policy.activate", "policy.rollback")


def activation_events(session: Session, name: str, limit: int = 500) -> list[AuditEvent]:
    """The latest events about `name`'s versions that may have changed its active one, oldest
    first (`policy.create` events say in their detail whether they activated)."""
    prefix = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "@%"
    query = (
        select(AuditEvent)
        .where(AuditEvent.action.in_(ACTIVATING), AuditEvent.target.like(prefix, escape="\\"))
        .order_by(AuditEvent.id.desc())
        .limit(limit)
    )
    return list(reversed(list(session.scalars(query))))
