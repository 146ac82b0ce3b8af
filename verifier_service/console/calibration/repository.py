"""The calibration page's SQL: the policies that ran in a window and the verdict pairs of the
items that climbed a gate."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session, aliased

from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord


def policies_since(session: Session, since: datetime) -> list[tuple[str, int]]:
    """(policy, version) of the jobs created since `since`."""
    rows = session.execute(
        select(Job.policy_name, Job.policy_version)
        .where(Job.created_at >= since)
        .distinct()
        .order_by(Job.policy_name, Job.policy_version)
    )
    return [(name, int(version)) for name, version in rows]


def climbed_pairs(
    session: Session, *, policy: str, version: int, kind: str, step: int, since: datetime
) -> list[tuple[str, float | None, dict[str, Any], float | None, bool, datetime]]:
    """Items of the policy version's jobs since `since` that have verdicts at `step - 1` and at
    `step`: (content hash, lower score, lower components, upper score, climbed only as an
    audit, when the upper verdict was stored)."""
    lower = aliased(VerdictRecord)
    upper = aliased(VerdictRecord)
    rows = session.execute(
        select(
            Item.content_hash,
            lower.score,
            lower.components,
            upper.score,
            CostLedgerEntry.audit,
            upper.created_at,
        )
        .join(Job, Job.id == Item.job_id)
        .join(lower, and_(lower.item_id == Item.id, lower.step == step - 1))
        .join(upper, and_(upper.item_id == Item.id, upper.step == step))
        .join(
            CostLedgerEntry,
            and_(CostLedgerEntry.item_id == Item.id, CostLedgerEntry.step == step),
        )
        .where(
            Job.policy_name == policy,
            Job.policy_version == version,
            Job.created_at >= since,
            Item.kind == kind,
        )
        .order_by(upper.created_at)
    )
    return [(h, lo, comp or {}, up, bool(audit), at) for h, lo, comp, up, audit, at in rows]
