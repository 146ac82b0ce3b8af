"""Reading the console's rollups (written by `rollups.refresh`): the sums of a window's whole
minutes, from the hourly tables where whole settled hours are rolled up and the minute tables
at their edges, one statement per aggregate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Integer, Select, and_, case, cast, func, or_, select, type_coerce, union_all
from sqlalchemy.orm import Session

from verifier_service.console.overview.models import HourItems, MinuteItems, WallsUpTo
from verifier_service.console.overview.rollups import (
    COST,
    HOUR,
    ITEMS,
    MINUTE,
    REWARDS,
    VERDICTS,
    Pair,
)
from verifier_service.core.db import UTCDateTime

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass
class Rolled:
    """The rollup rows of whole minutes [first, last), of them whole hours [hours_first,
    hours_last) from the hourly tables (wall times: only those hours)."""

    series: list[tuple[datetime, str, int]]  # minute or hour, kind, items
    per_policy: dict[tuple[str, str], int]  # (policy, kind) -> items
    rewards: dict[str, int]  # finished items by reward status
    verdicts: list[tuple[str, int, int]]  # tier, verdicts, cached
    cost: list[tuple[str, str, str, str, int, float]]  # tier, principal, policy, kind, n, units
    walls: dict[str, list[tuple[int, int]]]  # tier -> (bucket, verdicts)


def _binned(session: Session, minute: Any, width: timedelta) -> Any:
    """A minute column floored to bins of `width` (whole minutes dividing an hour), in UTC."""
    every = width // MINUTE
    if every == 1:
        return minute
    if session.get_bind().dialect.name == "postgresql":
        return type_coerce(func.date_bin(width, minute, EPOCH), UTCDateTime())
    # SQLite keeps the text "YYYY-MM-DD HH:MM:SS.ffffff": rewrite its minutes.
    floored = cast(func.strftime("%M", minute), Integer) // every * every
    text = func.printf("%s%02d:00.000000", func.strftime("%Y-%m-%d %H:", minute), floored)
    return type_coerce(text, UTCDateTime())


def _in(column: Any, ranges: list[tuple[datetime, datetime]]) -> Any:
    return or_(*(and_(column >= a, column < b) for a, b in ranges))


def _summed(
    pair: Pair,
    keys: tuple[str, ...],
    minutes: list[tuple[datetime, datetime]],
    hours: list[tuple[datetime, datetime]],
) -> Select[Any] | None:
    """`pair`'s sums per `keys` over the minute rows of `minutes` and the hour rows of `hours`."""
    parts = []
    for model, column, ranges in ((pair.minute, "minute", minutes), (pair.hour, "hour", hours)):
        if ranges:
            parts.append(
                select(*(getattr(model, k) for k in keys), *(getattr(model, c) for c in pair.sums))
                .where(_in(getattr(model, column), ranges))
            )  # fmt: skip
    if not parts:
        return None
    rows = (union_all(*parts) if len(parts) > 1 else parts[0]).subquery()
    group = [rows.c[k] for k in keys]
    return select(*group, *(func.sum(rows.c[c]) for c in pair.sums)).group_by(*group)


def read(
    session: Session,
    first: datetime,
    last: datetime,
    hours_first: datetime,
    hours_last: datetime,
    bin_width: timedelta,
) -> Rolled:
    """Sum the rollup rows of a window's whole minutes (whole hours from the hourly tables);
    its items series per minute, or per hour where `bin_width` is an hour or more."""
    run = session.connection().execute  # Core rows, not ORM objects

    def rows(pair: Pair, keys: tuple[str, ...]) -> list[Any]:
        query = _summed(pair, keys, minutes, hours)
        return [] if query is None else list(run(query))

    hours = [(hours_first, hours_last)] if hours_first < hours_last else []
    minutes = [(a, b) for a, b in ((first, hours_first), (hours_last, last)) if a < b]
    if not hours:
        minutes = [(first, last)] if first < last else []
    series: list[tuple[datetime, str, int]] = []
    if bin_width >= HOUR and hours:
        for model, column, ranges in ((MinuteItems, "minute", minutes), (HourItems, "hour", hours)):
            at = getattr(model, column)
            if ranges:
                series += run(
                    select(at, model.kind, func.sum(model.items))
                    .where(_in(at, ranges)).group_by(at, model.kind)
                )  # fmt: skip
    elif first < last:
        at = _binned(session, MinuteItems.minute, bin_width)
        series += run(
            select(at, MinuteItems.kind, func.sum(MinuteItems.items))
            .where(MinuteItems.minute >= first, MinuteItems.minute < last)
            .group_by(at, MinuteItems.kind)
        )  # fmt: skip
    walls: dict[str, list[tuple[int, int]]] = {}
    if hours:  # running totals: to the last hour's end, less those to the first hour's start
        last_hour, before = hours_last - HOUR, hours_first - HOUR
        n = func.sum(case((WallsUpTo.hour == last_hour, WallsUpTo.n), else_=-WallsUpTo.n))
        for tier, bucket, count in run(
            select(WallsUpTo.tier, WallsUpTo.bucket, n)
            .where(WallsUpTo.hour.in_([last_hour, before]))
            .group_by(WallsUpTo.tier, WallsUpTo.bucket)
        ):
            if count:
                walls.setdefault(tier, []).append((int(bucket), int(count)))
    return Rolled(
        series=[(at, kind, int(n)) for at, kind, n in series],
        per_policy={(p, k): int(n) for p, k, n in rows(ITEMS, ITEMS.keys)},
        rewards={str(s): int(n) for s, n in rows(REWARDS, REWARDS.keys)},
        verdicts=[(t, int(n), int(c or 0)) for t, n, c in rows(VERDICTS, VERDICTS.keys)],
        cost=[
            (t, pr, po, k, int(n), float(u or 0.0)) for t, pr, po, k, n, u in rows(COST, COST.keys)
        ],
        walls=walls,
    )
