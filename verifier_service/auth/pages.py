"""The sign-in pages: sign in, your account (password, sign out) and the landing page at `/`
that links to the apps the signed-in person's roles open."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from verifier_service.auth import limits, service
from verifier_service.auth.deps import (
    PUBLIC,
    SESSION_COOKIE,
    AnyPrincipal,
    app_routes,
    declared_access,
    principal_of,
)
from verifier_service.auth.errors import NotAuthenticatedError
from verifier_service.auth.forms import AccountForm
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import SettingsDep
from verifier_service.core.errors import InvalidRequestError
from verifier_service.core.notify import sync_client
from verifier_service.settings import Settings
from verifier_service.web import csrf
from verifier_service.web.render import Renderer, keep_nonce

renderer = Renderer(FilePath(__file__).parent / "templates")
router = APIRouter(tags=["sign-in"], include_in_schema=False)


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _safe_next(target: str | None) -> str:
    # Only paths on this site: "//host" and "/\\host" would leave it.
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def _page(
    request: Request, settings: Settings, name: str, status: int = 200, **context: Any
) -> HTMLResponse:
    """A sign-in page; the CSRF nonce is kept (made when missing), so that forms in several tabs
    stay valid."""
    return renderer.page(request, settings, name, status, **context)


def _csrf_ok(request: Request, settings: Settings, token: str) -> bool:
    return csrf.token_valid(request.cookies, settings.auth, token)


@router.get("/signin", dependencies=[PUBLIC])
def signin_page(
    request: Request, settings: SettingsDep, next: Annotated[str | None, Query()] = None
) -> HTMLResponse:
    """The sign-in form."""
    return _page(request, settings, "signin.html", next=_safe_next(next), username="")


@router.post("/signin", dependencies=[PUBLIC])
async def signin(
    request: Request,
    settings: SettingsDep,
    username: Annotated[str, Form(max_length=128)],
    password: Annotated[str, Form(max_length=1024)],
    csrf_token: Annotated[str, Form(max_length=512)] = "",
    next: Annotated[str, Form(max_length=2048)] = "/",
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
    keep_nonce(response, settings, csrf.Csrf.new_nonce())
    response.set_cookie(
        SESSION_COOKIE, token, max_age=int(settings.auth.session_ttl_s), httponly=True,
        secure=settings.auth.cookie_secure, samesite="lax", path="/",
    )  # fmt: skip
    return response


@router.get("/account")
def account(
    request: Request,
    settings: SettingsDep,
    principal: AnyPrincipal,
    password: Annotated[Literal["changed"] | None, Query()] = None,
) -> HTMLResponse:
    """Who is signed in, the password form and the sign-out button."""
    return _page(request, settings, "account.html", principal=principal, errors={},
                 changed=password == "changed")  # fmt: skip


@router.post("/account/password")
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


@router.post("/signout", dependencies=[PUBLIC])
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


@dataclass(frozen=True)
class App:
    """A place the landing page links to, and the path whose declared roles open it."""

    name: str
    href: str
    about: str


#: The apps, in the order the landing page lists them; each opens to the roles its page
#: route declares (read from the app's routes, so the page follows what the routes allow).
APPS = (
    App("Review", "/review", "Answer the review tasks waiting in your queues."),
    App("Console", "/console", "Throughput, rewards, cost, jobs, policies, queues and workers."),
    App("Your account", "/account", "Who you are signed in as; change your password, sign out."),
)
API_DOCS = App("API docs", "/docs", "The HTTP API, its request and answer schemas (OpenAPI).")


def _roles_opening(app: FastAPI, path: str) -> frozenset[str] | Literal["public"] | None:
    for route_path, route in app_routes(app):
        if route_path == path and "GET" in getattr(route, "methods", set()):
            return declared_access(route)
    return None


@router.get("/", dependencies=[PUBLIC])
async def home(request: Request, settings: SettingsDep) -> HTMLResponse:
    """The landing page: the apps the signed-in person's roles open, or the way to sign in."""
    try:
        principal = await run_in_threadpool(principal_of, request, settings)
    except NotAuthenticatedError:
        principal = None
    apps = []
    for app in APPS:
        access = _roles_opening(request.app, app.href)
        if access == "public" or (principal and access and principal.roles & access):
            apps.append(app)
    opened = [a for a in apps if a.href != "/account"]
    if principal is None:
        apps.append(App("Sign in", "/signin?next=/", "For reviewers, operators and admins."))
    apps.append(API_DOCS)
    return _page(request, settings, "home.html", principal=principal, apps=apps, opened=opened)
