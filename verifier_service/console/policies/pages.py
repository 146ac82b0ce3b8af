"""The console's policy pages: the list, a policy's versions with two side by side, the draft
editor (errors at their lines), a version's replay report (tables and Chart.js charts drawn from
`policy_endpoints`' JSON), and the activate / roll back forms (operator only, CSRF, audited)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.auth.forms import OperatorForm
from verifier_service.console.params import DraftText, OptionalVersion, ReplayLimit
from verifier_service.console.policies import service
from verifier_service.console.policies.schemas import DraftCheck, PolicyDetail
from verifier_service.console.render import renderer
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.policies import service as policies
from verifier_service.policies.params import PolicyName, VersionNumber
from verifier_service.web import flash
from verifier_service.web.flash import ConfirmQuery

router = APIRouter(tags=["console pages"], include_in_schema=False)


@router.get("/console/policies")
def policies_page(
    request: Request, session: SessionDep, settings: SettingsDep, principal: OperatorPrincipal
) -> HTMLResponse:
    """Every policy, its active version marked."""
    return renderer.page(request, settings, "policies.html", principal=principal,
                 policies=service.rows(session))  # fmt: skip


def _pair(detail: PolicyDetail, a: int | None, b: int | None) -> tuple[int, int]:
    """The two versions to compare: those asked for, else the active one and the newest."""
    numbers = [v.version for v in detail.versions]
    newest = numbers[-1]
    if b is None:
        b = newest
    if a is None:
        a = detail.active_version if detail.active_version not in (None, b) else None
        if a is None:
            earlier = [n for n in numbers if n < b]
            a = earlier[-1] if earlier else b
    return a, b


@router.get("/console/policies/{name}")
def policy_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    name: PolicyName,
    a: OptionalVersion = None,
    b: OptionalVersion = None,
    saved: OptionalVersion = None,
    confirm: ConfirmQuery = None,
) -> HTMLResponse:
    """A policy's versions (activate, replay, edit, roll back) and two of them side by side."""
    detail = service.detail(session, name)
    first, second = _pair(detail, a, b)
    diff = service.diff(session, name, first, second)
    return flash.page(renderer, request, settings, "policy.html", principal=principal,
                      policy=detail, diff=diff, saved=saved, confirm=confirm)  # fmt: skip


@router.get("/console/policies/{name}/edit")
def editor_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    name: PolicyName,
    start: Annotated[int | None, Query(alias="from", ge=1, le=2**31 - 1)] = None,
) -> HTMLResponse:
    """The draft editor, filled with a stored version (default: the active one, else the
    newest)."""
    version, text = _base(session, name, start)
    return _editor(request, settings, principal, name, version, text, text, None)


def _base(session: SessionDep, name: str, start: int | None) -> tuple[int, str]:
    """The version a draft starts from (default: the active one, else the newest), and its
    text as stored (comments kept): what the draft's diff is taken against."""
    detail = service.detail(session, name)
    version = start or detail.active_version or detail.versions[-1].version
    return version, service.editor_text(policies.stored_version(session, name, version))


def _editor(
    request: Request,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    name: str,
    start: int,
    base: str,
    text: str,
    check: DraftCheck | None,
    *,
    refuse: bool = True,
) -> HTMLResponse:
    lines = text.splitlines()
    by_line: dict[int, list[str]] = {}
    for error in check.errors if check else []:
        if error.line is not None:
            by_line.setdefault(error.line, []).append(f"{error.loc}: {error.msg}")
    diff = service.draft_diff(start, base, text)
    response = renderer.page(request, settings, "policy_edit.html", principal=principal,
                     policy_name=name, start=start, text=text, check=check,
                     lines=lines, by_line=by_line, diff=diff)  # fmt: skip
    if refuse and check is not None and not check.valid:
        response.status_code = 422
    return response


@router.post("/console/policies/{name}/edit", response_model=None)
def save_draft_form(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorForm,
    name: PolicyName,
    text: DraftText,
    start: Annotated[int | None, Form(ge=1, le=2**31 - 1)] = None,
    preview: Annotated[bool, Form()] = False,
) -> HTMLResponse | RedirectResponse:
    """The editor's Save button: store the draft as an inactive version, or show its problems
    at their lines (422); its "Check and show changes" button: the problems and the diff
    against the version it started from, nothing stored."""
    check = service.check_draft(name, text)
    version, base = _base(session, name, start)
    if preview or not check.valid:
        return _editor(request, settings, principal, name, version, base, text, check,
                       refuse=not preview)  # fmt: skip
    saved = service.save_draft(session, name, text, principal.name)
    active = policies.summary(session, name).active_version
    compare = f"a={active}&" if active is not None else ""
    return RedirectResponse(
        f"/console/policies/{name}?{compare}b={saved}&saved={saved}", status_code=303
    )


@router.get("/console/policies/{name}/versions/{version}/replay")
def replay_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorPrincipal,
    name: PolicyName,
    version: VersionNumber,
    limit: ReplayLimit = 500,
    confirm: ConfirmQuery = None,
) -> HTMLResponse:
    """A version replayed over the policy's stored items against the active one: tables and
    charts (drawn from the JSON API), and its Activate button's question (`?confirm=activate`)."""
    detail = service.detail(session, name)
    policies.stored_version(session, name, version)  # 404 before drawing a shell for nothing
    return flash.page(renderer, request, settings, "policy_replay.html", principal=principal,
                      policy=detail, version=version, limit=limit, confirm=confirm)  # fmt: skip


@router.post("/console/policies/{name}/versions/{version}/activate")
def activate_form(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorForm,
    name: PolicyName,
    version: VersionNumber,
) -> RedirectResponse:
    """A version's confirmed Activate button: make it active (audited), back to the policy
    page, which says so."""
    before = service.detail(session, name).active_version
    service.activate(session, name, version, principal.name)
    was = f" (was v{before})" if before is not None and before != version else ""
    said = f"v{version} of {name} is active{was}: new jobs use it."
    return flash.redirect(f"/console/policies/{name}", request, settings, said)


@router.post("/console/policies/{name}/rollback")
def rollback_form(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: OperatorForm,
    name: PolicyName,
) -> RedirectResponse:
    """The confirmed Roll back button: the version active before the current one again
    (audited)."""
    before = service.detail(session, name).active_version
    after = service.rollback(session, name, principal.name).active_version
    said = f"{name} rolled back from v{before} to v{after}: new jobs use v{after}."
    return flash.redirect(f"/console/policies/{name}", request, settings, said)
