"""The `human` tier: people judge items through the review queue.

This module holds what the tier is (its name, queue, cost and the config a policy step gives
it); the work itself is deferred: the ladder hands items of this tier to the review queue
instead of a tier task, and the review domain records the verdict when people have answered.
`verify_batch` (reached only by a replay asked to compute missing verdicts, or a process with no
review queue wired in) says that people's verdicts cannot be computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tiers.base import Candidate, Verdict, VerdictStatus, stable_json


class Dimension(BaseModel):
    """One thing reviewers judge: a score on a scale, or a label from a list."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="Key of the answer's value.")
    type: Literal["score", "label"] = Field(description="A number on a scale, or a label.")
    min: int = Field(default=1, description="Lowest score (type score).")
    max: int = Field(default=5, description="Highest score (type score).")
    labels: list[str] = Field(default_factory=list, description="Allowed labels (type label).")
    description: str = Field(default="", description="What reviewers judge here.")

    @model_validator(mode="after")
    def _consistent(self) -> Dimension:
        if self.type == "score" and not self.min < self.max:
            raise ValueError(f"dimension {self.name!r}: min must be less than max")
        if self.type == "label":
            if len(self.labels) < 2:
                raise ValueError(f"dimension {self.name!r}: a label dimension needs >= 2 labels")
            if len(set(self.labels)) != len(self.labels):
                raise ValueError(f"dimension {self.name!r}: labels must be distinct")
        return self


class Rubric(BaseModel):
    """What reviewers answer for each item."""

    model_config = ConfigDict(extra="forbid")

    dimensions: list[Dimension] = Field(min_length=1, description="Judged dimensions, in order.")
    comment: bool = Field(default=True, description="Offer a free-text comment.")
    per_step: bool = Field(default=False, description="Also judge each trajectory step.")

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise ValueError("dimension names must be distinct")
        return self


#: What a review queue can be named.
QUEUE_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class ReviewConfig(BaseModel):
    """The config of a `human` ladder step: where items go and how people judge them."""

    model_config = ConfigDict(extra="forbid")

    queue: str = Field(
        default="default",
        pattern=QUEUE_PATTERN,
        description="Review queue the items join.",
    )
    guidelines: str = Field(default="", description="Markdown instructions shown to reviewers.")
    rubric: Rubric = Field(description="The dimensions reviewers judge.")
    overlap: int = Field(default=1, ge=1, le=20, description="Independent answers per item.")
    gold_rate: float = Field(
        default=0.0, ge=0, le=1, description="Share of a reviewer's tasks drawn from gold items."
    )
    claim_ttl_s: float = Field(
        default=600,
        gt=0,
        le=86400,
        description="A lease expires this long after its last heartbeat.",
    )
    on_deadline: Literal["best_lower_tier", "infra_error"] = Field(
        default="best_lower_tier",
        description="At the job's deadline, an unanswered item gets the best lower-tier reward "
        "(marked as such) or an infra_error.",
    )
    keep_open_after_deadline: bool = Field(
        default=True,
        description="At the job's deadline the item's review tasks stay open: people's later "
        "answer revises the fallback reward (revision 2). False closes them then.",
    )
    min_agreement: float = Field(
        default=0.667,
        ge=-1,
        le=1,
        description="Krippendorff's alpha below which an item goes to adjudication.",
    )
    min_gold_accuracy: float = Field(
        default=0.7, ge=0, le=1, description="Reviewers below this gold accuracy are paused."
    )


def config_error(exc: ValidationError) -> str:
    """A ValidationError as one line per error, each naming its field."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )


class HumanTier:
    """People, through the review queue (deferred: no tier task runs it)."""

    name: ClassVar[str] = "human"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "review"
    cost_class: ClassVar[float] = 100.0
    kinds: ClassVar[frozenset[str]] = frozenset({"molecule", "code", "json", "text"})
    #: Its canonical payload is the candidate's JSON text: a cache key costs no more to derive
    #: than to look up, so the per-process key memo does not keep this tier's keys.
    cheap_canonical_payload: ClassVar[bool] = True

    def validate_config(self, config: Mapping[str, Any]) -> None:
        try:
            ReviewConfig.model_validate(dict(config))
        except ValidationError as exc:
            raise ValueError(config_error(exc)) from None

    def canonical_payload(self, item: Candidate) -> str:
        return stable_json({"payload": item.payload, "reference": item.reference})

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        del config
        return [
            Verdict(
                status=VerdictStatus.error,
                reason="people_only",
                feedback="the human tier's verdicts come from people through the review queue; "
                "they cannot be computed here",
                tier=self.name,
                tier_version=self.version,
            )
            for _ in items
        ]
