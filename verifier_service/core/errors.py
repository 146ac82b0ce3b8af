"""Domain errors carry their HTTP status; one handler renders them."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """An error a client can act on: status, a code, what was wrong and how to fix it."""

    status_code: int = 400
    code: str = "bad_request"

    def __init__(self, message: str, *, hint: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.extra = extra

    def headers(self) -> dict[str, str]:
        """Response headers the error needs (WWW-Authenticate, Retry-After, ...)."""
        return {}

    def page_for(self, path: str) -> str | None:  # noqa: ARG002 - subclasses read it
        """Where to send a person's browser asking for `path` instead, if anywhere."""
        return None

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        body.update(self.extra)
        return body


class NotFoundError(DomainError):
    status_code = 404
    code = "not_found"


class ConflictError(DomainError):
    status_code = 409
    code = "conflict"


class PayloadTooLargeError(DomainError):
    status_code = 413
    code = "payload_too_large"


class InvalidRequestError(DomainError):
    status_code = 422
    code = "invalid_request"


class ServiceUnavailableError(DomainError):
    status_code = 503
    code = "unavailable"

    def __init__(self, message: str, *, retry_after_s: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class DatabaseNotMigratedError(RuntimeError):
    """The database schema is missing or behind the code."""
