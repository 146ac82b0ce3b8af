"""A job as the API answers it: its items, their rewards and the verdicts behind them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from tiers.base import Verdict
from verifier_service.wire.rewards import Reward


class StoredVerdict(Verdict):
    """A verdict as stored: with its id and ladder step."""

    id: str
    step: int


class ItemOut(BaseModel):
    """One item of a job, its ladder state, reward and verdicts."""

    index: int
    kind: str
    state: str
    reward: Reward | None
    verdicts: list[StoredVerdict] = Field(default_factory=list)
    steps: list[ItemOut] | None = Field(
        default=None, description="For trajectories: each step's and the outcome's own item."
    )


class JobOut(BaseModel):
    """A job: status, the policy version it ran under, and its items."""

    id: str
    status: Literal["running", "completed"]
    policy: str
    policy_version: int
    created_at: datetime
    finished_at: datetime | None
    n_items: int
    n_done: int
    request_id: str | None = Field(
        default=None,
        description="X-Request-ID of the request that created the job; the logs of its tasks "
        "carry it too.",
    )
    items: list[ItemOut]
    warnings: list[str] = Field(
        default_factory=list,
        description="What keeps a running job from finishing that the caller should know, "
        "e.g. items waiting on a queue that no live worker consumes.",
    )
