"""All SQL of the ladder: verdicts, the verdict cache, the cost ledger."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Float,
    Select,
    String,
    Table,
    Update,
    and_,
    bindparam,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from tiers.base import Verdict
from verifier_service.core.db import built_once, utcnow
from verifier_service.core.ids import new_id
from verifier_service.core.rows import insert_rows, plain_row
from verifier_service.ladder.models import (
    CostLedgerEntry,
    Item,
    Job,
    VerdictCacheEntry,
    VerdictRecord,
)

#: The IN lists of the statements built once (cache keys; item ids).
_KEYS: BindParameter[list[str]] = bindparam("keys", expanding=True)
_IDS: BindParameter[list[str]] = bindparam("ids", expanding=True)


def get_job(session: Session, job_id: str) -> Job | None:
    return session.scalar(_job(), {"id": job_id})


@built_once
def _job() -> Select[Job]:
    return select(Job).where(Job.id == bindparam("id"))


def lock_job(session: Session, job_id: str) -> Job | None:
    """The job, locked against concurrent ladder passes (row lock on PostgreSQL)."""
    return session.scalar(_lock_job(), {"id": job_id})


@built_once
def _lock_job() -> Select[Job]:
    return select(Job).where(Job.id == bindparam("id")).with_for_update()


def items_by_id(session: Session, item_ids: Iterable[str]) -> list[Item]:
    return list(session.scalars(_items_by_id(), {"ids": list(item_ids)}))


@built_once
def _items_by_id() -> Select[Item]:
    return select(Item).where(Item.id.in_(_IDS))


def job_of_items(session: Session, item_ids: Sequence[str]) -> str | None:
    """The job of some items (of one job), or None if none of them exists."""
    query = select(Item.job_id).where(Item.id.in_(list(item_ids))).limit(1)
    return session.scalar(query)


def running_claimants(session: Session) -> set[str]:
    """The workers that hold claims on running items."""
    query = (
        select(Item.claimed_by)
        .where(Item.state == "running", Item.claimed_by.is_not(None))
        .distinct()
    )
    return {name for name in session.scalars(query) if name is not None}


def lost_work(
    session: Session,
    *,
    sent_before: datetime | None,
    unclaimed_before: datetime,
    dead_workers: Collection[str],
    claimed_before: datetime,
    limit: int,
) -> dict[str, list[str]]:
    """Running items (by job) whose tier work no task will finish: sent before the broker lost
    its data, sent long ago and never taken, or taken by a worker that died or by a task that
    can no longer be running."""
    unclaimed = Item.claimed_by.is_(None)
    lost = [
        and_(unclaimed, or_(Item.dispatched_at.is_(None), Item.dispatched_at < unclaimed_before)),
        and_(Item.claimed_by.is_not(None), Item.claimed_at < claimed_before),
    ]
    if sent_before is not None:
        lost.append(and_(unclaimed, Item.dispatched_at < sent_before))
    if dead_workers:
        lost.append(Item.claimed_by.in_(list(dead_workers)))
    query = (
        select(Item.job_id, Item.id)
        .where(Item.state == "running", or_(*lost))
        .order_by(Item.job_id)
        .limit(limit)
    )
    found: dict[str, list[str]] = defaultdict(list)
    for job_id, item_id in session.execute(query):
        found[job_id].append(item_id)
    return found


def unclaimed_running(session: Session, sent_before: datetime, limit: int) -> dict[str, str]:
    """Running items sent to a tier before `sent_before` that no worker has taken yet: item
    id -> job id, the last sent first."""
    query = (
        select(Item.id, Item.job_id)
        .where(
            Item.state == "running",
            Item.claimed_by.is_(None),
            Item.dispatched_at < sent_before,
        )
        .order_by(Item.dispatched_at.desc())
        .limit(limit)
    )
    return dict(session.execute(query).tuples().all())


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


def open_children(session: Session, parent_id: str) -> int:
    """How many parts (steps, outcome) of a trajectory are not done."""
    query = select(func.count()).where(Item.parent_id == parent_id, Item.state != "done")
    return int(session.scalar(query) or 0)


def verdicts_for(session: Session, item_ids: Sequence[str]) -> dict[str, list[VerdictRecord]]:
    """Stored verdicts per item, in ladder order."""
    out: dict[str, list[VerdictRecord]] = defaultdict(list)
    if not item_ids:
        return out
    for record in session.scalars(_verdicts_for(), {"ids": list(item_ids)}):
        out[record.item_id].append(record)
    return out


@built_once
def _verdicts_for() -> Select[VerdictRecord]:
    query = select(VerdictRecord).where(VerdictRecord.item_id.in_(_IDS))
    return query.order_by(VerdictRecord.item_id, VerdictRecord.step)


def existing_verdict_steps(session: Session, item_ids: Sequence[str], step: int) -> set[str]:
    return set(session.scalars(_verdict_steps(), {"ids": list(item_ids), "step": step}))


@built_once
def _verdict_steps() -> Select[str]:
    return select(VerdictRecord.item_id).where(
        VerdictRecord.item_id.in_(_IDS),
        VerdictRecord.step == bindparam("step"),
        VerdictRecord.status != "error",  # an error an operator's retry is trying again
    )


def add_verdict(
    session: Session, item_id: str, step: int, verdict: Verdict, cache_key: str | None
) -> VerdictRecord:
    record = new_verdict(item_id, step, verdict, cache_key)
    session.add(record)
    return record


def new_verdict(
    item_id: str,
    step: int,
    verdict: Verdict,
    cache_key: str | None,
    at: datetime | None = None,
) -> VerdictRecord:
    """A verdict row, not yet in the session: `insert_verdicts` writes many in one statement.
    `at`: its time (a ladder pass gives its own to all the rows it makes), else now."""
    record = plain_row(
        VerdictRecord,
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
        created_at=at or utcnow(),
    )
    _as_verdict[record] = verdict
    return record


def insert_verdicts(session: Session, records: Sequence[VerdictRecord]) -> None:
    """Write verdict rows made by `new_verdict` (one statement; their items are stored)."""
    insert_rows(session, _table(VerdictRecord), [r.__dict__ for r in records])


def _table(model: type[Any]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)
    return table


#: Rows already converted (or made from a verdict): reward composition and gates read each
#: verdict several times per pass, and validating it anew each time was a third of their cost.
_as_verdict: WeakKeyDictionary[VerdictRecord, Verdict] = WeakKeyDictionary()


def to_verdict(record: VerdictRecord) -> Verdict:
    found = _as_verdict.get(record)
    if found is None:
        found = _as_verdict[record] = _to_verdict(record)
    return found


def _to_verdict(record: VerdictRecord) -> Verdict:
    return Verdict.model_validate(verdict_fields(record))


def verdict_fields(record: VerdictRecord) -> dict[str, Any]:
    """A stored verdict's `Verdict` fields, in the model's order, as plain values."""
    return {
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


def cached_verdicts(
    session: Session, keys: Iterable[str], *, as_hits: bool = False
) -> dict[str, Verdict]:
    """The cache's verdicts for these keys; `as_hits`: marked `cached`, as an item answered by
    the cache stores them (made so here, instead of a copy of each)."""
    keys = list(set(keys))
    if not keys:
        return {}
    rows = session.execute(_cached_query(), {"keys": keys})
    return {key: Verdict.model_validate(verdict | {"cached": as_hits}) for key, verdict in rows}


@built_once
def _cached_query() -> Select[str, Any]:
    table = _table(VerdictCacheEntry)  # two columns, no ORM rows
    return select(table.c.key, table.c.verdict).where(table.c.key.in_(_KEYS))


def put_cache(session: Session, verdicts: Mapping[str, Verdict]) -> None:
    """Cache verdicts by content key; a key already cached keeps its entry.

    Insert-or-keep in one statement: two jobs (or requests) that computed the same verdict at
    the same time both go on with it, instead of one failing on the primary key.
    """
    if not verdicts:
        return
    rows = [
        {
            "key": key,
            "tier": verdict.tier,
            "tier_version": verdict.tier_version,
            "verdict": verdict.model_dump(mode="json", exclude={"cached"}),
            "created_at": utcnow(),
        }
        for key, verdict in sorted(verdicts.items())  # one order everywhere: no deadlocks
    ]
    insert_rows(session, _table(VerdictCacheEntry), rows, keep_existing=("key",))


def new_charge(**fields: Any) -> CostLedgerEntry:
    """A ledger row, not yet in the session: `insert_charges` writes many in one statement.
    Every column but the id and the tier times is given (its time: the pass's own)."""
    return plain_row(CostLedgerEntry, id=new_id(), cpu_s=0.0, wall_s=0.0, **fields)


def insert_charges(session: Session, entries: Sequence[CostLedgerEntry]) -> None:
    insert_rows(session, _table(CostLedgerEntry), [e.__dict__ for e in entries])


@dataclass(frozen=True)
class ChargeTimes:
    """What a tier call cost, for its item's stored ledger row."""

    item_id: str
    cpu_s: float
    wall_s: float
    #: What the call cost where the tier measured it (a judge's tokens at its endpoint's
    #: price), replacing the tier's cost class charged when the item was sent.
    cost_units: float | None = None


def update_charges(
    session: Session, step: int, timed: Sequence[ChargeTimes], riders: Sequence[str]
) -> None:
    """Fill stored ledger rows at `step` in: the CPU and wall time of the items' tier calls,
    and no cost for `riders` (duplicates that rode on another item's call). One statement per
    kind of change (on PostgreSQL, one UPDATE for all the timed rows; SQLite runs the
    statement once per row, in process)."""
    if timed and session.get_bind().dialect.name == "postgresql":
        session.execute(
            _charge_times_at_once(),
            {
                "b_step": step,
                "b_items": [t.item_id for t in timed],
                "b_cpus": [t.cpu_s for t in timed],
                "b_walls": [t.wall_s for t in timed],
            },
        )
    elif timed:
        rows = [
            {"b_item": t.item_id, "b_step": step, "b_cpu": t.cpu_s, "b_wall": t.wall_s}
            for t in timed
        ]
        session.execute(_charge_times(), rows)
    if riders:
        session.execute(_ride_free(), [{"b_item": i, "b_step": step} for i in riders])
    priced = [
        {"b_item": t.item_id, "b_step": step, "b_units": t.cost_units}
        for t in timed
        if t.cost_units is not None
    ]
    if priced:
        session.execute(_charge_units(), priced)


@built_once
def _charge_units() -> Update:
    table, where = _charge_row()
    return update(table).where(*where).values({"cost_units": bindparam("b_units")})


def _charge_row() -> tuple[Table, tuple[ColumnElement[bool], ...]]:
    table = _table(CostLedgerEntry)
    return table, (table.c.item_id == bindparam("b_item"), table.c.step == bindparam("b_step"))


@built_once
def _charge_times() -> Update:
    table, where = _charge_row()
    values: dict[str, Any] = {"cpu_s": bindparam("b_cpu"), "wall_s": bindparam("b_wall")}
    return update(table).where(*where).values(values)


@built_once
def _charge_times_at_once() -> Update:
    """PostgreSQL: `_charge_times` for many rows in one statement, the values in three arrays
    (one statement text, prepared once, whatever the number of rows)."""
    table = _table(CostLedgerEntry)
    given = select(
        func.unnest(bindparam("b_items", type_=postgresql.ARRAY(String))).label("item_id"),
        func.unnest(bindparam("b_cpus", type_=postgresql.ARRAY(Float))).label("cpu_s"),
        func.unnest(bindparam("b_walls", type_=postgresql.ARRAY(Float))).label("wall_s"),
    ).subquery("given")
    return (
        update(table)
        .where(table.c.item_id == given.c.item_id, table.c.step == bindparam("b_step"))
        .values(cpu_s=given.c.cpu_s, wall_s=given.c.wall_s)
    )


@built_once
def _ride_free() -> Update:
    table, where = _charge_row()
    return update(table).where(*where).values(cached=True, cost_units=0.0)


def claim(session: Session, item_ids: Sequence[str], worker: str, now: datetime) -> None:
    """Note that `worker` took the tier work of these items (one statement)."""
    if item_ids:
        session.execute(_claim(), {"ids": list(item_ids), "worker": worker, "now": now})


@built_once
def _claim() -> Update:
    table = _table(Item)
    values: dict[str, Any] = {"claimed_by": bindparam("worker"), "claimed_at": bindparam("now")}
    return update(table).where(table.c.id.in_(_IDS)).values(values)


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


def overdue_job_ids(session: Session, now: datetime, limit: int) -> list[str]:
    """Running jobs whose deadline has passed (their expiry message was lost or is late)."""
    query = (
        select(Job.id)
        .where(Job.status == "running", Job.deadline_at.is_not(None), Job.deadline_at < now)
        .order_by(Job.deadline_at)
        .limit(limit)
    )
    return list(session.scalars(query))


def ledger_where(session: Session, *where: ColumnElement[bool]) -> list[CostLedgerEntry]:
    """Cost-ledger rows matching `where`."""
    return list(session.scalars(select(CostLedgerEntry).where(*where)))


def leaf_counts_by_version(
    session: Session, *where: ColumnElement[bool]
) -> list[tuple[str, int, str, int]]:
    """(policy name, version, kind, count) of the leaf items of the jobs matching `where`."""
    rows = session.execute(
        select(Job.policy_name, Job.policy_version, Item.kind, func.count())
        .join(Job, Job.id == Item.job_id)
        .where(Item.kind != "trajectory", *where)
        .group_by(Job.policy_name, Job.policy_version, Item.kind)
    ).all()
    return [(name, version, kind, count) for name, version, kind, count in rows]


def stored_leaf_items(
    session: Session, job_ids: Sequence[str] | None, policy_name: str, limit: int
) -> list[Item]:
    """Leaf items of the given jobs, or of the policy's latest `limit` items."""
    query = select(Item).join(Job, Job.id == Item.job_id).where(Item.kind != "trajectory")
    if job_ids:
        query = query.where(Item.job_id.in_(list(job_ids)))
    else:
        query = query.where(Job.policy_name == policy_name)
    query = query.order_by(Job.created_at.desc(), Item.index).limit(limit)
    return list(session.scalars(query))
