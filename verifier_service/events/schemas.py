"""Bodies of the events API: stream events, the changes feed, webhook callbacks and deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, UrlConstraints

# The stream's and the feed's models are the wire contract's (the client imports them).
from verifier_service.wire.events import ChangesPage as ChangesPage
from verifier_service.wire.events import EventKind as EventKind
from verifier_service.wire.events import JobEventOut as JobEventOut
from verifier_service.wire.events import RewardChange as RewardChange

#: Longest callback URL accepted.
MAX_URL_LENGTH = 2048

CallbackUrl = Annotated[AnyHttpUrl, UrlConstraints(max_length=MAX_URL_LENGTH)]


class CallbackIn(BaseModel):
    """Where the service sends this job's events (signed, Standard Webhooks)."""

    model_config = ConfigDict(extra="forbid")

    url: CallbackUrl = Field(
        description="An http(s) URL; its host must be allowed by the service's "
        "webhooks settings (no private addresses by default)."
    )


class DeliveryAttemptOut(BaseModel):
    """One HTTP attempt of a webhook delivery."""

    number: int
    started_at: datetime
    status_code: int | None
    error: str | None
    duration_ms: float


class DeliveryOut(BaseModel):
    """One event sent to the job's callback, with every attempt."""

    id: str = Field(description="The webhook-id header of every attempt.")
    event_id: int
    type: str
    url: str
    status: Literal["pending", "delivered", "failed"]
    next_attempt_at: datetime | None
    created_at: datetime
    finished_at: datetime | None
    attempts: list[DeliveryAttemptOut]
