"""The console's rollups: all their SQL. Closed minutes of the ladder's tables are summed into
small per-minute rows, settled hours of those into per-hour rows (and per-hour wall-time
histograms), lazily, from a watermark.

`refresh` runs before an overview is read (in a transaction of its own). It rolls up the
minutes that closed since the last refresh: a minute is closed once `LAG` has passed since its
end. A row can be committed after that (a long transaction, a worker whose clock is behind), so
every refresh that closes new minutes also rolls again the `SETTLE` before them: a row stamped
up to `SETTLE` before its commit is counted. An hour is rolled up (from its minute rows, and its
verdicts' wall times) once its minutes are settled; the hourly rows are what a day's or a
week's overview reads, with the minute rows at its edges. It never touches the write path: it
reads the ladder's tables as they are.

Everything in a settled minute is final except a reward: an item finishes or its reward is
revised (a late human answer) after its job's minute was rolled. Each such change writes a job
event (`item.finished`, `item.revised`) whose ids follow commit order; the refresh reads the
events since the last one it saw and rolls the reward rows of their jobs' minutes (and hours)
again. Unfinished items are never rolled up: the overview counts them from the items table.

Two refreshes at once: each swaps the watermark with a compare-and-set on the state row; the
one that loses does nothing (its overview reads what the winner commits, or reads raw rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Integer,
    and_,
    cast,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from verifier_service.console.overview.models import (
    HourCost,
    HourItems,
    HourRewards,
    HourVerdicts,
    MinuteCost,
    MinuteItems,
    MinuteRewards,
    MinuteVerdicts,
    RollupState,
    WallsUpTo,
)
from verifier_service.console.overview.repository import wall_bucket
from verifier_service.core.db import UTCDateTime
from verifier_service.events.models import JobEvent
from verifier_service.events.service import ITEM_FINISHED, ITEM_REVISED
from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord

NAME = "overview"
#: How long after its end a minute is first rolled up (a ladder pass commits within seconds).
LAG = timedelta(minutes=1)
#: How long a closed minute is rolled again by each refresh that closes newer ones: rows
#: committed up to this long after their timestamp are counted. Hours are rolled once settled.
SETTLE = timedelta(minutes=10)
#: How far back the rollups reach (the longest window, 7 days, and a day to spare).
KEEP = timedelta(days=8)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
#: Minutes (or hours) whose reward rows are rolled again in one statement.
_CHUNK = 200


@dataclass(frozen=True)
class Pair:
    """A per-minute table, the per-hour table that sums it, their key and summed columns."""

    minute: Any
    hour: Any
    keys: tuple[str, ...]
    sums: tuple[str, ...]


ITEMS = Pair(MinuteItems, HourItems, ("policy_name", "kind"), ("items",))
REWARDS = Pair(MinuteRewards, HourRewards, ("status",), ("items",))
VERDICTS = Pair(MinuteVerdicts, HourVerdicts, ("tier",), ("verdicts", "cached"))
COST = Pair(
    MinuteCost, HourCost, ("tier", "principal", "policy_name", "kind"), ("entries", "cost_units")
)
#: Every per-minute table and its hourly one.
HOURLY = (ITEMS, REWARDS, VERDICTS, COST)


def floor_to(at: datetime, step: timedelta) -> datetime:
    """`at` rounded down to a whole step (a minute, 5 minutes, an hour: a divisor of a day)."""
    if step == MINUTE:
        return at.replace(second=0, microsecond=0)
    if step == HOUR:
        return at.replace(minute=0, second=0, microsecond=0)
    if HOUR % step == timedelta(0) and step % MINUTE == timedelta(0):
        every = step // MINUTE
        return at.replace(minute=at.minute - at.minute % every, second=0, microsecond=0)
    step_us = step // timedelta(microseconds=1)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + timedelta(
        microseconds=(at - epoch) // timedelta(microseconds=1) // step_us * step_us
    )


def ceil_to(at: datetime, step: timedelta) -> datetime:
    """`at` rounded up to a whole step."""
    down = floor_to(at, step)
    return down if down == at else down + step


def _trunc(session: Session, column: Any, unit: str) -> Any:
    """`column` truncated to the minute or hour, in UTC, on either database."""
    if session.get_bind().dialect.name == "postgresql":
        return type_coerce(func.date_trunc(unit, column, "UTC"), UTCDateTime())
    pattern = "%Y-%m-%d %H:%M:00.000000" if unit == "minute" else "%Y-%m-%d %H:00:00.000000"
    return type_coerce(func.strftime(pattern, column), UTCDateTime())


def state(session: Session) -> RollupState | None:
    """How far the rollups reach, or None before the first refresh."""
    return session.get(RollupState, NAME)


def _last_event(session: Session) -> int:
    return int(session.execute(select(func.coalesce(func.max(JobEvent.id), 0))).scalar_one())


def refresh(session: Session, now: datetime) -> bool:
    """Roll up the minutes closed since the last refresh (and the `SETTLE` before them again),
    the hours settled since, and re-roll the reward rows of minutes whose items changed; drop
    rows older than `KEEP` when an hour settles. The caller commits. False when another
    refresh holds the watermark (nothing was written)."""
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
        old_closed, old_hours, old_event = start, ceil_to(start, HOUR), last_event
    else:
        start = found.start
        old_closed, old_hours, old_event = found.closed_until, found.walls_until, found.event_id
    closed = max(old_closed, target)
    hours = max(old_hours, floor_to(closed - SETTLE, HOUR))
    if closed == old_closed and hours == old_hours and last_event == old_event:
        return True
    swapped = session.execute(
        update(RollupState)
        .where(
            RollupState.name == NAME,
            RollupState.closed_until == old_closed,
            RollupState.event_id == old_event,
        )
        .values(closed_until=closed, walls_until=hours, event_id=last_event, refreshed_at=now)
        .execution_options(synchronize_session=False)
    )
    if swapped.rowcount != 1:  # type: ignore[attr-defined]
        return False
    fresh = old_closed  # minutes from here on are rolled from the ladder's rows as they are now
    if closed > old_closed:
        fresh = max(start, old_closed - SETTLE)  # hours are rolled only before this
        for pair in HOURLY:
            _delete_range(session, pair.minute, pair.minute.minute, fresh, old_closed)
        _roll_minutes(session, fresh, closed)
    if last_event > old_event:
        _reroll_rewards(session, old_event, last_event, fresh, old_hours)
    if hours > old_hours:
        _roll_hours(session, [(old_hours, hours)])
        _roll_walls(session, old_hours, hours)
        _prune(session, now - KEEP)  # once an hour: KEEP has a day to spare
    return True


def _delete_range(
    session: Session, model: Any, column: Any, since: datetime, until: datetime
) -> None:
    if since < until:
        session.execute(delete(model).where(column >= since, column < until))


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


def _reroll_rewards(
    session: Session, after: int, upto: int, rolled_until: datetime, hours_until: datetime
) -> None:
    """Roll again the reward rows of the rolled minutes (before `rolled_until`) whose jobs have
    events in (after, upto], and of their hours rolled before `hours_until`."""
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
    hours = sorted({floor_to(m, HOUR) for m in minutes if m < hours_until})
    for i in range(0, len(hours), _CHUNK):
        chunk = hours[i : i + _CHUNK]
        session.execute(delete(HourRewards).where(HourRewards.hour.in_(chunk)))
        _roll_hours(session, [(h, h + HOUR) for h in chunk], pairs=(REWARDS,))


def _roll_hours(
    session: Session, ranges: list[tuple[datetime, datetime]], pairs: Sequence[Pair] = HOURLY
) -> None:
    """Sum the minute rows of the whole hours in `ranges` into the hourly tables."""
    for pair in pairs:
        m = pair.minute
        hour = _trunc(session, m.minute, "hour")
        keys = [getattr(m, k) for k in pair.keys]
        session.execute(
            insert(pair.hour).from_select(
                ["hour", *pair.keys, *pair.sums],
                select(hour, *keys, *(func.sum(getattr(m, c)) for c in pair.sums))
                .where(or_(*(and_(m.minute >= a, m.minute < b) for a, b in ranges)))
                .group_by(hour, *keys),
            )
        )


def _roll_walls(session: Session, since: datetime, until: datetime) -> None:
    """The running wall-time histogram of each hour in [since, until): the hour before's
    totals plus the hour's own live verdicts per bucket (one statement an hour)."""
    bucket = wall_bucket(session)
    hour = since
    while hour < until:
        counted = (
            select(
                VerdictRecord.tier.label("tier"), bucket.label("bucket"), func.count().label("n")
            )
            .where(
                VerdictRecord.created_at >= hour,
                VerdictRecord.created_at < hour + HOUR,
                VerdictRecord.cached.is_(False),
            )
            .group_by(VerdictRecord.tier, bucket)
        )
        carried = select(WallsUpTo.tier, WallsUpTo.bucket, WallsUpTo.n).where(
            WallsUpTo.hour == hour - HOUR
        )
        both = union_all(carried, counted).subquery()
        session.execute(
            insert(WallsUpTo).from_select(
                ["hour", "tier", "bucket", "n"],
                select(literal(hour, UTCDateTime()), both.c.tier, both.c.bucket, func.sum(both.c.n))
                .group_by(both.c.tier, both.c.bucket),
            )
        )  # fmt: skip
        hour += HOUR


def _prune(session: Session, before: datetime) -> None:
    for pair in HOURLY:
        session.execute(delete(pair.minute).where(pair.minute.minute < before))
        session.execute(delete(pair.hour).where(pair.hour.hour < before))
    # Running totals: the rows of an hour before the longest window are never read again.
    session.execute(delete(WallsUpTo).where(WallsUpTo.hour < before))
