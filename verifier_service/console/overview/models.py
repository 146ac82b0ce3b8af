"""ORM models of the console's rollups: closed minutes of the ladder's tables summed once, so an
overview of a day or a week reads thousands of small rows instead of a million raw ones.

Counts and costs are kept per minute and per settled hour; verdict wall times as log-spaced
histogram buckets (see `histogram.py`), running totals per hour. `RollupState` says which
minutes (and hours) are rolled up and the last job event read (reward changes re-roll the
minute and hour of their job).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from verifier_service.core.db import Base

EventId = BigInteger().with_variant(Integer(), "sqlite")
#: A running count (SQLite's INTEGER is 64-bit already).
Count = EventId


class RollupState(Base):
    """How far the rollups reach: minutes in [start, closed_until) and hours before walls_until."""

    __tablename__ = "console_rollup_state"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    start: Mapped[datetime]
    closed_until: Mapped[datetime]
    walls_until: Mapped[datetime]
    event_id: Mapped[int] = mapped_column(EventId)
    refreshed_at: Mapped[datetime]


# The minute tables and their whole settled hours share their columns but the first (`minute`
# or `hour`): a week's overview reads 168 hour rows per key instead of 10,080 minute rows (see
# `rollups.HOURLY`). The shared columns are declared once, below; each table's own time column,
# declared on the table's class, comes first in it (and in its primary key).


class _ItemsColumns:
    policy_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    items: Mapped[int]


class _RewardsColumns:
    status: Mapped[str] = mapped_column(String(32), primary_key=True)
    items: Mapped[int]


class _VerdictsColumns:
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    verdicts: Mapped[int]
    cached: Mapped[int]


class _CostColumns:
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal: Mapped[str] = mapped_column(String(128), primary_key=True)
    policy_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    entries: Mapped[int]
    cost_units: Mapped[float] = mapped_column(Float)


class MinuteItems(_ItemsColumns, Base):
    """Top-level items of the jobs created in one minute, per policy and item kind."""

    __tablename__ = "console_minute_items"

    minute: Mapped[datetime] = mapped_column(primary_key=True)


class MinuteRewards(_RewardsColumns, Base):
    """Finished top-level items of the jobs created in one minute, by reward status."""

    __tablename__ = "console_minute_rewards"

    minute: Mapped[datetime] = mapped_column(primary_key=True)


class MinuteVerdicts(_VerdictsColumns, Base):
    """One tier's verdicts stored in one minute, and how many came from the cache."""

    __tablename__ = "console_minute_verdicts"

    minute: Mapped[datetime] = mapped_column(primary_key=True)


class MinuteCost(_CostColumns, Base):
    """Cost ledger entries of one minute, per tier, principal, policy and item kind."""

    __tablename__ = "console_minute_cost"

    minute: Mapped[datetime] = mapped_column(primary_key=True)


class WallsUpTo(Base):
    """How many live (not cached) verdicts of a tier stored from the rollups' first hour to the
    end of one hour fell in one wall-time bucket: running totals, so that the verdicts of any
    range of whole hours are the difference of two hours' rows (a week reads two, not 168)."""

    __tablename__ = "console_walls_upto"

    hour: Mapped[datetime] = mapped_column(primary_key=True)
    tier: Mapped[str] = mapped_column(String(64), primary_key=True)
    bucket: Mapped[int] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(Count)


class HourItems(_ItemsColumns, Base):
    """`MinuteItems` of one whole hour."""

    __tablename__ = "console_hour_items"

    hour: Mapped[datetime] = mapped_column(primary_key=True)


class HourRewards(_RewardsColumns, Base):
    """`MinuteRewards` of one whole hour."""

    __tablename__ = "console_hour_rewards"

    hour: Mapped[datetime] = mapped_column(primary_key=True)


class HourVerdicts(_VerdictsColumns, Base):
    """`MinuteVerdicts` of one whole hour."""

    __tablename__ = "console_hour_verdicts"

    hour: Mapped[datetime] = mapped_column(primary_key=True)


class HourCost(_CostColumns, Base):
    """`MinuteCost` of one whole hour."""

    __tablename__ = "console_hour_cost"

    hour: Mapped[datetime] = mapped_column(primary_key=True)
