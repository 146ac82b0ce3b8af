"""Errors of the oracle domain, each with its HTTP status and a code partners can act on."""

from __future__ import annotations

from verifier_service.core.errors import ConflictError, DomainError, NotFoundError


class UnknownOracleError(NotFoundError):
    code = "unknown_oracle"


class UnknownItemError(NotFoundError):
    code = "unknown_item"


class UnknownBatchError(NotFoundError):
    code = "unknown_batch"


class NotThisOraclesError(DomainError):
    """A key of role oracle that serves another oracle."""

    status_code = 403
    code = "forbidden"


class WrongModeError(ConflictError):
    code = "wrong_mode"


class LeaseLostError(ConflictError):
    code = "lease_lost"


class ResultConflictError(ConflictError):
    code = "result_conflict"


class NotResendableError(ConflictError):
    code = "not_resendable"
