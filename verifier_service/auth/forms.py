"""Who may post the web pages' plain HTML forms (review, console): the CSRF token in the form.

A browser without JavaScript cannot send the X-CSRF-Token header that cookie-authenticated
POSTs need, so these form routes read the same signed token from a form field instead. The
check is a `RoleCheck`, so the routes still declare their role (the route-walk test reads it),
and API keys are checked exactly as on every other route.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Form, Request

from verifier_service.auth import service as auth
from verifier_service.auth.deps import (
    _SAFE_METHODS,
    CSRF_HEADER,
    SESSION_COOKIE,
    RoleCheck,
    principal_of,
    rate_limiter,
)
from verifier_service.auth.errors import NotAuthenticatedError
from verifier_service.auth.schemas import ALL_ROLES, AuthenticatedPrincipal, Role
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import SettingsDep
from verifier_service.web import csrf


class FormRoleCheck(RoleCheck):
    """A role check for HTML form posts: the CSRF token may come in the `csrf_token` field."""

    # Not async: it reads the database, so FastAPI runs it on a worker thread.
    def __call__(  # type: ignore[override]
        self,
        request: Request,
        settings: SettingsDep,
        csrf_token: Annotated[str, Form(max_length=512)] = "",
    ) -> AuthenticatedPrincipal:
        token = request.cookies.get(SESSION_COOKIE)
        by_form = (
            token is not None
            and "authorization" not in request.headers
            and request.method not in _SAFE_METHODS
            and CSRF_HEADER.lower() not in request.headers
        )
        if not by_form:  # an API key, or a script sending the header: the usual check
            principal = principal_of(request, settings)
        else:
            assert token is not None
            if not csrf.token_valid(request.cookies, settings.auth, csrf_token):
                raise NotAuthenticatedError(
                    "missing or invalid CSRF token", reason="csrf",
                    hint="reload the page and send the form again",
                )  # fmt: skip
            found = retried_transaction(lambda s: auth.web_session_principal(s, token))
            if found is None:
                raise NotAuthenticatedError(
                    "session expired or signed out", reason="expired", hint="sign in at /signin"
                )
            rate_limiter(settings.broker_url).person_request(found)
            principal = found
        auth.require_roles(principal, self.roles)
        return principal


#: A reviewer posting one of the review pages' forms.
ReviewerForm = Annotated[AuthenticatedPrincipal, Depends(FormRoleCheck(Role.reviewer))]
#: An operator posting one of the console's forms.
OperatorForm = Annotated[AuthenticatedPrincipal, Depends(FormRoleCheck(Role.operator))]
#: Anyone signed in posting a form of their own account page.
AccountForm = Annotated[AuthenticatedPrincipal, Depends(FormRoleCheck(*ALL_ROLES))]
