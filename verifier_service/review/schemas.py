"""Bodies of the review domain: the human tier's config (the tier's own model, re-exported),
answers, what a reviewer sees of a task, and what operators see of the queue."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tiers.human import Dimension, ReviewConfig, Rubric

__all__ = [
    "AdjudicationIn",
    "AdjudicationView",
    "AnswerIn",
    "AnswerRecordOut",
    "Dimension",
    "GoldItemIn",
    "GoldItemOut",
    "LeaseView",
    "QueueSummary",
    "ReviewConfig",
    "ReviewerOut",
    "ReviewerStats",
    "Rubric",
    "TaskView",
]

Value = float | str


class AnswerIn(BaseModel):
    """A reviewer's answer: a value per rubric dimension (labels as strings)."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Value] = Field(description="Dimension name -> score or label.")
    comment: str | None = Field(default=None, max_length=20000, description="Free text.")
    steps: list[dict[str, Value]] | None = Field(
        default=None, description="One dict per trajectory step when the rubric is per_step."
    )


class TaskView(BaseModel):
    """What a reviewer sees of a task: never others' answers, never whether it is gold."""

    task_id: str
    queue: str
    kind: str = Field(description="molecule, code, json, text or trajectory.")
    payload: dict[str, Any] = Field(description="The candidate or trajectory as submitted.")
    reference: dict[str, Any] | None = None
    verdicts: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Lower tiers' verdicts: tier, status, score, components, feedback.",
    )
    guidelines: str
    rubric: Rubric


class LeaseView(BaseModel):
    """A reviewer's hold on one task, until `expires_at` unless heartbeated."""

    lease_id: str
    expires_at: datetime
    heartbeat_s: float = Field(description="Send a heartbeat at least this often.")
    draft: dict[str, Any] | None = None
    task: TaskView


class QueueSummary(BaseModel):
    """A queue as a reviewer sees it."""

    name: str
    waiting: int = Field(description="Tasks this reviewer could take now.")
    guidelines_excerpt: str


class ReviewerStats(BaseModel):
    """A reviewer's own numbers."""

    done_today: int
    answered: int
    gold_accuracy: float | None = Field(
        default=None, description="None unless the operator lets reviewers see it."
    )
    paused: bool


# ------------------------------------------------------------------------ operators


class GoldItemIn(BaseModel):
    """An item with a known answer, mixed into a queue to measure reviewers."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["molecule", "code", "json", "text"]
    payload: dict[str, Any]
    reference: dict[str, Any] | None = None
    guidelines: str = Field(default="", description="Markdown shown with the item.")
    rubric: Rubric
    answer: dict[str, Value] = Field(description="The known answer, per dimension.")
    tolerance: float = Field(
        default=0.0, ge=0, description="A score within this distance of the known one is right."
    )


class GoldItemOut(BaseModel):
    task_id: str
    queue: str


class ReviewerOut(BaseModel):
    """A reviewer as operators see them."""

    reviewer: str
    answered: int
    gold_answered: int
    gold_correct: int
    gold_accuracy: float | None
    paused: bool
    paused_reason: str | None = None


class AdjudicationView(BaseModel):
    """A task whose reviewers disagreed: the task, every answer and the agreement."""

    task_id: str
    queue: str
    kind: str
    payload: dict[str, Any]
    reference: dict[str, Any] | None
    rubric: Rubric
    answers: list[dict[str, Any]]
    agreement: dict[str, float | None]


class AdjudicationIn(BaseModel):
    """An operator's final answer for a task."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Value]
    comment: str | None = Field(default=None, max_length=20000)


class AnswerRecordOut(BaseModel):
    """One stored answer (export)."""

    answer_id: str
    task_id: str
    queue: str
    item_id: str | None
    job_id: str | None
    reviewer: str
    gold: bool
    values: dict[str, Value]
    comment: str | None
    steps: list[dict[str, Value]] | None
    created_at: datetime
