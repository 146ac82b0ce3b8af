"""The console's overview and jobs pages: the overview is a server-rendered shell whose script
(static/console.js) draws the numbers and charts from the JSON API (`endpoints.py`); the jobs
search, a job's page and its Cancel form are rendered here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.auth.forms import OperatorForm
from verifier_service.console.overview import service
from verifier_service.console.overview.schemas import JobQuery, Window
from verifier_service.console.params import JobId, WindowQuery
from verifier_service.console.render import renderer
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.ladder.dispatch import commit_then_send
from verifier_service.web import flash
from verifier_service.web.flash import ConfirmQuery

router = APIRouter(tags=["console pages"], include_in_schema=False)


@router.get("/console")
def overview_page(
    request: Request,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    window: WindowQuery = Window.hour,
) -> HTMLResponse:
    """The overview: throughput, rewards, tiers, cost and queues over a chosen window."""
    windows = [w.value for w in Window]
    return renderer.page(request, settings, "overview.html", principal=principal,
                         window=window.value, windows=windows)  # fmt: skip


@router.get("/console/jobs")
def jobs_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    query: Annotated[JobQuery, Query()],
) -> HTMLResponse:
    """Jobs by principal, policy, status and creation time."""
    jobs = service.search_jobs(session, query)
    return renderer.page(
        request, settings, "jobs.html", principal=principal, query=query, jobs=jobs
    )


@router.get("/console/jobs/{job_id}")
def job_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    job_id: JobId,
    confirm: ConfirmQuery = None,
) -> HTMLResponse:
    """One job: each item's path up the ladder with verdicts and costs."""
    paths = service.job_paths(session, job_id)
    return flash.page(renderer, request, settings, "job.html", principal=principal,
                      paths=paths, confirm=confirm)  # fmt: skip


@router.post("/console/jobs/{job_id}/cancel")
def cancel_form(
    request: Request, settings: SettingsDep, job_id: JobId, principal: OperatorForm
) -> RedirectResponse:
    """The job page's confirmed Cancel button (a plain form): cancel, then back to the job
    page, which says what was done."""
    commit_then_send(lambda session: service.cancel(session, job_id, principal.name))
    said = f'Job {job_id} cancelled: its unfinished items end as infra_error "cancelled".'
    return flash.redirect(f"/console/jobs/{job_id}", request, settings, said)
