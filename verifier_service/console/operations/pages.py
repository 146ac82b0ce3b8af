"""The console's operations pages: queues and workers (pause, resume, drain, each worker's
tasks), a job's retry button, and the reviewers (pace, gold accuracy, pause and resume; the one
page about reviewers: /console/people/reviewers sends here). Server-rendered, plain forms with
the CSRF token, so that every control works from the keyboard and without script."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.auth.forms import OperatorForm
from verifier_service.console.operations import service as ops_service
from verifier_service.console.params import JobId, NodeName, QueueName
from verifier_service.console.render import renderer
from verifier_service.core.db import retried_transaction, transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.ladder.dispatch import commit_then_send
from verifier_service.web import flash
from verifier_service.web.flash import ConfirmQuery

router = APIRouter(tags=["console pages"], include_in_schema=False)

#: The reviewer a Pause button asks about (`?confirm=pause&reviewer=<name>`; escaped when shown).
ReviewerQuery = Annotated[str | None, Query(max_length=128)]


@router.get("/console/queues")
def operations_page(
    request: Request,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    confirm: ConfirmQuery = None,
) -> HTMLResponse:
    """Queues and workers: pause and resume a queue, drain a worker, see each worker's tasks."""
    ops = ops_service.operations(settings.broker_url)
    return flash.page(renderer, request, settings, "ops.html", principal=principal, ops=ops,
                      confirm=confirm)  # fmt: skip


@router.post("/console/queues/{queue}/{action}")
def queue_form(
    request: Request, settings: SettingsDep, principal: OperatorForm, queue: QueueName, action: str
) -> RedirectResponse:
    """The confirmed Pause and the Resume buttons (plain forms): change the queue, then back to
    the page, which says what was done."""
    with transaction() as session:
        if action == "pause":
            ops_service.pause(session, settings.broker_url, queue, principal.name)
            said = f"Queue {queue} paused: workers take none of its tasks until it resumes."
        elif action == "resume":
            ops_service.resume(session, settings.broker_url, queue, principal.name)
            said = f"Queue {queue} resumed: workers take its tasks again."
        else:
            return RedirectResponse("/console/queues", status_code=303)
    return flash.redirect(f"/console/queues#queue-{queue}", request, settings, said)


@router.post("/console/workers/{node}/{action}")
def worker_form(
    request: Request, settings: SettingsDep, principal: OperatorForm, node: NodeName, action: str
) -> RedirectResponse:
    """The confirmed Drain and the Undrain buttons (plain forms)."""
    if action not in ("drain", "undrain"):
        return RedirectResponse("/console/queues#workers", status_code=303)
    with transaction() as session:
        ops_service.drain(session, settings.broker_url, node, principal.name, on=action == "drain")
    said = (
        f"Worker {node} draining: it takes no new work and finishes what it holds."
        if action == "drain"
        else f"Worker {node} undrained: it takes work again."
    )
    return flash.redirect("/console/queues#workers", request, settings, said)


@router.post("/console/jobs/{job_id}/retry")
def retry_form(
    request: Request, settings: SettingsDep, job_id: JobId, principal: OperatorForm
) -> RedirectResponse:
    """The job page's Retry button: its infra_error items climb again; back to the job."""
    _, n = commit_then_send(lambda session: ops_service.retry(session, job_id, principal.name))
    said = f"{n} infra_error item{'' if n == 1 else 's'} sent up the ladder again."
    return flash.redirect(f"/console/jobs/{job_id}", request, settings, said)


@router.get("/console/reviewers")
def reviewers_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    confirm: ConfirmQuery = None,
    reviewer: ReviewerQuery = None,
) -> HTMLResponse:
    """Reviewers: pace, accuracy on gold items and state, with Pause (after
    `?confirm=pause&reviewer=<name>` asks) and Resume; each review queue's agreement."""
    found = ops_service.reviewers(session)
    asked = (reviewer or "").strip() if confirm == "pause" else ""
    return flash.page(renderer, request, settings, "reviewers.html", principal=principal,
                      reviewers=found, asked=asked)  # fmt: skip


@router.post("/console/reviewers")
def pause_form(
    request: Request,
    settings: SettingsDep,
    principal: OperatorForm,
    reviewer: Annotated[str, Form(min_length=1, max_length=128)],
    action: Annotated[Literal["pause", "resume"], Form()],
) -> RedirectResponse:
    """The confirmed Pause button and the Resume button (and pausing someone by name): a
    paused reviewer's next claim is refused."""
    name = reviewer.strip()
    paused = action == "pause"
    retried_transaction(lambda s: ops_service.set_paused(s, name, paused, principal.name))
    said = (
        f"{name} is paused: their next claim is refused."
        if paused
        else f"{name} may take tasks again."
    )
    return flash.redirect("/console/reviewers", request, settings, said)
