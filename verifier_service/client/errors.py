"""Exceptions raised by the Python client, one per way a call can fail."""

from __future__ import annotations

from typing import Any


class VerifierClientError(Exception):
    """Base of every error the client raises."""


class ServiceConnectionError(VerifierClientError):
    """The service could not be reached (after the configured retries)."""


class JobTimeoutError(VerifierClientError):
    """A job did not complete within the time the caller was willing to wait."""

    def __init__(self, message: str, *, job_id: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class APIError(VerifierClientError):
    """The service answered with an error body: `{"error", "message", "hint"?, "errors"?}`."""

    def __init__(self, status_code: int, body: dict[str, Any]) -> None:
        self.status_code = status_code
        self.body = body
        self.error = str(body.get("error", "http_error"))
        self.message = str(body.get("message", ""))
        self.hint: str | None = body.get("hint")
        self.errors: list[dict[str, Any]] = list(body.get("errors") or [])
        text = f"{status_code} {self.error}: {self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        super().__init__(text)


class AuthenticationError(APIError):
    """401: no API key, or one that is malformed, unknown, expired or revoked (see `message`)."""


class PermissionDeniedError(APIError):
    """403: the key's principal lacks the role the route needs."""


class InvalidRequestError(APIError):
    """422: the request body is malformed or asks for something the policy cannot score."""


class NotFoundError(APIError):
    """404: no such job or policy."""


class ConflictError(APIError):
    """409: an Idempotency-Key was reused for a different request."""


class PayloadTooLargeError(APIError):
    """413: too many items or too large a body; the client batches to avoid it."""


class RateLimitedError(APIError):
    """429: the service asks the caller to slow down (retried before it is raised)."""


class ServerError(APIError):
    """5xx: a fault on the service's side (retried before it is raised)."""


_BY_STATUS: dict[int, type[APIError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: InvalidRequestError,
    429: RateLimitedError,
}


def error_for(status_code: int, body: dict[str, Any]) -> APIError:
    """The exception class that matches an HTTP error status."""
    if status_code >= 500:
        return ServerError(status_code, body)
    return _BY_STATUS.get(status_code, APIError)(status_code, body)
