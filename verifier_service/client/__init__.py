"""Python client of the reward API, and adapters for TRL, verl and OpenRLHF trainers.

`VerifierClient` blocks, `AsyncVerifierClient` awaits; both return the API's own models
(`JobOut`, `Reward`) and raise the exceptions of `verifier_service.client.errors`.
`OraclePartner` is the other side of an oracle: a lab's or a market's script.
"""

from verifier_service.client._base import PollPolicy, RetryPolicy, rewards_of
from verifier_service.client.aio import AsyncVerifierClient
from verifier_service.client.errors import (
    APIError,
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    JobTimeoutError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    ServiceConnectionError,
    VerifierClientError,
)
from verifier_service.client.oracle import (
    Batch,
    BatchItem,
    Claim,
    LeaseLostError,
    MeasurementFailed,
    OraclePartner,
    Posted,
    Result,
)
from verifier_service.client.settings import ClientSettings
from verifier_service.client.sync import VerifierClient
from verifier_service.client.webhooks import WebhookVerificationError, verify_webhook
from verifier_service.wire.jobs import JobOut
from verifier_service.wire.rewards import Reward, RewardStatus

__all__ = [
    "APIError",
    "AsyncVerifierClient",
    "AuthenticationError",
    "Batch",
    "BatchItem",
    "Claim",
    "ClientSettings",
    "ConflictError",
    "InvalidRequestError",
    "JobOut",
    "JobTimeoutError",
    "LeaseLostError",
    "MeasurementFailed",
    "NotFoundError",
    "OraclePartner",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PollPolicy",
    "Posted",
    "RateLimitedError",
    "Result",
    "RetryPolicy",
    "Reward",
    "RewardStatus",
    "ServerError",
    "ServiceConnectionError",
    "VerifierClient",
    "VerifierClientError",
    "WebhookVerificationError",
    "rewards_of",
    "verify_webhook",
]
