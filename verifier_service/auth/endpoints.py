"""HTTP routes of identity and access: the sign-in pages, keys and the audit log (admins)."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from pathlib import Path as FilePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from verifier_service.auth import csrf, limits, service
from verifier_service.auth.deps import (
    CSRF_COOKIE,
    PUBLIC,
    SESSION_COOKIE,
    AdminPrincipal,
    AnyPrincipal,
    rate_limiter,
)
from verifier_service.auth.forms import AccountForm
from verifier_service.auth.schemas import (
    AuditEventOut,
    KeyCreatedOut,
    KeyIn,
    KeyOut,
    PrincipalOut,
)
from verifier_service.core.db import retried_transaction, transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.core.errors import InvalidRequestError
from verifier_service.core.notify import sync_client
from verifier_service.settings import Settings

HERE = FilePath(__file__).parent
ACTION_PATTERN = r"^[a-z][a-z_.]{0,63}$"
templates = Jinja2Templates(directory=HERE / "templates")

router = APIRouter(tags=["auth"])
pages = APIRouter(tags=["sign-in"], include_in_schema=False)

# --- API -------------------------------------------------------------------------------------


@router.get("/v1/me")
def me(principal: AnyPrincipal) -> PrincipalOut:
    """Who the service takes the caller to be, and with which roles."""
    return PrincipalOut(
        name=principal.name,
        roles=sorted(principal.roles),
        via=principal.via,
        on_behalf_of=principal.on_behalf_of,
    )


@router.get("/v1/keys")
def list_keys(session: SessionDep, _: AdminPrincipal) -> list[KeyOut]:
    """Every API key (prefix, principal, roles, state); never the keys themselves."""
    return service.list_keys(session)


@router.post("/v1/keys", status_code=201)
def create_key(body: KeyIn, session: SessionDep, principal: AdminPrincipal) -> KeyCreatedOut:
    """A new API key, shown this once; only its hash is stored."""
    return service.create_key(
        session,
        name=body.name,
        roles=body.roles,
        created_by=principal.name,
        expires_in=timedelta(seconds=body.expires_in_s) if body.expires_in_s else None,
        requests_per_min=body.requests_per_min,
        items_per_min=body.items_per_min,
    )


KeyRef = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_]{1,64}$", description="A key's id or prefix (vsk_...).")
]


@router.post("/v1/keys/{key_ref}/revoke")
def revoke_key(key_ref: KeyRef, settings: SettingsDep, principal: AdminPrincipal) -> KeyOut:
    """Revoke a key by id or prefix: it stops working at once."""
    with transaction() as session:
        revoked, key_hash = service.revoke_key(session, key_ref, principal.name)
    # After the commit: a request in between must not cache the key as still valid.
    rate_limiter(settings.broker_url).forget(key_hash)
    return revoked


@router.get("/v1/audit")
def audit_log(
    session: SessionDep,
    _: AdminPrincipal,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before_id: Annotated[
        int | None, Query(ge=1, le=2**31 - 1, description="Page: events older than this id.")
    ] = None,
    action: Annotated[
        str | None,
        Query(pattern=ACTION_PATTERN, description="Only this action, e.g. key.create."),
    ] = None,
) -> list[AuditEventOut]:
    """Who did what to policies, keys and users, newest first."""
    return service.audit_events(session, limit=limit, before_id=before_id, action=action)


# --- pages -----------------------------------------------------------------------------------


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _safe_next(target: str | None) -> str:
    # Only paths on this site: "//host" and "/\\host" would leave it.
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/account"


def _page(
    request: Request,
    settings: Settings,
    name: str,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render a page with the CSRF nonce (cookie; made when missing) and its signed token
    (form field). Keeping the nonce lets forms in several tabs stay valid."""
    nonce, context["csrf_token"] = csrf.page_token(request.cookies, settings.auth)
    response = templates.TemplateResponse(request, name, context, status_code=status)
    _set_nonce(response, settings, nonce)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'"
    )
    return response


def _set_nonce(response: Response, settings: Settings, nonce: str) -> None:
    response.set_cookie(
        CSRF_COOKIE, nonce, httponly=True, secure=settings.auth.cookie_secure, samesite="strict",
        path="/",
    )  # fmt: skip


def _csrf_ok(request: Request, settings: Settings, token: str) -> bool:
    return csrf.token_valid(request.cookies, settings.auth, token)


@pages.get("/signin", dependencies=[PUBLIC])
def signin_page(
    request: Request, settings: SettingsDep, next: Annotated[str | None, Query()] = None
) -> HTMLResponse:
    """The sign-in form."""
    return _page(request, settings, "signin.html", next=_safe_next(next), username="")


@pages.post("/signin", dependencies=[PUBLIC])
async def signin(
    request: Request,
    settings: SettingsDep,
    username: Annotated[str, Form(max_length=128)],
    password: Annotated[str, Form(max_length=1024)],
    csrf_token: Annotated[str, Form(max_length=512)] = "",
    next: Annotated[str, Form(max_length=2048)] = "/account",
) -> Response:
    """Check a username and password; on success start a session and go on to `next`."""
    target = _safe_next(next)

    def again(status: int, error: str) -> HTMLResponse:
        return _page(
            request, settings, "signin.html", status, next=target, username=username, error=error
        )

    if not _csrf_ok(request, settings, csrf_token):
        return again(403, "This form expired. Please sign in again.")
    throttle = limits.SignInThrottle(sync_client(settings.broker_url), settings.auth)
    address = _address(request)
    wait = await run_in_threadpool(throttle.wait_s, username, address)
    if wait:
        page = again(429, f"Too many failed attempts. Try again in {wait} s.")
        page.headers["Retry-After"] = str(wait)
        return page

    def check(session: Session) -> str | None:
        principal = service.check_password(session, username, password)
        if principal is None:
            return None
        return service.start_web_session(session, principal, settings.auth.session_ttl_s)

    token = await run_in_threadpool(retried_transaction, check)
    if token is None:
        await run_in_threadpool(throttle.failed, username, address)
        return again(400, "Wrong username or password.")
    await run_in_threadpool(throttle.succeeded, username, address)
    response = RedirectResponse(target, status_code=303)
    # A new nonce with the new session: tokens of the signed-out pages stop working.
    _set_nonce(response, settings, csrf.Csrf.new_nonce())
    response.set_cookie(
        SESSION_COOKIE, token, max_age=int(settings.auth.session_ttl_s), httponly=True,
        secure=settings.auth.cookie_secure, samesite="lax", path="/",
    )  # fmt: skip
    return response


@pages.get("/account")
def account(
    request: Request,
    settings: SettingsDep,
    principal: AnyPrincipal,
    password: Annotated[Literal["changed"] | None, Query()] = None,
) -> HTMLResponse:
    """Who is signed in, the password form and the sign-out button."""
    return _page(request, settings, "account.html", principal=principal, errors={},
                 changed=password == "changed")  # fmt: skip


@pages.post("/account/password")
async def change_password(
    request: Request,
    settings: SettingsDep,
    principal: AccountForm,
    current_password: Annotated[str, Form(max_length=1024)] = "",
    new_password: Annotated[str, Form(max_length=1024)] = "",
    confirm_password: Annotated[str, Form(max_length=1024)] = "",
) -> Response:
    """Change your own password; your other signed-in browsers are signed out."""

    def again(status: int, field: str, error: str) -> HTMLResponse:
        return _page(request, settings, "account.html", status, principal=principal,
                     errors={field: error})  # fmt: skip

    if principal.via != "session":
        return again(400, "current_password", "Only a person signed in on this site changes a "
                     "password here; programs' keys are replaced with `keys create`.")  # fmt: skip
    if new_password != confirm_password:
        return again(400, "confirm_password", "The two new passwords differ.")
    # Guessing the current password here counts as failed sign-ins do.
    throttle = limits.SignInThrottle(sync_client(settings.broker_url), settings.auth)
    address = _address(request)
    wait = await run_in_threadpool(throttle.wait_s, principal.name, address)
    if wait:
        page = again(429, "current_password", f"Too many failed attempts. Try again in {wait} s.")
        page.headers["Retry-After"] = str(wait)
        return page

    def store(session: Session) -> None:
        service.change_password(
            session, principal.name, current_password, new_password,
            request.cookies.get(SESSION_COOKIE),
        )  # fmt: skip

    def change() -> str | None:
        try:
            retried_transaction(store)
        except InvalidRequestError as exc:
            return exc.message
        return None

    problem = await run_in_threadpool(change)
    if problem == "the current password is wrong":
        await run_in_threadpool(throttle.failed, principal.name, address)
        return again(400, "current_password", "The current password is wrong.")
    if problem is not None:
        return again(400, "new_password", problem[:1].upper() + problem[1:] + ".")
    await run_in_threadpool(throttle.succeeded, principal.name, address)
    return RedirectResponse("/account?password=changed", status_code=303)


@pages.post("/signout", dependencies=[PUBLIC])
def signout(
    request: Request,
    settings: SettingsDep,
    csrf_token: Annotated[str, Form(max_length=512)] = "",
) -> Response:
    """End the session (its row is deleted, so the cookie is worthless even if kept)."""
    if not _csrf_ok(request, settings, csrf_token):
        return _page(request, settings, "signin.html", 403, next="/account", username="",
                     error="This form expired. Please try again.")  # fmt: skip
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        retried_transaction(lambda session: service.end_web_session(session, token))
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", secure=settings.auth.cookie_secure,
                           httponly=True, samesite="lax")  # fmt: skip
    return response


@pages.get("/static/auth.css", dependencies=[PUBLIC])
def stylesheet() -> FileResponse:
    """The pages' stylesheet, served by the app itself (no CDN: users may be offline)."""
    return FileResponse(HERE / "static" / "auth.css", media_type="text/css")


class _RedactKeysInPaths(logging.Filter):
    """Access logs print the request path: hide keys sent in `/k/{api_key}/...` paths."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _KEY_IN_PATH.sub("/k/***/", a) if isinstance(a, str) else a for a in record.args
            )
        return True


_KEY_IN_PATH = re.compile(r"/k/[^/?\s]+/")


def redact_keys_in_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactKeysInPaths) for f in access.filters):
        access.addFilter(_RedactKeysInPaths())
