"""All SQL of the ladder: verdicts, the verdict cache, the cost ledger."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from tiers.base import Verdict
from verifier_service.jobs.models import Item, Job, new_id
from verifier_service.ladder.models import CostLedgerEntry, VerdictCacheEntry, VerdictRecord


def lock_job(session: Session, job_id: str) -> Job | None:
    """The job, locked against concurrent ladder passes (row lock on PostgreSQL)."""
    return session.scalar(select(Job).where(Job.id == job_id).with_for_update())


def items_by_id(session: Session, item_ids: Iterable[str]) -> list[Item]:
    return list(session.scalars(select(Item).where(Item.id.in_(list(item_ids)))))


def open_leaf_items(session: Session, job_id: str) -> list[Item]:
    """Items of a job that climb ladders themselves and are not done."""
    query = select(Item).where(
        Item.job_id == job_id, Item.state != "done", Item.kind != "trajectory"
    )
    return list(session.scalars(query))


def group_items(session: Session, job_id: str, group_key: str, kind: str) -> list[Item]:
    query = select(Item).where(
        Item.job_id == job_id,
        Item.group_key == group_key,
        Item.kind == kind,
        Item.parent_id.is_(None),
    )
    return list(session.scalars(query))


def children(session: Session, parent_id: str) -> list[Item]:
    query = select(Item).where(Item.parent_id == parent_id).order_by(Item.index)
    return list(session.scalars(query))


def verdicts_for(session: Session, item_ids: Sequence[str]) -> dict[str, list[VerdictRecord]]:
    """Stored verdicts per item, in ladder order."""
    out: dict[str, list[VerdictRecord]] = defaultdict(list)
    if not item_ids:
        return out
    query = (
        select(VerdictRecord)
        .where(VerdictRecord.item_id.in_(list(item_ids)))
        .order_by(VerdictRecord.item_id, VerdictRecord.step)
    )
    for record in session.scalars(query):
        out[record.item_id].append(record)
    return out


def existing_verdict_steps(session: Session, item_ids: Sequence[str], step: int) -> set[str]:
    query = select(VerdictRecord.item_id).where(
        VerdictRecord.item_id.in_(list(item_ids)), VerdictRecord.step == step
    )
    return set(session.scalars(query))


def add_verdict(
    session: Session, item_id: str, step: int, verdict: Verdict, cache_key: str | None
) -> VerdictRecord:
    record = VerdictRecord(
        id=new_id(),
        item_id=item_id,
        step=step,
        tier=verdict.tier,
        tier_version=verdict.tier_version,
        status=verdict.status.value,
        score=verdict.score,
        uncertainty=verdict.uncertainty,
        components=verdict.components,
        feedback=verdict.feedback,
        reason=verdict.reason,
        cpu_s=verdict.cost.cpu_s,
        wall_s=verdict.cost.wall_s,
        cached=verdict.cached,
        cache_key=cache_key,
    )
    session.add(record)
    return record


def to_verdict(record: VerdictRecord) -> Verdict:
    return Verdict.model_validate(
        {
            "status": record.status,
            "score": record.score,
            "uncertainty": record.uncertainty,
            "components": record.components,
            "feedback": record.feedback,
            "reason": record.reason,
            "cost": {"cpu_s": record.cpu_s, "wall_s": record.wall_s},
            "tier": record.tier,
            "tier_version": record.tier_version,
            "cached": record.cached,
        }
    )


def cached_verdicts(session: Session, keys: Iterable[str]) -> dict[str, Verdict]:
    keys = list(set(keys))
    if not keys:
        return {}
    rows = session.scalars(select(VerdictCacheEntry).where(VerdictCacheEntry.key.in_(keys)))
    return {row.key: Verdict.model_validate(row.verdict) for row in rows}


def count_cache_hits(session: Session, hits: dict[str, int]) -> None:
    for key, n in hits.items():
        session.execute(
            update(VerdictCacheEntry)
            .where(VerdictCacheEntry.key == key)
            .values(hits=VerdictCacheEntry.hits + n)
        )


def put_cache(session: Session, key: str, verdict: Verdict) -> None:
    if session.get(VerdictCacheEntry, key) is None:
        session.add(
            VerdictCacheEntry(
                key=key,
                tier=verdict.tier,
                tier_version=verdict.tier_version,
                verdict=verdict.model_dump(mode="json", exclude={"cached"}),
            )
        )


def charge(session: Session, **fields: Any) -> CostLedgerEntry:
    entry = CostLedgerEntry(**fields)
    session.add(entry)
    return entry


def ledger_entries(session: Session, item_ids: Sequence[str], step: int) -> list[CostLedgerEntry]:
    query = select(CostLedgerEntry).where(
        CostLedgerEntry.item_id.in_(list(item_ids)), CostLedgerEntry.step == step
    )
    return list(session.scalars(query))


def spent_by_job(session: Session, job_id: str, tier: str) -> float:
    query = select(func.coalesce(func.sum(CostLedgerEntry.cost_units), 0.0)).where(
        CostLedgerEntry.job_id == job_id, CostLedgerEntry.tier == tier
    )
    return float(session.scalar(query) or 0.0)


def spent_by_principal_since(session: Session, principal: str, tier: str, since: datetime) -> float:
    query = select(func.coalesce(func.sum(CostLedgerEntry.cost_units), 0.0)).where(
        CostLedgerEntry.principal == principal,
        CostLedgerEntry.tier == tier,
        CostLedgerEntry.created_at >= since,
    )
    return float(session.scalar(query) or 0.0)
