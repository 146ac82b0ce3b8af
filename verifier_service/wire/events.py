"""A job's events as streamed (SSE), fed (the changes feed) and sent to webhooks."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

EventKind = Literal["item.finished", "item.revised", "job.finished"]


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
