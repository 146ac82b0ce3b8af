"""Settings of the text tiers (the service composes them as its `answer` group)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AnswerSettings(BaseModel):
    """The `answer` tier's runtime limits on symbolic comparison (not set by the policy)."""

    math_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Wall clock for one math comparison (parse and equivalence of one answer "
        "against its references) in the comparison subprocess; past it the subprocess is killed "
        "and the answer is a scored failure (reason math_timeout).",
    )
    math_memory_mb: int = Field(
        default=1024,
        ge=256,
        description="Address-space cap (RLIMIT_AS) of each comparison subprocess.",
    )
    math_processes: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Most comparison subprocesses one process keeps (started on first use; a "
        "Celery prefork child uses one at a time, the API's inline lane one per thread busy).",
    )
    math_start_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="How long a new comparison subprocess may take to import sympy and answer.",
    )
