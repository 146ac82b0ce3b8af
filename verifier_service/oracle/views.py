"""What operators read about oracles' batches."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sqlalchemy.orm import Session

from verifier_service.core.db import utcnow
from verifier_service.oracle import repository
from verifier_service.oracle.access import definitions, paused, period_start
from verifier_service.oracle.errors import UnknownBatchError
from verifier_service.oracle.models import OracleBatch
from verifier_service.oracle.schemas import AttemptOut, BatchStatusOut, OracleOut


def batch_status(session: Session, oracle: str, batch_id: str) -> BatchStatusOut:
    batch = session.get(OracleBatch, batch_id)
    if batch is None or batch.oracle != oracle:
        raise UnknownBatchError(f"no batch {batch_id!r} of oracle {oracle!r}")
    return BatchStatusOut(
        id=batch.id, oracle=batch.oracle, mode=batch.mode, state=batch.state,
        created_at=batch.created_at, due_at=batch.due_at, sent_at=batch.sent_at,
        claims=batch.claims,
        items={r.id: r.state for r in repository.batch_items(session, batch_id)},
        attempts=[
            AttemptOut(number=a.number, started_at=a.started_at, status_code=a.status_code,
                       error=a.error, duration_ms=a.duration_ms)
            for a in repository.attempts(session, batch_id)
        ],
    )  # fmt: skip


def _quantile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile of `values` (nearest rank), None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def overview(session: Session) -> list[OracleOut]:
    """Every oracle: capacity used this period, in flight, overdue, turnaround, items."""
    now, out = utcnow(), []
    for name, found in sorted(definitions().items()):
        counts = repository.counts(session, name)
        waits = [(b - a).total_seconds() for a, b in repository.turnarounds(session, name)]
        out.append(
            OracleOut(
                name=name, mode=found.mode, paused=paused(session, name),
                capacity=found.capacity, period_s=found.period_s,
                used_this_period=repository.selected_since(
                    session, name, period_start(now, found.period_s)
                ),
                in_flight=counts.get("batched", 0),
                overdue_batches=repository.overdue_batches(session, name, now),
                turnaround_p50_s=_quantile(waits, 0.5), turnaround_p95_s=_quantile(waits, 0.95),
                items=counts,
            )
        )  # fmt: skip
    return out
