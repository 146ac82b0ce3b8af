"""The console's rollups: all their SQL. Closed minutes of the ladder's tables are summed once
into small per-minute rows (per-hour wall-time histograms), lazily, from a watermark.

`refresh` runs before an overview is read (in a transaction of its own). It rolls up the
minutes that closed since the last refresh: a minute is closed once `LAG` has passed since its
end, so rows stamped in it are committed by then (a ladder pass commits within seconds). It
never touches the write path: it reads the ladder's tables as they are.

Everything in a rolled minute is final except a reward: an item finishes or its reward is
revised (a late human answer) after its job's minute was rolled. Each such change writes a job
event (`item.finished`, `item.revised`) whose ids follow commit order; the refresh reads the
events since the last one it saw and rolls the reward rows of their jobs' minutes again.
Unfinished items are never rolled up: the overview counts them from the items table.

Two refreshes at once: each swaps the watermark with a compare-and-set on the state row; the
one that loses does nothing (its overview reads what the winner commits, or reads raw rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, and_, cast, delete, func, insert, or_, select, type_coerce, update
from sqlalchemy.orm import Session

from verifier_service.console.histogram import FLOOR_S, LN_BASE
from verifier_service.console.models import (
    HourWalls,
    MinuteCost,
    MinuteItems,
    MinuteRewards,
    MinuteVerdicts,
    RollupState,
)
from verifier_service.core.db import UTCDateTime
from verifier_service.events.models import JobEvent
from verifier_service.events.service import ITEM_FINISHED, ITEM_REVISED
from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord

NAME = "overview"
#: How long after its end a minute is rolled up (rows stamped in it are committed by then).
LAG = timedelta(minutes=1)
#: How far back the rollups reach (the longest window, 7 days, and a day to spare).
KEEP = timedelta(days=8)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
#: Minutes whose reward rows are rolled again in one statement.
_CHUNK = 200


def floor_to(at: datetime, step: timedelta) -> datetime:
    """`at` rounded down to a whole minute or hour."""
    if step == HOUR:
        return at.replace(minute=0, second=0, microsecond=0)
    return at.replace(second=0, microsecond=0)


def ceil_to(at: datetime, step: timedelta) -> datetime:
    """`at` rounded up to a whole minute or hour."""
    down = floor_to(at, step)
    return down if down == at else down + step


def _trunc(session: Session, column: Any, unit: str) -> Any:
    """`column` truncated to the minute or hour, in UTC, on either database."""
    if session.get_bind().dialect.name == "postgresql":
        return type_coerce(func.date_trunc(unit, column, "UTC"), UTCDateTime())
    pattern = "%Y-%m-%d %H:%M:00.000000" if unit == "minute" else "%Y-%m-%d %H:00:00.000000"
    return type_coerce(func.strftime(pattern, column), UTCDateTime())


def _bucket(session: Session) -> Any:
    """The histogram bucket of a verdict's wall time (`histogram.bucket_of` in SQL)."""
    larger = func.greatest if session.get_bind().dialect.name == "postgresql" else func.max
    wall = larger(VerdictRecord.wall_s, FLOOR_S)
    return cast(func.floor(func.ln(wall / FLOOR_S) / LN_BASE), Integer)


def state(session: Session) -> RollupState | None:
    """How far the rollups reach, or None before the first refresh."""
    return session.get(RollupState, NAME)


def _last_event(session: Session) -> int:
    return int(session.execute(select(func.coalesce(func.max(JobEvent.id), 0))).scalar_one())


def refresh(session: Session, now: datetime) -> bool:
    """Roll up the minutes (and hours) closed since the last refresh and re-roll the reward rows
    of minutes whose items changed; drop rows older than `KEEP`. The caller commits. False when
    another refresh holds the watermark (nothing was written)."""
    target = floor_to(now - LAG, MINUTE)
    found = state(session)
    last_event = _last_event(session)  # before reading any item: later changes come again
    if found is None:
        start = floor_to(now - KEEP, MINUTE)
        session.add(
            RollupState(
                name=NAME, start=start, closed_until=start, walls_until=ceil_to(start, HOUR),
                event_id=last_event, refreshed_at=now,
            )
        )  # fmt: skip
        session.flush()  # a second first refresh fails here on the primary key
        old_closed, old_walls, old_event = start, ceil_to(start, HOUR), last_event
    else:
        old_closed, old_walls, old_event = found.closed_until, found.walls_until, found.event_id
    walls_target = max(old_walls, floor_to(target, HOUR))
    closed = max(old_closed, target)
    if closed == old_closed and walls_target == old_walls and last_event == old_event:
        return True
    swapped = session.execute(
        update(RollupState)
        .where(
            RollupState.name == NAME,
            RollupState.closed_until == old_closed,
            RollupState.event_id == old_event,
        )
        .values(
            closed_until=closed, walls_until=walls_target, event_id=last_event, refreshed_at=now
        )
        .execution_options(synchronize_session=False)
    )
    if swapped.rowcount != 1:  # type: ignore[attr-defined]
        return False
    if closed > old_closed:
        _roll_minutes(session, old_closed, closed)
    if walls_target > old_walls:
        _roll_walls(session, old_walls, walls_target)
    if last_event > old_event:
        _reroll_rewards(session, old_event, last_event, old_closed)
    _prune(session, now - KEEP)
    return True


def _roll_minutes(session: Session, since: datetime, until: datetime) -> None:
    job_minute = _trunc(session, Job.created_at, "minute")
    top = (Job.created_at >= since, Job.created_at < until, Item.parent_id.is_(None))
    session.execute(
        insert(MinuteItems).from_select(
            ["minute", "policy_name", "kind", "items"],
            select(job_minute, Job.policy_name, Item.kind, func.count())
            .join(Item, Item.job_id == Job.id)
            .where(*top)
            .group_by(job_minute, Job.policy_name, Item.kind),
        )
    )
    _roll_rewards(session, and_(Job.created_at >= since, Job.created_at < until))
    verdict_minute = _trunc(session, VerdictRecord.created_at, "minute")
    session.execute(
        insert(MinuteVerdicts).from_select(
            ["minute", "tier", "verdicts", "cached"],
            select(
                verdict_minute,
                VerdictRecord.tier,
                func.count(),
                func.sum(cast(VerdictRecord.cached, Integer)),
            )
            .where(VerdictRecord.created_at >= since, VerdictRecord.created_at < until)
            .group_by(verdict_minute, VerdictRecord.tier),
        )
    )
    cost_minute = _trunc(session, CostLedgerEntry.created_at, "minute")
    session.execute(
        insert(MinuteCost).from_select(
            ["minute", "tier", "principal", "policy_name", "kind", "entries", "cost_units"],
            select(
                cost_minute,
                CostLedgerEntry.tier,
                CostLedgerEntry.principal,
                CostLedgerEntry.policy_name,
                Item.kind,
                func.count(),
                func.sum(CostLedgerEntry.cost_units),
            )
            .join(Item, Item.id == CostLedgerEntry.item_id)
            .where(CostLedgerEntry.created_at >= since, CostLedgerEntry.created_at < until)
            .group_by(
                cost_minute,
                CostLedgerEntry.tier,
                CostLedgerEntry.principal,
                CostLedgerEntry.policy_name,
                Item.kind,
            ),
        )
    )


def _roll_rewards(session: Session, jobs: Any) -> None:
    """Reward rows of the finished top-level items of the jobs `jobs` selects."""
    job_minute = _trunc(session, Job.created_at, "minute")
    status = Item.reward["status"].as_string()
    session.execute(
        insert(MinuteRewards).from_select(
            ["minute", "status", "items"],
            select(job_minute, status, func.count())
            .join(Item, Item.job_id == Job.id)
            .where(jobs, Item.parent_id.is_(None), Item.state == "done")
            .group_by(job_minute, status),
        )
    )


def _reroll_rewards(session: Session, after: int, upto: int, rolled_until: datetime) -> None:
    """Roll again the reward rows of the rolled minutes whose jobs have events in (after, upto]."""
    job_minute = _trunc(session, Job.created_at, "minute")
    minutes = sorted(
        m
        for (m,) in session.execute(
            select(job_minute)
            .join(JobEvent, JobEvent.job_id == Job.id)
            .where(
                JobEvent.id > after,
                JobEvent.id <= upto,
                JobEvent.kind.in_([ITEM_FINISHED, ITEM_REVISED]),
                Job.created_at < rolled_until,
            )
            .distinct()
        )
    )
    for i in range(0, len(minutes), _CHUNK):
        chunk = minutes[i : i + _CHUNK]
        session.execute(delete(MinuteRewards).where(MinuteRewards.minute.in_(chunk)))
        _roll_rewards(
            session,
            or_(*(and_(Job.created_at >= m, Job.created_at < m + MINUTE) for m in chunk)),
        )


def _roll_walls(session: Session, since: datetime, until: datetime) -> None:
    hour = _trunc(session, VerdictRecord.created_at, "hour")
    bucket = _bucket(session)
    session.execute(
        insert(HourWalls).from_select(
            ["hour", "tier", "bucket", "n"],
            select(hour, VerdictRecord.tier, bucket, func.count())
            .where(
                VerdictRecord.created_at >= since,
                VerdictRecord.created_at < until,
                VerdictRecord.cached.is_(False),
            )
            .group_by(hour, VerdictRecord.tier, bucket),
        )
    )


def _prune(session: Session, before: datetime) -> None:
    for model in (MinuteItems, MinuteRewards, MinuteVerdicts, MinuteCost):
        session.execute(delete(model).where(model.minute < before))
    session.execute(delete(HourWalls).where(HourWalls.hour < before))


# ---------------------------------------------------------------------------- reading


@dataclass
class Rolled:
    """The rollup rows of the whole minutes [since, until) (hours [walls_since, walls_until))."""

    per_minute: list[tuple[datetime, str, int]]  # minute, kind, items
    per_policy: dict[tuple[str, str], int]  # (policy, kind) -> items
    rewards: dict[str, int]  # finished items by reward status
    verdicts: list[tuple[str, int, int]]  # tier, verdicts, cached
    cost: list[tuple[str, str, str, str, int, float]]  # tier, principal, policy, kind, n, units
    walls: dict[str, list[tuple[int, int]]]  # tier -> (bucket, verdicts)


def read(
    session: Session, since: datetime, until: datetime, walls_since: datetime,
    walls_until: datetime,
) -> Rolled:  # fmt: skip
    """Sum the rollup rows of a range of whole minutes (and whole hours for wall times)."""
    run = session.connection().execute  # Core rows: a week is tens of thousands of them
    in_range = (MinuteItems.minute >= since, MinuteItems.minute < until)
    per_minute = run(
        select(MinuteItems.minute, MinuteItems.kind, func.sum(MinuteItems.items))
        .where(*in_range)
        .group_by(MinuteItems.minute, MinuteItems.kind)
    )
    per_policy = run(
        select(MinuteItems.policy_name, MinuteItems.kind, func.sum(MinuteItems.items))
        .where(*in_range)
        .group_by(MinuteItems.policy_name, MinuteItems.kind)
    )
    rewards = run(
        select(MinuteRewards.status, func.sum(MinuteRewards.items))
        .where(MinuteRewards.minute >= since, MinuteRewards.minute < until)
        .group_by(MinuteRewards.status)
    )
    verdicts = run(
        select(MinuteVerdicts.tier, func.sum(MinuteVerdicts.verdicts),
               func.sum(MinuteVerdicts.cached))
        .where(MinuteVerdicts.minute >= since, MinuteVerdicts.minute < until)
        .group_by(MinuteVerdicts.tier)
    )  # fmt: skip
    keys = (MinuteCost.tier, MinuteCost.principal, MinuteCost.policy_name, MinuteCost.kind)
    cost = run(
        select(*keys, func.sum(MinuteCost.entries), func.sum(MinuteCost.cost_units))
        .where(MinuteCost.minute >= since, MinuteCost.minute < until)
        .group_by(*keys)
    )
    walls: dict[str, list[tuple[int, int]]] = {}
    for tier, bucket, n in run(
        select(HourWalls.tier, HourWalls.bucket, func.sum(HourWalls.n))
        .where(HourWalls.hour >= walls_since, HourWalls.hour < walls_until)
        .group_by(HourWalls.tier, HourWalls.bucket)
    ):
        walls.setdefault(tier, []).append((int(bucket), int(n)))
    return Rolled(
        per_minute=[(m, k, int(n)) for m, k, n in per_minute],
        per_policy={(p, k): int(n) for p, k, n in per_policy},
        rewards={str(s): int(n) for s, n in rewards},
        verdicts=[(t, int(n), int(c or 0)) for t, n, c in verdicts],
        cost=[(t, pr, po, k, int(n), float(u or 0.0)) for t, pr, po, k, n, u in cost],
        walls=walls,
    )
