"""What the console's oracle pages show: the oracle domain's own figures (the ones
GET /v1/oracles answers), its batches with what each still waits for, its latest results."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from tiers.oracle import OracleDefinition
from verifier_service.console.oracles import repository as console_repository
from verifier_service.core.db import utcnow
from verifier_service.oracle import repository, service, views
from verifier_service.oracle.schemas import OracleOut

#: Batches whose results are still missing.
OPEN_STATES = ("sending", "sent", "open", "leased")
BATCHES_SHOWN = 30
RESULTS_SHOWN = 30


@dataclass(frozen=True)
class BatchRow:
    """One batch as the page lists it."""

    id: str
    mode: str
    state: str
    created_at: datetime
    due_at: datetime
    overdue: bool
    items: int
    with_result: int
    attempts: int
    claims: int
    resendable: bool


@dataclass(frozen=True)
class ResultRow:
    """One result the oracle sent back."""

    item_id: str
    batch_id: str | None
    job_id: str
    answered_at: datetime
    turnaround_s: float | None
    values: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class OraclePage:
    """Everything the page of one oracle shows."""

    figures: OracleOut
    definition: OracleDefinition
    period_start: datetime
    period_end: datetime
    changed_by: str | None
    changed_at: datetime | None
    batches: list[BatchRow]
    results: list[ResultRow]


def resendable(mode: str, state: str) -> bool:
    """What `service.resend` takes: a pushed batch the partner took, a pull batch not done."""
    return (mode == "push" and state == "sent") or (mode == "pull" and state in ("open", "leased"))


def oracles(session: Session) -> list[OracleOut]:
    """Every oracle defined, with its figures."""
    return views.overview(session)


def oracle_page(session: Session, name: str) -> OraclePage:
    """One oracle's page (UnknownOracleError, a 404, for a name not defined)."""
    found = service.definition(name)
    figures = next(o for o in views.overview(session) if o.name == name)
    now = utcnow()
    start = service.period_start(now, found.period_s)
    batches = repository.batches(session, name, limit=BATCHES_SHOWN)
    states = console_repository.batch_item_states(session, [b.id for b in batches])
    rows = [
        BatchRow(
            id=b.id, mode=b.mode, state=b.state, created_at=b.created_at, due_at=b.due_at,
            overdue=b.state in OPEN_STATES and b.due_at < now,
            items=sum(states.get(b.id, {}).values()),
            with_result=sum(n for s, n in states.get(b.id, {}).items() if s != "batched"),
            attempts=b.attempts, claims=b.claims, resendable=resendable(b.mode, b.state),
        )
        for b in batches
    ]  # fmt: skip
    results = [
        ResultRow(
            item_id=r.id, batch_id=r.batch_id, job_id=r.job_id, answered_at=r.answered_at,
            turnaround_s=(r.answered_at - r.selected_at).total_seconds()
            if r.selected_at is not None else None,
            values=(r.result or {}).get("values"), error=(r.result or {}).get("error"),
        )
        for r in console_repository.latest_results(session, name, RESULTS_SHOWN)
        if r.answered_at is not None
    ]  # fmt: skip
    control = console_repository.control(session, name)
    return OraclePage(
        figures=figures, definition=found, period_start=start,
        period_end=start + timedelta(seconds=found.period_s),
        changed_by=control.changed_by if control else None,
        changed_at=control.changed_at if control else None,
        batches=rows, results=results,
    )  # fmt: skip


def duration(seconds: float | None) -> str:
    """A duration as a person reads it: 0.8 s, 12 s, 4.5 min, 3.2 h, 2.5 d."""
    if seconds is None:
        return "\u2013"  # an en dash, as the other console pages show nothing
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
