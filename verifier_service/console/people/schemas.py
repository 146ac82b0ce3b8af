"""What the console's people pages show: gold items, the tasks a gold item can be made from,
and what the form posts (a value per rubric dimension, as typed)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from verifier_service.review.schemas import Rubric


class GoldRow(BaseModel):
    """A gold item: where it is, its known answer, and how reviewers did on it."""

    task_id: str
    queue: str
    kind: str
    payload: dict[str, Any]
    answer: dict[str, Any]
    tolerance: float
    answered: int
    correct: int
    removed: bool = Field(description="Taken out of its queue: served to nobody any more.")
    created_at: datetime


class SourceRow(BaseModel):
    """A real task people were sent: one an operator can copy into a gold item."""

    task_id: str
    queue: str
    kind: str
    state: str
    answered: int
    payload: dict[str, Any]
    created_at: datetime


class GoldPage(BaseModel):
    """The gold page: the gold items, then the tasks a new one can be made from."""

    gold: list[GoldRow]
    sources: list[SourceRow]


class SourceTask(BaseModel):
    """The task a new gold item is made from, with what reviewers said of it so far."""

    task_id: str
    queue: str
    kind: str
    payload: dict[str, Any]
    reference: dict[str, Any] | None
    guidelines: str
    rubric: Rubric
    answers: list[dict[str, Any]]
