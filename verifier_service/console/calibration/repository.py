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


#: The model judges compared with people: a rubric score, a process (step) score, a place in a
#: GRPO group; each verdict's score is 0..1 as people's is.
JUDGE_TIERS = ("judge.llm", "judge.prm", "judge.rank")


def judged_by_people(
    session: Session, *, since: datetime
) -> list[tuple[str, int, str, str, int, int, float, float, datetime, str]]:
    """Items that a model judge (a tier of JUDGE_TIERS) scored and people (`human`, a later
    step) then scored, people's verdict stored since `since`: (policy, version, kind, judge
    tier, judge step, human step, judge score, people's score, when people's verdict was
    stored, the judge verdict's feedback: its last line names the model that judged). Verdicts
    without a score (errors, pending) are left out."""
    judge = aliased(VerdictRecord)
    people = aliased(VerdictRecord)
    rows = session.execute(
        select(
            Job.policy_name,
            Job.policy_version,
            Item.kind,
            judge.tier,
            judge.step,
            people.step,
            judge.score,
            people.score,
            people.created_at,
            judge.feedback,
        )
        .join(Job, Job.id == Item.job_id)
        .join(judge, and_(judge.item_id == Item.id, judge.tier.in_(JUDGE_TIERS)))
        .join(
            people,
            and_(people.item_id == Item.id, people.tier == "human", people.step > judge.step),
        )
        .where(
            people.created_at >= since,
            judge.score.is_not(None),
            people.score.is_not(None),
        )
        .order_by(people.created_at)
    )
    return [
        (name, int(version), kind, tier, int(js), int(hs), float(j), float(h), at, fb or "")
        for name, version, kind, tier, js, hs, j, h, at, fb in rows
        if j is not None and h is not None
    ]
