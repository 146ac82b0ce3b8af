"""Operators' JSON API behind the console's pages."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy.exc import IntegrityError, OperationalError

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.console.overview import service
from verifier_service.console.overview.schemas import JobPaths, JobQuery, JobRow, Overview, Window
from verifier_service.console.params import JobId, WindowQuery
from verifier_service.core.db import transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.ladder.dispatch import commit_then_send

router = APIRouter(prefix="/v1/console", tags=["console"])
log = logging.getLogger(__name__)


@router.get("/overview")
def get_overview(
    session: SessionDep,
    settings: SettingsDep,
    _: OperatorPrincipal,
    window: WindowQuery = Window.hour,
) -> Overview:
    """Throughput, rewards, tier durations, cache, escalation, cost and queues over a window."""
    try:
        with transaction() as fresh:
            service.refresh_rollups(fresh)
    except (IntegrityError, OperationalError) as exc:
        # Another request's refresh won the race (or SQLite's one writer was busy): this
        # overview reads the rollups as they are and the raw rows around them.
        log.info("console rollups not refreshed: %s", exc.__class__.__name__)
    return service.overview(session, window, settings.broker_url)


@router.get("/jobs")
def search_jobs(
    session: SessionDep, _: OperatorPrincipal, query: Annotated[JobQuery, Query()]
) -> list[JobRow]:
    """Jobs by principal, policy, status and creation time, newest first."""
    return service.search_jobs(session, query)


@router.get("/jobs/{job_id}")
def get_job_paths(session: SessionDep, _: OperatorPrincipal, job_id: JobId) -> JobPaths:
    """A job's items, each with its path up the ladder: verdicts in order and their costs."""
    return service.job_paths(session, job_id)


@router.post("/jobs/{job_id}/cancel")
def cancel_job(principal: OperatorPrincipal, job_id: JobId) -> JobPaths:
    """Cancel a running job (audited): its unfinished items end as infra_error "cancelled"."""
    # After the commit: the trainer's events, waiters woken.
    commit_then_send(lambda session: service.cancel(session, job_id, principal.name))
    with transaction() as session:
        return service.job_paths(session, job_id)
