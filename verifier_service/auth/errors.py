"""Errors of authentication, authorization and rate limiting: they carry response headers."""

from __future__ import annotations

from typing import Any

from verifier_service.core.errors import DomainError

REALM = 'Bearer realm="verifier-service"'


class NotAuthenticatedError(DomainError):
    """No credentials, or credentials that do not identify anyone: 401."""

    status_code = 401
    code = "unauthenticated"

    def __init__(self, message: str, *, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, reason=reason)
        self.reason = reason

    def page_for(self, path: str) -> str | None:
        # A person's browser without a (live) session goes to the sign-in page.
        return f"/signin?next={path}" if self.reason in ("missing", "expired") else None

    def headers(self) -> dict[str, str]:
        if self.reason == "missing":
            return {"WWW-Authenticate": REALM}
        return {"WWW-Authenticate": f'{REALM}, error="invalid_token"'}


class ForbiddenError(DomainError):
    """Authenticated, but without a role the route needs: 403."""

    status_code = 403
    code = "forbidden"


class RateLimitedError(DomainError):
    """Over a key's requests or items per minute: 429 with Retry-After."""

    status_code = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int, **extra: Any) -> None:
        super().__init__(message, hint=f"retry after {retry_after_s} s", **extra)
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}
