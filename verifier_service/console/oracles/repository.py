"""SQL of the console's oracle pages beyond what the oracle domain reads: the latest results,
each batch's items by state, an oracle's pause record, and a mark of its molecule results."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from verifier_service.oracle.models import OracleControl, OracleItem


def latest_results(session: Session, oracle: str, limit: int) -> list[OracleItem]:
    """The latest `limit` items of `oracle` that have a result (values or an error)."""
    query = (
        select(OracleItem)
        .where(OracleItem.oracle == oracle, OracleItem.answered_at.is_not(None))
        .order_by(OracleItem.answered_at.desc(), OracleItem.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def batch_item_states(session: Session, batch_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Batch id -> its items by state."""
    if not batch_ids:
        return {}
    query = (
        select(OracleItem.batch_id, OracleItem.state, func.count())
        .where(OracleItem.batch_id.in_(list(batch_ids)))
        .group_by(OracleItem.batch_id, OracleItem.state)
    )
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for batch_id, state, n in session.execute(query):
        out[str(batch_id)][str(state)] = int(n)
    return dict(out)


def control(session: Session, oracle: str) -> OracleControl | None:
    """Who last paused or resumed `oracle`, and when (None: nobody ever did)."""
    return session.get(OracleControl, oracle)


def molecule_results_mark(session: Session, oracle: str) -> tuple[int, datetime | None]:
    """How many molecule items of `oracle` have a result, and the latest answer's time: it
    changes whenever a result is recorded (a result is never rewritten) or items are removed."""
    query = select(func.count(), func.max(OracleItem.answered_at)).where(
        OracleItem.oracle == oracle,
        OracleItem.kind == "molecule",
        OracleItem.result.is_not(None),
    )
    count, latest = session.execute(query).one()
    return int(count), latest
