"""All SQL of the console: aggregates over a time window, read from the ladder's tables."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, case, cast, func, or_, select
from sqlalchemy.orm import Session

from verifier_service.console.overview.histogram import FLOOR_S, LN_BASE
from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord
from verifier_service.ladder.states import ItemState
from verifier_service.review.models import ReviewTask

#: Item states before `done`: what an item's reward status is not yet known in.
UNFINISHED = [s.value for s in ItemState if s != ItemState.done]


#: A time range [since, until) (no upper bound without `until`).
Range = tuple[datetime, datetime | None]


def _between(column: Any, since: datetime, until: datetime | None) -> ColumnElement[bool]:
    """`since <= column < until` (no upper bound without `until`)."""
    if until is None:
        return column >= since  # type: ignore[no-any-return]
    return (column >= since) & (column < until)  # type: ignore[no-any-return]


def _within(column: Any, ranges: Sequence[Range]) -> ColumnElement[bool]:
    """`column` in any of `ranges` (one statement for a window's edges)."""
    return or_(*(_between(column, since, until) for since, until in ranges))


def _top_level() -> ColumnElement[bool]:
    """A top-level item, written so that no planner starts from the parent index: nearly every
    item is top-level, and SQLite would walk them all instead of a window's jobs."""
    return func.coalesce(Item.parent_id, "") == ""


def _reward_or_state() -> Any:
    """A top-level item's reward status once finished, its ladder state before."""
    return case((Item.state == "done", Item.reward["status"].as_string()), else_=Item.state)


def items_by_job(
    session: Session, ranges: Sequence[Range]
) -> list[tuple[datetime, str, str, str, int]]:
    """(job created_at, policy, item kind, reward status or state, how many top-level items)
    per creation time, for the jobs created in `ranges`."""
    status = _reward_or_state()
    rows = session.execute(
        select(Job.created_at, Job.policy_name, Item.kind, status, func.count())
        .join(Item, Item.job_id == Job.id)
        .where(_within(Job.created_at, ranges), _top_level())
        # Not by job id: SQLite would walk the whole primary key in its order to group by it.
        .group_by(Job.created_at, Job.policy_name, Item.kind, status)
    )
    return [(at, policy, kind, str(s), int(n)) for at, policy, kind, s, n in rows]


def unfinished_by_state(session: Session, since: datetime, until: datetime) -> dict[str, int]:
    """Top-level items of the jobs created in [since, until) not finished yet, by state."""
    rows = session.execute(
        select(Item.state, func.count())
        .join(Job, Item.job_id == Job.id)
        .where(
            _between(Job.created_at, since, until),
            _top_level(),
            Item.state.in_(UNFINISHED),
        )
        .group_by(Item.state)
    )
    return {str(s): int(n) for s, n in rows}


def verdict_stats(session: Session, ranges: Sequence[Range]) -> list[tuple[str, int, int]]:
    """(tier, verdicts, of them from the cache) stored in `ranges`."""
    cached = func.sum(case((VerdictRecord.cached.is_(True), 1), else_=0))
    rows = session.execute(
        select(VerdictRecord.tier, func.count(), cached)
        .where(_within(VerdictRecord.created_at, ranges))
        .group_by(VerdictRecord.tier)
    )
    return [(tier, int(n), int(c or 0)) for tier, n, c in rows]


def duration_percentiles(
    session: Session, ranges: Sequence[Range]
) -> dict[str, tuple[float, float]]:
    """Tier -> (p50, p95) of the wall time of verdicts not taken from the cache, stored in
    `ranges` (exact: PostgreSQL's percentile_cont)."""
    live = (_within(VerdictRecord.created_at, ranges), VerdictRecord.cached.is_(False))
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
    return {tier: (percentile(v, 0.5), percentile(v, 0.95)) for tier, v in walls.items()}


def wall_bucket(session: Session) -> Any:
    """The histogram bucket of a verdict's wall time (`histogram.bucket_of` in SQL)."""
    larger = func.greatest if session.get_bind().dialect.name == "postgresql" else func.max
    wall = larger(VerdictRecord.wall_s, FLOOR_S)
    return cast(func.floor(func.ln(wall / FLOOR_S) / LN_BASE), Integer)


def live_wall_buckets(session: Session, ranges: Sequence[Range]) -> list[tuple[str, int, int]]:
    """(tier, wall-time bucket, verdicts) of the verdicts not from the cache stored in `ranges`:
    what `live_walls` gives, counted per histogram bucket by the database."""
    bucket = wall_bucket(session)
    rows = session.execute(
        select(VerdictRecord.tier, bucket, func.count())
        .where(_within(VerdictRecord.created_at, ranges), VerdictRecord.cached.is_(False))
        .group_by(VerdictRecord.tier, bucket)
    )
    return [(tier, int(b), int(n)) for tier, b, n in rows]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def costs(session: Session, ranges: Sequence[Range]) -> list[tuple[str, str, str, str, int, float]]:
    """(policy, item kind, tier, principal, ledger entries, cost units) of the cost ledger's
    entries stored in `ranges`: one entry per item and ladder step, so an item counts once per
    step that runs the tier (a sum the rollups can add up exactly, unlike distinct items)."""
    keys = (CostLedgerEntry.policy_name, Item.kind, CostLedgerEntry.tier, CostLedgerEntry.principal)
    rows = session.execute(
        select(*keys, func.count(), func.sum(CostLedgerEntry.cost_units))
        .join(Item, Item.id == CostLedgerEntry.item_id)
        .where(_within(CostLedgerEntry.created_at, ranges))
        .group_by(*keys)
    )
    return [(po, k, t, pr, int(n), float(u or 0.0)) for po, k, t, pr, n, u in rows]


#: Review task states in which people have not finished with it (nor has a deadline).
REVIEW_DONE = ("done", "closed")


def oldest_waiting(session: Session) -> tuple[datetime | None, datetime | None]:
    """When the longest-waiting item sent to a tier queue (not yet taken by a worker) was sent,
    and when the oldest review task still waiting for people (not gold) was opened."""
    on_queue: datetime | None = session.execute(
        select(func.min(Item.dispatched_at)).where(
            Item.state == "running", Item.claimed_at.is_(None)
        )
    ).scalar_one()
    for_people: datetime | None = session.execute(
        select(func.min(ReviewTask.created_at)).where(
            ReviewTask.state.not_in(REVIEW_DONE),
            ReviewTask.gold.is_(False),
            ReviewTask.item_id.is_not(None),
        )
    ).scalar_one()
    return on_queue, for_people


def review_times(session: Session, since: datetime) -> list[float]:
    """Seconds from opening to answer of the review tasks people finished since `since` (not
    gold: those are answered by whoever passes, not waited for)."""
    rows = session.execute(
        select(ReviewTask.created_at, ReviewTask.closed_at).where(
            ReviewTask.state == "done",
            ReviewTask.closed_at >= since,
            ReviewTask.gold.is_(False),
            ReviewTask.item_id.is_not(None),
        )
    )
    return [(closed - opened).total_seconds() for opened, closed in rows if closed is not None]


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


def parts_of(session: Session, job_id: str) -> dict[str, list[tuple[str, str, int]]]:
    """Trajectory item id -> its parts (id, role, index), in index order, for one job."""
    rows = session.execute(
        select(Item.parent_id, Item.id, Item.role, Item.index)
        .where(Item.job_id == job_id, Item.parent_id.is_not(None))
        .order_by(Item.parent_id, Item.index)
    )
    out: dict[str, list[tuple[str, str, int]]] = {}
    for parent_id, item_id, role, index in rows:
        out.setdefault(str(parent_id), []).append((item_id, role, int(index)))
    return out


def item_ids_of(session: Session, job_id: str) -> dict[int, str]:
    """Top-level item index -> item id, for one job."""
    rows = session.execute(
        select(Item.index, Item.id).where(Item.job_id == job_id, Item.parent_id.is_(None))
    )
    return {int(index): item_id for index, item_id in rows}
