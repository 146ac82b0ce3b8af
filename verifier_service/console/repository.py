"""All SQL of the console: aggregates over a time window, read from the ladder's tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, case, cast, func, select
from sqlalchemy.orm import Session

from verifier_service.console.histogram import FLOOR_S, LN_BASE
from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord
from verifier_service.ladder.states import ItemState

#: Item states before `done`: what an item's reward status is not yet known in.
UNFINISHED = [s.value for s in ItemState if s != ItemState.done]


def _between(column: Any, since: datetime, until: datetime | None) -> ColumnElement[bool]:
    """`since <= column < until` (no upper bound without `until`)."""
    if until is None:
        return column >= since  # type: ignore[no-any-return]
    return (column >= since) & (column < until)  # type: ignore[no-any-return]


def items_by_job_and_kind(
    session: Session, since: datetime, until: datetime | None = None
) -> list[tuple[datetime, str, int]]:
    """(job created_at, item kind, how many top-level items) for the jobs made since `since`."""
    rows = session.execute(
        select(Job.created_at, Item.kind, func.count())
        .join(Item, Item.job_id == Job.id)
        .where(_between(Job.created_at, since, until), Item.parent_id.is_(None))
        .group_by(Job.id, Job.created_at, Item.kind)
    )
    return [(created, kind, int(n)) for created, kind, n in rows]


def rewards_by_status(
    session: Session, since: datetime, until: datetime | None = None, *, unfinished: bool = False
) -> dict[str, int]:
    """Top-level items of the window's jobs: finished ones by reward status, others by state
    (only the unfinished ones, by state, with `unfinished`)."""
    status = case(
        (Item.state == "done", Item.reward["status"].as_string()),
        else_=Item.state,
    )
    query = (
        select(status, func.count())
        .join(Job, Item.job_id == Job.id)
        .where(_between(Job.created_at, since, until), Item.parent_id.is_(None))
        .group_by(status)
    )
    if unfinished:
        query = query.where(Item.state.in_(UNFINISHED))
    rows = session.execute(query)
    return {str(s): int(n) for s, n in rows}


def verdict_stats(
    session: Session, since: datetime, until: datetime | None = None
) -> list[tuple[str, int, int]]:
    """(tier, verdicts, of them from the cache) since `since`."""
    cached = func.sum(case((VerdictRecord.cached.is_(True), 1), else_=0))
    rows = session.execute(
        select(VerdictRecord.tier, func.count(), cached)
        .where(_between(VerdictRecord.created_at, since, until))
        .group_by(VerdictRecord.tier)
    )
    return [(tier, int(n), int(c or 0)) for tier, n, c in rows]


def duration_percentiles(session: Session, since: datetime) -> dict[str, tuple[float, float]]:
    """Tier -> (p50, p95) of the wall time of verdicts not taken from the cache."""
    live = (VerdictRecord.created_at >= since, VerdictRecord.cached.is_(False))
    if session.get_bind().dialect.name == "postgresql":
        p50 = func.percentile_cont(0.5).within_group(VerdictRecord.wall_s)
        p95 = func.percentile_cont(0.95).within_group(VerdictRecord.wall_s)
        rows = session.execute(
            select(VerdictRecord.tier, p50, p95).where(*live).group_by(VerdictRecord.tier)
        )
        return {tier: (float(a or 0.0), float(b or 0.0)) for tier, a, b in rows}
    # SQLite (the embedded default, small): sort in Python, same linear interpolation.
    walls: dict[str, list[float]] = {}
    rows = session.execute(select(VerdictRecord.tier, VerdictRecord.wall_s).where(*live))
    for tier, wall in rows:
        walls.setdefault(tier, []).append(float(wall))
    return {tier: (_percentile(v, 0.5), _percentile(v, 0.95)) for tier, v in walls.items()}


def wall_bucket(session: Session) -> Any:
    """The histogram bucket of a verdict's wall time (`histogram.bucket_of` in SQL)."""
    larger = func.greatest if session.get_bind().dialect.name == "postgresql" else func.max
    wall = larger(VerdictRecord.wall_s, FLOOR_S)
    return cast(func.floor(func.ln(wall / FLOOR_S) / LN_BASE), Integer)


def live_wall_buckets(
    session: Session, since: datetime, until: datetime | None
) -> list[tuple[str, int, int]]:
    """(tier, wall-time bucket, verdicts) of the verdicts not from the cache stored in
    [since, until): what `live_walls` gives, counted per histogram bucket by the database."""
    bucket = wall_bucket(session)
    rows = session.execute(
        select(VerdictRecord.tier, bucket, func.count())
        .where(_between(VerdictRecord.created_at, since, until), VerdictRecord.cached.is_(False))
        .group_by(VerdictRecord.tier, bucket)
    )
    return [(tier, int(b), int(n)) for tier, b, n in rows]


def live_walls(
    session: Session, since: datetime, until: datetime | None
) -> list[tuple[str, float]]:
    """(tier, wall time) of each verdict not from the cache stored in [since, until)."""
    rows = session.execute(
        select(VerdictRecord.tier, VerdictRecord.wall_s).where(
            _between(VerdictRecord.created_at, since, until), VerdictRecord.cached.is_(False)
        )
    )
    return [(tier, float(wall)) for tier, wall in rows]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def items_reaching_tier(
    session: Session, since: datetime, until: datetime | None = None
) -> list[tuple[str, str, str, int]]:
    """(policy, item kind, tier, climbs to that tier) from the cost ledger: one entry per item
    and ladder step, so an item counts once per step that runs the tier (a sum the per-minute
    rollups can add up exactly, unlike a count of distinct items)."""
    rows = session.execute(
        select(CostLedgerEntry.policy_name, Item.kind, CostLedgerEntry.tier, func.count())
        .join(Item, Item.id == CostLedgerEntry.item_id)
        .where(_between(CostLedgerEntry.created_at, since, until))
        .group_by(CostLedgerEntry.policy_name, Item.kind, CostLedgerEntry.tier)
    )
    return [(policy, kind, tier, int(n)) for policy, kind, tier, n in rows]


def items_per_policy(
    session: Session, since: datetime, until: datetime | None = None
) -> dict[tuple[str, str], int]:
    """Top-level items of the window's jobs, per (policy, item kind)."""
    rows = session.execute(
        select(Job.policy_name, Item.kind, func.count())
        .join(Item, Item.job_id == Job.id)
        .where(_between(Job.created_at, since, until), Item.parent_id.is_(None))
        .group_by(Job.policy_name, Item.kind)
    )
    return {(policy, kind): int(n) for policy, kind, n in rows}


def cost_by(
    session: Session, since: datetime, column: str, until: datetime | None = None
) -> dict[str, float]:
    """Cost units since `since`, by `tier` or `principal`."""
    key = CostLedgerEntry.tier if column == "tier" else CostLedgerEntry.principal
    rows = session.execute(
        select(key, func.sum(CostLedgerEntry.cost_units))
        .where(_between(CostLedgerEntry.created_at, since, until))
        .group_by(key)
    )
    return {str(k): float(v or 0.0) for k, v in rows}


def oldest_waiting(session: Session) -> datetime | None:
    """When the longest-waiting item sent to a tier queue (not yet taken by a worker) was sent."""
    found: datetime | None = session.execute(
        select(func.min(Item.dispatched_at)).where(
            Item.state == "running", Item.claimed_at.is_(None)
        )
    ).scalar_one()
    return found


def search_jobs(
    session: Session,
    *,
    principal: str | None,
    policy: str | None,
    status: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
) -> list[tuple[Job, float, int]]:
    """Jobs matching every given filter, newest first: (job, cost units, infra_error items)."""
    cost = (
        select(func.coalesce(func.sum(CostLedgerEntry.cost_units), 0.0))
        .where(CostLedgerEntry.job_id == Job.id)
        .scalar_subquery()
    )
    errors = (
        select(func.count())
        .where(
            Item.job_id == Job.id,
            Item.parent_id.is_(None),
            Item.state == "done",
            Item.reward["status"].as_string() == "infra_error",
        )
        .scalar_subquery()
    )
    query = select(Job, cost, errors).order_by(Job.created_at.desc(), Job.id).limit(limit)
    if principal:
        query = query.where(Job.principal == principal)
    if policy:
        query = query.where(Job.policy_name == policy)
    if status:
        query = query.where(Job.status == status)
    if since is not None:
        query = query.where(Job.created_at >= since)
    if until is not None:
        query = query.where(Job.created_at < until)
    return [(job, float(c), int(e)) for job, c, e in session.execute(query)]


def job_costs(session: Session, job_id: str) -> dict[tuple[str, str], float]:
    """(item id, tier) -> cost units charged, for one job."""
    rows = session.execute(
        select(CostLedgerEntry.item_id, CostLedgerEntry.tier, func.sum(CostLedgerEntry.cost_units))
        .where(CostLedgerEntry.job_id == job_id)
        .group_by(CostLedgerEntry.item_id, CostLedgerEntry.tier)
    )
    return {(item, tier): float(c or 0.0) for item, tier, c in rows}


def item_ids_of(session: Session, job_id: str) -> dict[int, str]:
    """Top-level item index -> item id, for one job."""
    rows = session.execute(
        select(Item.index, Item.id).where(Item.job_id == job_id, Item.parent_id.is_(None))
    )
    return {int(index): item_id for index, item_id in rows}
