"""What operators read about oracles' batches."""

from __future__ import annotations

from sqlalchemy.orm import Session

from verifier_service.oracle import repository
from verifier_service.oracle.errors import UnknownBatchError
from verifier_service.oracle.models import OracleBatch
from verifier_service.oracle.schemas import AttemptOut, BatchStatusOut


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
