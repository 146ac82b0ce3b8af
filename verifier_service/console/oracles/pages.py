"""The console's oracle pages: every oracle at a glance, and one oracle's capacity used this
period, items in flight, turnaround, overdue batches and latest results, and how the configured
learned surrogate agrees with those results (`?field=` picks the result field). Pause, Resume and
Resend are plain forms with the CSRF token, so they work from the keyboard and without script."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from tiers.oracle import NAME_PATTERN
from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.auth.forms import OperatorForm
from verifier_service.console.oracles import service as pages_service
from verifier_service.console.render import renderer
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.oracle import service as oracle_service

router = APIRouter(tags=["console pages"], include_in_schema=False)

BATCH_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"
OracleName = Annotated[str, Path(pattern=NAME_PATTERN, description="An oracle's name.")]
BatchId = Annotated[str, Path(pattern=BATCH_PATTERN, description="A batch's id.")]
ResentQuery = Annotated[str | None, Query(pattern=BATCH_PATTERN)]
FieldQuery = Annotated[
    str | None,
    Query(
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="The result field the surrogate is scored on.",
    ),
]


@router.get("/console/oracles")
def oracles_page(
    request: Request, session: SessionDep, settings: SettingsDep, principal: OperatorPrincipal
) -> HTMLResponse:
    """Every oracle: paused or not, capacity used this period, in flight, overdue, turnaround."""
    found = pages_service.oracles(session)
    return renderer.page(
        request, settings, "oracles.html", principal=principal, oracles=found,
        duration=pages_service.duration,
    )  # fmt: skip


@router.get("/console/oracles/{oracle}")
def oracle_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    oracle: OracleName,
    resent: ResentQuery = None,
    field: FieldQuery = None,
) -> HTMLResponse:
    """One oracle: its figures, its batches (Resend) and latest results; Pause or Resume; the
    configured surrogate against its results for `field` (default: the field it scores)."""
    page = pages_service.oracle_page(session, oracle)
    surrogate = pages_service.surrogate_check(
        session, oracle, page.definition, settings.chem.surrogate_model_path, field
    )
    return renderer.page(
        request, settings, "oracle.html", principal=principal, page=page, resent=resent,
        surrogate=surrogate, results_scored=pages_service.RESULTS_SCORED,
        duration=pages_service.duration,
    )  # fmt: skip


@router.post("/console/oracles/{oracle}/pause")
def pause_form(oracle: OracleName, principal: OperatorForm) -> RedirectResponse:
    """The Pause button: nothing more is selected or claimed; back to the oracle's page."""
    retried_transaction(lambda s: oracle_service.set_paused(s, oracle, True, principal.name))
    return RedirectResponse(f"/console/oracles/{oracle}", status_code=303)


@router.post("/console/oracles/{oracle}/resume")
def resume_form(oracle: OracleName, principal: OperatorForm) -> RedirectResponse:
    """The Resume button: what waited is selected now; back to the oracle's page."""
    retried_transaction(lambda s: oracle_service.set_paused(s, oracle, False, principal.name))
    return RedirectResponse(f"/console/oracles/{oracle}", status_code=303)


@router.post("/console/oracles/{oracle}/batches/{batch_id}/resend")
def resend_form(oracle: OracleName, batch_id: BatchId, principal: OperatorForm) -> RedirectResponse:
    """A batch's Resend button: pushed anew, or given back to be claimed; back to the page."""
    retried_transaction(lambda s: oracle_service.resend(s, oracle, batch_id, principal.name))
    return RedirectResponse(f"/console/oracles/{oracle}?resent={batch_id}#batches", status_code=303)
