"""Bodies of the events API: stream events, the changes feed, webhook callbacks and deliveries."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, UrlConstraints

EventKind = Literal["item.finished", "item.revised", "job.finished"]

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


class JobEventOut(BaseModel):
    """One event of a job, as streamed, fed and sent to webhooks."""

    id: int = Field(description="Grows in commit order: a cursor (Last-Event-ID).")
    type: EventKind
    job_id: str
    timestamp: datetime
    data: dict[str, Any] = Field(
        description="item.*: index, revision, reward. job.finished: status, n_items, n_done."
    )


class RewardChange(BaseModel):
    """A reward as finished (revision 1) or changed later (revision 2, 3, ...)."""

    cursor: str
    job_id: str
    index: int = Field(description="The item's position in its request.")
    revision: int
    type: EventKind
    reward: dict[str, Any]
    timestamp: datetime


class ChangesPage(BaseModel):
    """A page of the changes feed, and the cursor to ask for the next."""

    changes: list[RewardChange]
    next: str = Field(description="Pass as `since` to get what came after this page.")


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
