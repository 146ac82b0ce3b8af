"""Who may call a route, declared once as Annotated aliases.

Every route declares who may call it with exactly one of: a role alias (`TrainerPrincipal`,
`OperatorPrincipal`, `AdminPrincipal`, `ReviewerPrincipal`, `AnyPrincipal`, `JobViewer`) or
`dependencies=[PUBLIC]`. `declared_access` reads that declaration back (the route-walk test).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import BaseRoute

from verifier_service.auth import limits
from verifier_service.auth import service as auth
from verifier_service.auth.errors import NotAuthenticatedError
from verifier_service.auth.schemas import ALL_ROLES, AuthenticatedPrincipal, Role
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import PRINTABLE, SettingsDep
from verifier_service.core.notify import sync_client
from verifier_service.settings import Settings, get_settings
from verifier_service.web import csrf

SESSION_COOKIE = csrf.SESSION_COOKIE
CSRF_COOKIE = csrf.CSRF_COOKIE
CSRF_HEADER = "X-CSRF-Token"
LOOPBACK = frozenset({"127.0.0.1", "::1"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Declared for the OpenAPI document (the "Authorize" button of /docs); read by _principal.
_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer vsk_...`")
_cookie = APIKeyCookie(
    name=SESSION_COOKIE, auto_error=False, description="A person's session (the sign-in page)."
)


@lru_cache(maxsize=4)
def rate_limiter(broker_url: str) -> limits.RateLimiter:
    """Per-key rate limits and the API key cache, in the broker's Redis."""
    return limits.RateLimiter(sync_client(broker_url), get_settings().auth)


def _credential(request: Request) -> tuple[str, str] | None:
    """("key", key) or ("session", token) from the request, or None."""
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise NotAuthenticatedError(
                "malformed Authorization header", reason="malformed",
                hint="send `Authorization: Bearer vsk_...`",
            )  # fmt: skip
        return "key", value.strip()
    in_path = request.path_params.get("api_key")
    if in_path:
        return "key", str(in_path)
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        return "session", token
    return None


async def _principal(
    request: Request,
    settings: SettingsDep,
    _bearer_doc: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    _cookie_doc: Annotated[str | None, Depends(_cookie)],
    x_principal: Annotated[str | None, Header(max_length=128, pattern=PRINTABLE)] = None,
) -> AuthenticatedPrincipal:
    """Who is calling: an API key, a signed-in person, or (dev only) the local admin.

    Async, so that a request without credentials costs no trip to the thread pool; a key or
    a session is looked up (Redis, the database) in a worker thread.
    """
    if _credential(request) is None:
        return principal_of(request, settings, x_principal)
    return await run_in_threadpool(principal_of, request, settings, x_principal)


def principal_of(
    request: Request, settings: Settings, x_principal: str | None = None
) -> AuthenticatedPrincipal:
    """The caller of a request (blocking: a key or session is looked up in Redis or the
    database); NotAuthenticatedError when there is none."""
    credential = _credential(request)
    if credential is None:
        host = request.client.host if request.client else ""
        if settings.auth.local_admin and host in LOOPBACK:
            return auth.on_behalf_of(auth.local_admin(), x_principal)
        raise NotAuthenticatedError(
            "no credentials", reason="missing",
            hint="send `Authorization: Bearer <API key>` (keys come from `verifier-service keys "
            "create`), or sign in at /signin",
        )  # fmt: skip
    kind, value = credential
    if kind == "key":
        prefix = auth.check_key_format(value)
        key_hash = auth.hash_key(value)
        limiter = rate_limiter(settings.broker_url)
        cached = limiter.cached(key_hash)
        if cached is None:
            cached = retried_transaction(lambda session: auth.authenticate_key(session, value))
            limiter.remember(key_hash, cached)
        auth.check_not_expired(cached, prefix)
        principal = cached
    else:
        found = retried_transaction(lambda session: auth.web_session_principal(session, value))
        if found is None:
            raise NotAuthenticatedError(
                "session expired or signed out", reason="expired", hint="sign in at /signin"
            )
        rate_limiter(settings.broker_url).person_request(found)
        if request.method not in _SAFE_METHODS:
            if not csrf.token_valid(
                request.cookies, settings.auth, request.headers.get(CSRF_HEADER)
            ):
                raise NotAuthenticatedError(
                    "missing or invalid CSRF token", reason="csrf",
                    hint=f"send the page's token in the {CSRF_HEADER} header",
                )  # fmt: skip
        principal = found
    return auth.on_behalf_of(principal, x_principal)


def still_authenticated(request: Request, settings: Settings) -> bool:
    """Whether the credential of a request that was let in still holds (an events stream asks
    while it is open): a key from the cache (nothing taken from its limit) or the database, a
    session from the database. Blocking."""
    credential = _credential(request)
    if credential is None:
        return True  # dev's local admin: nothing to revoke
    kind, value = credential
    try:
        if kind == "key":
            prefix = auth.check_key_format(value)
            key_hash = auth.hash_key(value)
            limiter = rate_limiter(settings.broker_url)
            principal = limiter.peek(key_hash)
            if principal is None:
                principal = retried_transaction(lambda s: auth.authenticate_key(s, value))
                limiter.remember(key_hash, principal, take=False)
            auth.check_not_expired(principal, prefix)
        else:
            found = retried_transaction(lambda s: auth.web_session_principal(s, value))
            return found is not None
    except NotAuthenticatedError:
        return False
    return True


CurrentPrincipal = Annotated[AuthenticatedPrincipal, Depends(_principal)]


class RoleCheck:
    """A route's declared access: the caller must hold one of `roles`."""

    def __init__(self, *roles: str) -> None:
        self.roles = frozenset(Role(r).value for r in roles)
        self.__name__ = f"require_{'_or_'.join(sorted(self.roles))}"

    # async: no I/O here, so FastAPI need not hop to a worker thread for it.
    async def __call__(self, principal: CurrentPrincipal) -> AuthenticatedPrincipal:
        auth.require_roles(principal, self.roles)
        return principal


def require_role(*roles: str) -> RoleCheck:
    """Dependency that lets through callers holding any of `roles` (403 otherwise)."""
    return RoleCheck(*roles)


class PublicAccess:
    """A route's declared access: anyone, without credentials."""

    __name__ = "public"

    async def __call__(self) -> None:
        return None


PUBLIC = Depends(PublicAccess())

TrainerPrincipal = Annotated[AuthenticatedPrincipal, Depends(require_role(Role.trainer))]
ReviewerPrincipal = Annotated[AuthenticatedPrincipal, Depends(require_role(Role.reviewer))]
OperatorPrincipal = Annotated[AuthenticatedPrincipal, Depends(require_role(Role.operator))]
AdminPrincipal = Annotated[AuthenticatedPrincipal, Depends(require_role(Role.admin))]
#: A partner serving an oracle (which oracle: its principal name, checked by the oracle domain).
OraclePrincipal = Annotated[AuthenticatedPrincipal, Depends(require_role(Role.oracle))]
#: Jobs: trainers see their own, operators every one.
JobViewer = Annotated[AuthenticatedPrincipal, Depends(require_role(Role.trainer, Role.operator))]
AnyPrincipal = Annotated[AuthenticatedPrincipal, Depends(require_role(*ALL_ROLES))]


async def _key_in_path(
    api_key: Annotated[  # noqa: ARG001 - read by _principal from request.path_params
        str,
        Path(
            description="An API key, for clients that cannot send a header (see "
            "docs/trainers.md for the risk)."
        ),
    ],
) -> None:
    # Declared here so that the OpenAPI document shows the path parameter.
    return None


#: For the compat routes' `/k/{api_key}/...` twins.
KEY_IN_PATH = Depends(_key_in_path)

#: Routes the framework adds itself (the OpenAPI document and its viewers): public.
PUBLIC_FRAMEWORK_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


def app_routes(app: FastAPI) -> Iterator[tuple[str, BaseRoute]]:
    """Every route of an app with its full path, through included routers."""
    try:  # FastAPI >= 0.165 includes routers lazily
        from fastapi.routing import iter_route_contexts
    except ImportError:
        for route in app.routes:
            yield str(getattr(route, "path", "")), route
        return
    for context in iter_route_contexts(app.routes):
        yield str(context.path), context.original_route


def declared_access(route: BaseRoute) -> frozenset[str] | Literal["public"] | None:
    """The roles a route declares, "public", or None when it declares nothing."""
    if not isinstance(route, APIRoute):
        path = getattr(route, "path", None)
        return "public" if path in PUBLIC_FRAMEWORK_PATHS else None
    found: frozenset[str] | Literal["public"] | None = None
    stack = list(route.dependant.dependencies)
    while stack:
        dep = stack.pop()
        if isinstance(dep.call, RoleCheck):
            found = dep.call.roles
        elif isinstance(dep.call, PublicAccess) and found is None:
            found = "public"
        stack.extend(dep.dependencies)
    return found
