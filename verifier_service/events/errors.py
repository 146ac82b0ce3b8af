"""Errors of the events domain."""

from __future__ import annotations

from verifier_service.core.errors import DomainError


class CallbackRefusedError(DomainError):
    """A job's callback URL that this service will not call."""

    status_code = 422
    code = "callback_refused"
