"""The console's people pages: gold items (list, add one from a task people were sent,
remove) and adjudication (tasks whose reviewers disagreed: decide); reviewers (pause, resume)
are on /console/reviewers (console/operations/pages.py), where the old address sends.
Server-rendered, plain forms with the CSRF token: every control works from the keyboard and
without script. Remove asks first (a GET form to `?confirm=...`, the page asks with
its "Yes" button focused) and say what they did once (web/flash.py). The JSON API for the same
is review/endpoints.py; both stand on the review domain's service."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse
from sqlalchemy.orm import Session

from verifier_service.auth.deps import PUBLIC, OperatorPrincipal
from verifier_service.auth.forms import OperatorForm
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.console.people import service
from verifier_service.console.render import renderer
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.core.errors import InvalidRequestError
from verifier_service.settings import Settings
from verifier_service.web import flash
from verifier_service.web.flash import ConfirmQuery

router = APIRouter(tags=["console pages"], include_in_schema=False)

TaskId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
TaskQuery = Annotated[str, Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]

T = TypeVar("T")


async def _form(request: Request) -> dict[str, str]:
    """The posted form's text fields (a rubric's dimensions are not known in advance)."""
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


async def _in_transaction(work: Callable[[Session], T]) -> T:
    return await run_in_threadpool(retried_transaction, work)


# --------------------------------------------------------------------------- gold items


@router.get("/console/people/gold")
def gold_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    confirm: ConfirmQuery = None,
) -> HTMLResponse:
    """Gold items with reviewers' record on each (remove one, after `?confirm=remove:<task>`
    asks), and the tasks people were sent that a new gold item can be made from."""
    found = service.gold_page(session)
    return flash.page(renderer, request, settings, "people_gold.html", principal=principal,
                      page=found, confirm=confirm,
                      excerpt=service.excerpt)  # fmt: skip


def _new_gold(
    request: Request,
    settings: Settings,
    principal: AuthenticatedPrincipal,
    found: Any,
    values: Mapping[str, str],
    tolerance: str,
    error: str | None,
) -> HTMLResponse:
    return renderer.page(request, settings, "people_gold_new.html",
                         status=422 if error else 200, principal=principal, task=found,
                         values=values, tolerance=tolerance, error=error)  # fmt: skip


@router.get("/console/people/gold/new")
def new_gold_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    task: TaskQuery,
) -> HTMLResponse:
    """The form that makes a gold item from a task: its item, what reviewers said, and a
    field per rubric dimension for the known answer."""
    found = service.source(session, task)
    return _new_gold(request, settings, principal, found, {}, "0", None)


@router.post("/console/people/gold", response_model=None)
async def add_gold_form(
    request: Request,
    settings: SettingsDep,
    principal: OperatorForm,
    task_id: Annotated[str, Form(min_length=1, max_length=64)],
    tolerance: Annotated[float, Form(ge=0, le=1e6)] = 0.0,
) -> HTMLResponse | RedirectResponse:
    """The Add gold item button: the task's item with the known answer joins its queue; a
    wrong answer shows the form again with what was wrong (422)."""
    form = await _form(request)
    try:
        made = await _in_transaction(
            lambda s: service.add_gold_from(s, task_id, form, tolerance, principal.name)
        )
    except InvalidRequestError as exc:
        found = await _in_transaction(lambda s: service.source(s, task_id))
        return _new_gold(request, settings, principal, found, form, str(tolerance), str(exc))
    said = f"Gold item {made.task_id[:12]} added: reviewers of its queue will be served it."
    return flash.redirect(f"/console/people/gold#gold-{made.task_id}", request, settings, said)


@router.post("/console/people/gold/{task_id}/remove")
def remove_gold_form(
    request: Request, settings: SettingsDep, task_id: TaskId, principal: OperatorForm
) -> RedirectResponse:
    """A gold item's confirmed Remove button: nobody is served it again; back to the list,
    which says so."""
    retried_transaction(lambda s: service.remove_gold(s, task_id, principal.name))
    said = (
        f"Gold item {task_id[:12]} removed: nobody is served it any more "
        "(its answers stay counted)."
    )
    return flash.redirect(f"/console/people/gold#gold-{task_id}", request, settings, said)


# --------------------------------------------------------------------------- adjudication


def _adjudication(
    request: Request,
    settings: Settings,
    principal: AuthenticatedPrincipal,
    session: Session,
    failed: tuple[str, str, Mapping[str, str]] | None = None,
) -> HTMLResponse:
    tasks = service.adjudications(session)
    return flash.page(renderer, request, settings, "people_adjudication.html",
                      status=422 if failed else 200, principal=principal, tasks=tasks,
                      failed=failed)  # fmt: skip


@router.get("/console/people/adjudication")
def adjudication_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
) -> HTMLResponse:
    """Tasks whose reviewers disagreed: the item, every answer, the agreement, and a form to
    decide."""
    return _adjudication(request, settings, principal, session)


@router.post("/console/people/adjudication/{task_id}", response_model=None)
async def decide_form(
    request: Request,
    settings: SettingsDep,
    principal: OperatorForm,
    task_id: TaskId,
    comment: Annotated[str, Form(max_length=20000)] = "",
) -> HTMLResponse | RedirectResponse:
    """A task's Decide button: the operator's answer is final and completes the item."""
    form = await _form(request)
    try:
        await _in_transaction(lambda s: service.decide(s, task_id, form, comment, principal.name))
    except InvalidRequestError as exc:
        failed = (task_id, str(exc), form)
        return await _in_transaction(
            lambda s: _adjudication(request, settings, principal, s, failed)
        )
    said = f"Task {task_id[:12]} decided: its item is complete."
    return flash.redirect("/console/people/adjudication", request, settings, said)


# --------------------------------------------------------------------------- reviewers


@router.api_route("/console/people/reviewers", methods=["GET", "POST"], dependencies=[PUBLIC])
def reviewers_moved(request: Request) -> RedirectResponse:
    """The reviewers are on one page, /console/reviewers: old links, bookmarks and forms still
    reach it (308 keeps a form post a post, and the query's `?confirm=pause&reviewer=`). The
    redirect itself is public: it reveals nothing, and /console/reviewers asks for an operator."""
    query = request.url.query
    return RedirectResponse("/console/reviewers" + (f"?{query}" if query else ""), 308)
