"""All SQL of the oracle domain."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from verifier_service.oracle.models import OracleAttempt, OracleBatch, OracleItem


def queued(session: Session, oracle: str, before: datetime) -> list[OracleItem]:
    """Items waiting for selection that came before `before`, locked, highest value first."""
    query = (
        select(OracleItem)
        .where(
            OracleItem.oracle == oracle,
            OracleItem.state == "queued",
            OracleItem.created_at <= before,
        )
        .order_by(OracleItem.value.desc().nulls_last(), OracleItem.created_at, OracleItem.id)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(query))


def selected_since(session: Session, oracle: str, since: datetime) -> int:
    """Items of `oracle` selected for a batch since `since` (this period's capacity used)."""
    query = select(func.count()).where(OracleItem.oracle == oracle, OracleItem.selected_at >= since)
    return int(session.scalar(query) or 0)


def items_by_id(session: Session, ids: Iterable[str], *, lock: bool = False) -> list[OracleItem]:
    query = select(OracleItem).where(OracleItem.id.in_(list(ids))).order_by(OracleItem.id)
    if lock:  # read again under the lock: a concurrent request may have just answered it
        query = query.with_for_update().execution_options(populate_existing=True)
    return list(session.scalars(query))


def items_of_ladder_items(
    session: Session, item_ids: Sequence[str], step: int | None = None
) -> list[OracleItem]:
    """The oracle items of ladder items (at ladder step `step` when given), locked."""
    query = select(OracleItem).where(OracleItem.item_id.in_(list(item_ids)))
    if step is not None:
        query = query.where(OracleItem.step == step)
    return list(session.scalars(query.order_by(OracleItem.id).with_for_update()))


def batch_items(session: Session, batch_id: str) -> list[OracleItem]:
    query = select(OracleItem).where(OracleItem.batch_id == batch_id).order_by(OracleItem.id)
    return list(session.scalars(query))


def lock_batch(session: Session, batch_id: str) -> OracleBatch | None:
    query = select(OracleBatch).where(OracleBatch.id == batch_id).with_for_update()
    return session.scalars(query).first()


def claimable(session: Session, oracle: str, now: datetime) -> OracleBatch | None:
    """The oldest batch of a pull oracle nobody holds (never claimed, or its lease expired),
    locked; batches another claim is taking are skipped."""
    query = (
        select(OracleBatch)
        .where(
            OracleBatch.oracle == oracle,
            or_(
                OracleBatch.state == "open",
                (OracleBatch.state == "leased") & (OracleBatch.lease_expires_at < now),
            ),
        )
        .order_by(OracleBatch.created_at, OracleBatch.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    return session.scalars(query).first()


def attempts(session: Session, batch_id: str) -> list[OracleAttempt]:
    query = (
        select(OracleAttempt)
        .where(OracleAttempt.batch_id == batch_id)
        .order_by(OracleAttempt.number)
    )
    return list(session.scalars(query))


def counts(session: Session, oracle: str) -> dict[str, int]:
    """Items of `oracle` by state."""
    query = (
        select(OracleItem.state, func.count())
        .where(OracleItem.oracle == oracle)
        .group_by(OracleItem.state)
    )
    return {str(state): int(n) for state, n in session.execute(query)}


def batches(session: Session, oracle: str, limit: int = 50) -> list[OracleBatch]:
    query = (
        select(OracleBatch)
        .where(OracleBatch.oracle == oracle)
        .order_by(OracleBatch.created_at.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def overdue_batches(session: Session, oracle: str, now: datetime) -> int:
    """Batches of `oracle` past their due time with results still missing."""
    query = select(func.count()).where(
        OracleBatch.oracle == oracle,
        OracleBatch.state.in_(("sending", "sent", "open", "leased")),
        OracleBatch.due_at < now,
    )
    return int(session.scalar(query) or 0)


def turnarounds(session: Session, oracle: str, limit: int = 500) -> list[tuple[datetime, datetime]]:
    """(selected_at, answered_at) of the latest results of `oracle`."""
    query = (
        select(OracleItem.selected_at, OracleItem.answered_at)
        .where(
            OracleItem.oracle == oracle,
            OracleItem.answered_at.is_not(None),
            OracleItem.selected_at.is_not(None),
        )
        .order_by(OracleItem.answered_at.desc())
        .limit(limit)
    )
    return [(a, b) for a, b in session.execute(query) if a is not None and b is not None]


def answered_molecules(
    session: Session, oracle: str, latest: int | None = None
) -> list[OracleItem]:
    """Molecule items of `oracle` that have a result (values or an error), oldest answer first;
    only the latest `latest` of them when given (a page that must stay quick)."""
    query = select(OracleItem).where(
        OracleItem.oracle == oracle,
        OracleItem.kind == "molecule",
        OracleItem.result.is_not(None),
    )
    if latest is None:
        return list(session.scalars(query.order_by(OracleItem.answered_at, OracleItem.id)))
    newest = query.order_by(OracleItem.answered_at.desc(), OracleItem.id.desc()).limit(latest)
    return list(reversed(list(session.scalars(newest))))
