"""The reviewers' web pages: queues, the task page and its no-JavaScript form fallback.

Server-rendered (Jinja2) on the review service; the page's script (the ES modules of
static/review/, started by main.js) talks to the JSON API of `endpoints.py` for heartbeats,
drafts, submit and the preloaded next task.
"""

from __future__ import annotations

import uuid
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from tiers.human import QUEUE_PATTERN
from verifier_service.auth.deps import ReviewerPrincipal
from verifier_service.auth.forms import ReviewerForm
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import retried_transaction, transaction
from verifier_service.core.deps import SettingsDep
from verifier_service.core.errors import DomainError, InvalidRequestError
from verifier_service.review import render, service
from verifier_service.review.schemas import AnswerIn, Dimension, LeaseView, Rubric
from verifier_service.settings import Settings
from verifier_service.web.render import Renderer

HERE = FilePath(__file__).parent
renderer = Renderer(HERE / "templates")
renderer.env.filters["markdown_inline"] = render.markdown_inline
pages = APIRouter(tags=["review pages"], include_in_schema=False)

QueueName = Annotated[str, Path(pattern=QUEUE_PATTERN, description="A queue.")]
LeaseId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="A lease's id.")]


def _page(
    request: Request, settings: Settings, name: str, status: int = 200, **context: Any
) -> HTMLResponse:
    """A review page on the web layer (CSRF token, nonce cookie, security headers)."""
    return renderer.page(request, settings, name, status, **context)


def _message(
    request: Request,
    settings: Settings,
    principal: AuthenticatedPrincipal,
    heading: str,
    message: str,
    *,
    queue: str | None = None,
    status: int = 200,
    alert: bool = False,
) -> HTMLResponse:
    return _page(request, settings, "message.html", status, principal=principal,
                 heading=heading, message=message, queue=queue, alert=alert)  # fmt: skip


def _state_of(request: Request, principal: AuthenticatedPrincipal) -> str | None:
    lease_id = request.path_params.get("lease_id")
    if not isinstance(lease_id, str):
        return None
    with transaction() as session:
        return service.lease_state(session, lease_id, principal.name)


def _lease_problem(
    request: Request, settings: Settings, principal: AuthenticatedPrincipal, exc: DomainError
) -> HTMLResponse:
    """A lease that is gone (404) or no longer this reviewer's (409), said plainly."""
    if exc.status_code == 409 and _state_of(request, principal) == "answered":
        text = (
            "You answered this task and your answer counts (an answer can be undone only in "
            "the few seconds after you submit it, while the next task is on screen)."
        )
        return _message(request, settings, principal, "You answered this task", text,
                        queue=None, status=409)  # fmt: skip
    if exc.status_code == 409:
        text = (
            "Your hold on this task expired (the page stopped sending heartbeats, or it was "
            "released or answered), so it went back to the queue."
        )
        return _message(request, settings, principal, "This task is no longer yours", text,
                        queue=None, status=409, alert=True)  # fmt: skip
    if exc.status_code == 404:
        return _message(request, settings, principal, "No such task", "This task does not "
                        "exist (or was never yours).", status=404, alert=True)  # fmt: skip
    if exc.status_code == 403:
        return _message(request, settings, principal, "Reviewing paused", exc.message,
                        status=403, alert=True)  # fmt: skip
    raise exc


# --- what the task page shows --------------------------------------------------------------------


def _chosen(rubric: Rubric, draft: dict[str, Any] | None) -> dict[str, str]:
    """Form field -> value as the form writes it, from a saved draft (an AnswerIn's shape)."""
    if not isinstance(draft, dict):
        return {}
    out: dict[str, str] = {}
    found_values, found_steps = draft.get("values"), draft.get("steps")
    values: dict[str, Any] = found_values if isinstance(found_values, dict) else {}
    steps: list[Any] = found_steps if isinstance(found_steps, list) else []
    for j, dim in enumerate(rubric.dimensions):
        if dim.name in values:
            out[f"v{j}"] = render.number(values[dim.name])
        for i, step in enumerate(steps):
            if isinstance(step, dict) and dim.name in step:
                out[f"s{i}_{j}"] = render.number(step[dim.name])
    if isinstance(draft.get("comment"), str):
        out["comment"] = draft["comment"]
    return out


def _task_context(view: LeaseView) -> dict[str, Any]:
    task = view.task
    steps: list[dict[str, Any]] = []
    overall = task.verdicts
    if task.kind == "trajectory":
        # each step's lower-tier verdicts beside it; the outcome's in the verdicts panel
        overall = [v for v in task.verdicts if v.get("step") is None]
        for i, step in enumerate(render.trajectory_steps(task.payload)):
            act = step.get("action")
            kind = act.get("kind", "json") if isinstance(act, dict) else "json"
            own = [v for v in task.verdicts if v.get("step") == i]
            steps.append(
                {
                    "kind": kind,
                    "action": render.action(step),
                    "observation": render.observation(step),
                    "verdicts": render.verdict_list(own) if own else "",
                }
            )
    return {
        "lease": view,
        "task": task,
        "steps": steps,
        "item_html": render.candidate(task.kind, task.payload) if not steps else "",
        "final_html": render.final_answer(task.payload) if steps else "",
        "reference_html": render.reference(task.reference),
        "verdicts_html": render.verdict_list(overall),
        "guidelines_html": render.markdown(task.guidelines) if task.guidelines.strip() else "",
        "show_guidelines": True,
        "chosen": _chosen(task.rubric, view.draft),
        # One key per answer: a submit sent again (a retry, a double click) records one answer.
        "submit_key": uuid.uuid4().hex,
    }


def _value(dim: Dimension, raw: str) -> float | str:
    if dim.type == "label":
        return raw
    try:
        return float(int(raw))
    except ValueError:
        raise InvalidRequestError(
            f"dimension {dim.name!r}: {raw!r} is not a whole number",
            hint=f"pick a score from {dim.min} to {dim.max}",
        ) from None


def answer_from_form(rubric: Rubric, form: FormData, n_steps: int) -> AnswerIn:
    """The rubric form (fields v<j>, s<i>_<j>, comment) as an answer; what is missing is left
    for the service to name."""
    values: dict[str, float | str] = {}
    steps: list[dict[str, float | str]] | None = [] if rubric.per_step and n_steps else None
    for j, dim in enumerate(rubric.dimensions):
        raw = form.get(f"v{j}")
        if isinstance(raw, str) and raw:
            values[dim.name] = _value(dim, raw)
    if steps is not None:
        for i in range(n_steps):
            judged: dict[str, float | str] = {}
            for j, dim in enumerate(rubric.dimensions):
                raw = form.get(f"s{i}_{j}")
                if isinstance(raw, str) and raw:
                    judged[dim.name] = _value(dim, raw)
            steps.append(judged)
    comment = form.get("comment")
    text = comment.strip() if isinstance(comment, str) else ""
    return AnswerIn(values=values, comment=text or None, steps=steps)


# --- pages ---------------------------------------------------------------------------------------


@pages.get("/review")
def queues_page(
    request: Request, settings: SettingsDep, principal: ReviewerPrincipal
) -> HTMLResponse:
    """The queues this reviewer can work on, and their own numbers."""
    with transaction() as session:
        queues = service.queues(session, principal.name)
        stats = service.stats(session, principal.name)
    return _page(request, settings, "queues.html", principal=principal, queues=queues, stats=stats)


@pages.get("/review/{queue}")
def next_task_page(
    request: Request, queue: QueueName, settings: SettingsDep, principal: ReviewerPrincipal
) -> Response:
    """Take the next task of a queue (a lease) and go to its page; or say there is none."""
    try:
        # Retried as the API's next is: a connection dropped since its last use, or a deadlock
        # PostgreSQL ended (a claim may wait on another's row lock), costs the reviewer nothing.
        # A task she still holds in the queue (a tab she closed) comes back first.
        view = retried_transaction(
            lambda s: service.next_task(s, principal.name, queue, resume=True)
        )
    except DomainError as exc:
        if exc.status_code == 404:
            return _message(request, settings, principal, "No such queue", exc.message,
                            status=404, alert=True)  # fmt: skip
        return _lease_problem(request, settings, principal, exc)
    if view is None:
        return _message(request, settings, principal, "No more tasks",
                        f"There is nothing more for you in the queue {queue} right now: every "
                        "waiting task is answered, held by someone else or answered by you.",
                        )  # fmt: skip
    # Committed before the redirect: the task page reads the lease back.
    return RedirectResponse(f"/review/leases/{view.lease_id}", status_code=303)


@pages.get("/review/leases/{lease_id}")
def task_page(
    request: Request, lease_id: LeaseId, settings: SettingsDep, principal: ReviewerPrincipal
) -> HTMLResponse:
    """One task under this reviewer's lease: guidelines, the item, verdicts and the rubric."""
    try:
        view, left = retried_transaction(
            lambda s: (
                (held := service.lease(s, lease_id, principal.name)),
                service.waiting(s, held.task.queue, principal.name),
            )
        )
    except DomainError as exc:
        return _lease_problem(request, settings, principal, exc)
    context = _task_context(view)
    return _page(request, settings, "task.html", principal=principal, left=left, **context)


@pages.post("/review/leases/{lease_id}/submit")
async def submit_form(
    request: Request, lease_id: LeaseId, settings: SettingsDep, principal: ReviewerForm
) -> Response:
    """The rubric form sent without JavaScript: record the answer, then the next task."""
    form = await request.form()
    key = form.get("submit_key")
    submit_key = key if isinstance(key, str) and 0 < len(key) <= 128 else uuid.uuid4().hex

    def submit(session: Session) -> LeaseView:
        view = service.lease(session, lease_id, principal.name)
        n_steps = len(render.trajectory_steps(view.task.payload))
        answer = answer_from_form(view.task.rubric, form, n_steps)
        service.submit(session, lease_id, principal.name, answer, submit_key)
        return view

    def record() -> Response:
        try:
            view = retried_transaction(submit)  # the submit key makes a second try a no-op
        except DomainError as exc:
            if exc.status_code in (403, 404, 409):
                return _lease_problem(request, settings, principal, exc)
            # An answer outside the rubric: the page again, saying what was wrong.
            with transaction() as session:
                view = service.lease(session, lease_id, principal.name)
                left = service.waiting(session, view.task.queue, principal.name)
            context = _task_context(view)
            context["error"] = exc.message
            return _page(request, settings, "task.html", 422, principal=principal, left=left,
                         **context)  # fmt: skip
        return RedirectResponse(f"/review/{view.task.queue}", status_code=303)

    return await run_in_threadpool(record)


@pages.post("/review/leases/{lease_id}/skip")
def skip_form(
    request: Request, lease_id: LeaseId, settings: SettingsDep, principal: ReviewerForm
) -> Response:
    """Skip a task (the form without JavaScript), then the next task."""

    def skip(session: Session) -> LeaseView:
        view = service.lease(session, lease_id, principal.name)
        service.skip(session, lease_id, principal.name)
        return view

    try:
        view = retried_transaction(skip)
    except DomainError as exc:
        return _lease_problem(request, settings, principal, exc)
    return RedirectResponse(f"/review/{view.task.queue}", status_code=303)
