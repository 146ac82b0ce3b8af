"""What the console's pages draw: the overview of one time window."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator


class Window(StrEnum):
    """The time windows an operator can choose."""

    hour = "1h"
    day = "24h"
    week = "7d"


class KindRate(BaseModel):
    """Items of one kind that arrived in one bin of the overview's series (a minute, or
    `bin_minutes` minutes on the longer windows)."""

    minute: datetime = Field(description="Where the bin starts (a whole bin, in UTC).")
    kind: str
    items: int = Field(description="Top-level items of that kind in jobs created in the bin.")


class TierStats(BaseModel):
    """One tier's verdicts in the window."""

    tier: str
    verdicts: int
    cached: int = Field(description="Verdicts taken from the verdict cache.")
    p50_s: float = Field(description="Median wall time of the verdicts not from the cache.")
    p95_s: float = Field(description="95th percentile wall time of the verdicts not cached.")
    review_p50_s: float | None = Field(
        default=None,
        description="The human tier only: median time from a review task's opening to its "
        "answer, over the tasks people finished in the window (its verdicts' wall is ~0).",
    )
    review_p95_s: float | None = Field(
        default=None, description="The human tier only: 95th percentile of that review time."
    )
    cost_units: float


class LadderStep(BaseModel):
    """How many of a policy's items of one kind reached one tier, and what share of the step
    below did."""

    policy: str
    kind: str
    tier: str
    items: int
    escalation_rate: float = Field(
        description="Items reaching this tier over items that reached the step below it "
        "(the policy's items for its first tier)."
    )


class QueueStats(BaseModel):
    """One tier queue right now."""

    queue: str
    depth: int | None = Field(description="Tasks waiting on the queue (null: broker down).")
    workers: int | None = Field(description="Live workers consuming the queue.")


class Overview(BaseModel):
    """Everything the overview page shows, over one window, from the database."""

    window: Window
    since: datetime
    now: datetime
    items: int = Field(description="Top-level items of the jobs created in the window.")
    bin_minutes: int = Field(
        description="The width of each `items_per_minute` bin in minutes: 1 over an hour, "
        "5 over a day, 60 over a week."
    )
    items_per_minute: list[KindRate]
    rewards_by_status: dict[str, int] = Field(
        description="Those items by reward status (scored, pending, infra_error), or by ladder "
        "state while they are unfinished."
    )
    tiers: list[TierStats]
    cache_hit_rate: float | None = Field(description="Cached verdicts over all verdicts.")
    ladder: list[LadderStep]
    cost_by_principal: dict[str, float]
    total_cost_units: float
    queues: list[QueueStats]
    oldest_waiting_s: float | None = Field(
        description="Age of the oldest item waiting: sent to a tier queue and not yet taken by "
        "a worker, or in a review task people have not finished."
    )
    oldest_waiting_for: Literal["tier queue", "people"] | None = Field(
        default=None, description="What that oldest item waits for."
    )


class JobQuery(BaseModel):
    """The job search's filters (every one optional) and how many jobs to list."""

    principal: str | None = Field(default=None, max_length=128, description="Who submitted.")
    policy: str | None = Field(default=None, max_length=128, description="The policy's name.")
    status: Literal["running", "completed", "cancelled"] | None = Field(
        default=None, description="Status (cancelled: an operator cancelled it)."
    )
    since: datetime | None = Field(default=None, description="Created at or after (ISO 8601).")
    until: datetime | None = Field(default=None, description="Created before (ISO 8601).")
    limit: int = Field(default=50, ge=1, le=500, description="At most this many jobs.")

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        """A search form sends its empty fields as "": they filter nothing."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v != ""}
        return data

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """A time without a zone is read as UTC (the zone every stored time has)."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class JobRow(BaseModel):
    """One job in the console's search results."""

    id: str
    created_at: datetime
    finished_at: datetime | None
    principal: str
    policy: str
    policy_version: int
    status: str
    n_items: int
    n_done: int
    cost_units: float
    infra_errors: int = Field(description="Items whose reward is an infra_error.")


class Rung(BaseModel):
    """One tier's verdict on an item, on its way up the ladder, and what it cost."""

    tier: str
    status: str
    score: float | None
    wall_s: float
    cached: bool
    cost_units: float
    reason: str | None = None
    #: Which part of a trajectory the verdict is of ("step 0", ..., "outcome"); None for an
    #: item of its own.
    part: str | None = None


class ItemPath(BaseModel):
    """An item's path up the ladder: its verdicts in order, its reward and its cost."""

    index: int
    kind: str
    state: str
    reward_status: str | None
    reward_value: float | None
    reason: str | None
    fidelity: str | None
    cost_units: float = Field(description="The item's cost, a trajectory's steps included.")
    path: list[Rung]
    step_rewards: list[float | None] | None = Field(
        default=None, description="A trajectory's reward per step (None: not scored)."
    )
    outcome_reward: float | None = None


class JobPaths(BaseModel):
    """A job as the console's job page shows it."""

    job: JobRow
    warnings: list[str]
    items: list[ItemPath]
