"""Pydantic bodies of the oracle API (docs/oracles.md is the protocol they make)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Results one request may carry.
MAX_RESULTS = 1000


class BatchItemOut(BaseModel):
    """One item of a batch, as the partner sees it."""

    item_id: str
    kind: str
    payload: dict[str, Any]
    reference: dict[str, Any] | None = None


class BatchOut(BaseModel):
    """A batch of items to measure (the body of a push, the batch of a claim)."""

    type: str = "oracle.batch"
    oracle: str
    batch_id: str
    created_at: datetime
    due_at: datetime
    result_schema: dict[str, Any]
    results_url: str
    items: list[BatchItemOut]


class ClaimOut(BaseModel):
    """A claimed batch and the lease that holds it."""

    lease_id: str
    lease_expires_at: datetime
    batch: BatchOut


class HeartbeatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lease_id: str = Field(min_length=1, max_length=64, description="The claim's lease_id.")


class HeartbeatOut(BaseModel):
    lease_expires_at: datetime


class ResultIn(BaseModel):
    """One item's result: the measured values, or why it could not be measured."""

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1, max_length=64, description="The batch item's item_id.")
    values: dict[str, Any] | None = Field(default=None, description="Measured values by field.")
    error: str | None = Field(
        default=None, min_length=1, max_length=2000, description="A failed measurement."
    )

    @model_validator(mode="after")
    def _one_of(self) -> ResultIn:
        if (self.values is None) == (self.error is None):
            raise ValueError("give exactly one of values or error")
        return self


class ResultsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    results: list[ResultIn] = Field(min_length=1, max_length=MAX_RESULTS)


class ResultsOut(BaseModel):
    accepted: int = Field(description="Results recorded now.")
    duplicates: int = Field(description="Results that were already recorded (the same again).")


class AttemptOut(BaseModel):
    number: int
    started_at: datetime
    status_code: int | None
    error: str | None
    duration_ms: float


class BatchStatusOut(BaseModel):
    """A batch as operators see it: its state, items and every push attempt."""

    id: str
    oracle: str
    mode: str
    state: str
    created_at: datetime
    due_at: datetime
    sent_at: datetime | None
    claims: int
    items: dict[str, str] = Field(description="Oracle item id -> its state.")
    attempts: list[AttemptOut]


class OracleOut(BaseModel):
    """An oracle and what it holds now."""

    name: str
    mode: str
    paused: bool
    capacity: int
    period_s: float
    used_this_period: int
    in_flight: int = Field(description="Items sent and waiting for their result.")
    overdue_batches: int = Field(description="Batches past their due time, results missing.")
    turnaround_p50_s: float | None = Field(description="Median selection-to-result time.")
    turnaround_p95_s: float | None = Field(description="95th percentile of the same.")
    items: dict[str, int] = Field(description="Items by state.")


class ResentOut(BaseModel):
    state: str = Field(description="The batch's state now: sending (pushed anew) or open.")
