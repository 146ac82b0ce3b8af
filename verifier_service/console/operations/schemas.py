"""What the console's operations pages show: queues, workers, reviewers."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

#: What a queue does now (see `QueueState.state`).
QueueRun = Literal["paused", "no workers", "draining", "drained", "running"]


class QueueState(BaseModel):
    """One queue right now, with the operators' pause."""

    queue: str
    depth: int | None = Field(description="Tasks waiting on the queue (null: broker down).")
    workers: int = Field(description="Live workers started for this queue.")
    consuming: int = Field(description="Of them, those taking work from it now.")
    draining: int = Field(default=0, description="Of them, those an operator drains.")
    state: QueueRun = Field(
        default="running",
        description="paused; no workers (none live); draining or drained (every live worker "
        "of it drained: nobody takes its tasks; draining ones still finish tasks); running.",
    )
    paused: bool
    paused_by: str | None = None
    paused_at: datetime | None = None


class WorkerTask(BaseModel):
    """A tier task a worker holds: running, or taken ahead (prefetched) and waiting to run."""

    id: str
    name: str
    queue: str | None
    items: int = Field(description="Items in the task's batch.")
    state: Literal["active", "reserved", "held"] = Field(
        description="active: running; reserved: prefetched; held: the worker did not answer "
        "whether it runs it."
    )


class WorkerState(BaseModel):
    """One worker: what it was started for, what it consumes now, the tasks it holds."""

    node: str
    alive: bool = Field(description="Its heartbeat has not run out.")
    queues: list[str] = Field(description="The queues it was started for.")
    consuming: list[str] = Field(description="The queues it takes work from now.")
    draining: bool = Field(description="An operator drains it: it takes no new work.")
    drained: bool = Field(description="Draining and holding no task: safe to stop.")
    concurrency: int | None
    prefetch_limit: int | None = Field(
        description="The most tasks it takes ahead of running them (concurrency x prefetch)."
    )
    tasks: list[WorkerTask]


class Operations(BaseModel):
    """Queues and workers, as the console's operations page shows them."""

    queues: list[QueueState]
    workers: list[WorkerState]


class ReviewerRow(BaseModel):
    """One reviewer's throughput and accuracy on gold items."""

    reviewer: str
    answered: int = Field(description="Answers to real items (not gold) in all.")
    answered_24h: int = Field(description="Answers to real items in the last 24 hours.")
    per_hour_24h: float = Field(
        description="Answers in the last 24 hours over 24 (a day's average, breaks and nights "
        "included: see `per_hour_active` for the pace of work)."
    )
    answered_1h: int = Field(default=0, description="Answers to real items in the last hour.")
    per_hour_active: float | None = Field(
        default=None,
        description="Answers per hour of reviewing over the last 24 hours: the time between "
        "consecutive answers, gaps over 15 minutes counted as breaks (null: fewer than two).",
    )
    gold_answered: int
    gold_correct: int
    gold_accuracy: float | None
    paused: bool
    paused_reason: str | None = Field(
        default=None, description="Why (and by whom) a paused reviewer was paused."
    )


class Reviewers(BaseModel):
    """The reviewers page: each reviewer, and agreement per review queue and dimension."""

    reviewers: list[ReviewerRow]
    agreement: dict[str, dict[str, float | None]] = Field(
        description="Queue -> rubric dimension -> Krippendorff's alpha (null where undefined)."
    )


class RetryOut(BaseModel):
    """What a retry did."""

    job_id: str
    retried: int = Field(description="Items sent up their ladder again.")
