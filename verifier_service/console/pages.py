"""The operators' console pages: server-rendered shells whose script (static/console.js) draws
the numbers and charts from the console's JSON API (`endpoints.py`)."""

from __future__ import annotations

from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from verifier_service.auth import csrf
from verifier_service.auth.deps import CSRF_COOKIE, PUBLIC, OperatorPrincipal
from verifier_service.auth.forms import OperatorForm
from verifier_service.console import service
from verifier_service.console.calibration_endpoints import router as calibration_router
from verifier_service.console.endpoints import JobId
from verifier_service.console.endpoints import router as api_router
from verifier_service.console.schemas import JobQuery, Window
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.ladder.dispatch import deliver
from verifier_service.review.pages import CSP
from verifier_service.settings import Settings

HERE = FilePath(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
pages = APIRouter(tags=["console pages"], include_in_schema=False)
#: An operator posting one of the console's plain HTML forms (CSRF token in the form).


@pages.get("/console")
def overview_page(
    request: Request,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    window: Annotated[Window, Query(description="The time window: 1h, 24h or 7d.")] = Window.hour,
) -> HTMLResponse:
    """The overview: throughput, rewards, tiers, cost and queues over a chosen window."""
    windows = [w.value for w in Window]
    return _page(request, settings, "overview.html", principal=principal, window=window.value,
                 windows=windows)  # fmt: skip


def _page(request: Request, settings: Settings, name: str, **context: Any) -> HTMLResponse:
    """A page with the CSRF token its forms send (the nonce cookie made if missing)."""
    nonce, context["csrf_token"] = csrf.page_token(request.cookies, settings.auth)
    response = templates.TemplateResponse(request, name, context)
    if CSRF_COOKIE not in request.cookies:
        response.set_cookie(
            CSRF_COOKIE, nonce, httponly=True, secure=settings.auth.cookie_secure,
            samesite="strict", path="/",
        )  # fmt: skip
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = CSP
    return response


@pages.get("/console/jobs")
def jobs_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    query: Annotated[JobQuery, Query()],
) -> HTMLResponse:
    """Jobs by principal, policy, status and creation time."""
    jobs = service.search_jobs(session, query)
    return _page(request, settings, "jobs.html", principal=principal, query=query, jobs=jobs)


@pages.get("/console/jobs/{job_id}")
def job_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    job_id: JobId,
) -> HTMLResponse:
    """One job: each item's path up the ladder with verdicts and costs."""
    paths = service.job_paths(session, job_id)
    return _page(request, settings, "job.html", principal=principal, paths=paths)


@pages.post("/console/jobs/{job_id}/cancel")
def cancel_form(job_id: JobId, principal: OperatorForm) -> RedirectResponse:
    """The job page's Cancel button (a plain form): cancel, then back to the job page."""
    outgoing = retried_transaction(lambda session: service.cancel(session, job_id, principal.name))
    deliver(outgoing)
    return RedirectResponse(f"/console/jobs/{job_id}", status_code=303)


@pages.get("/static/console.css", dependencies=[PUBLIC])
def stylesheet() -> FileResponse:
    """The console's stylesheet."""
    return FileResponse(HERE / "static" / "console.css", media_type="text/css")


@pages.get("/static/console.js", dependencies=[PUBLIC])
def script() -> FileResponse:
    """The console's script: fetches the JSON and draws the tables and SVG charts."""
    return FileResponse(HERE / "static" / "console.js", media_type="text/javascript")


#: The console in one router (pages and their JSON API): app.py includes it with one line.
router = APIRouter()
router.include_router(pages)
router.include_router(api_router)
router.include_router(calibration_router)
