"""What the calibration page draws: per audited gate, the cheap tier against the tier above."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import BaseModel, Field

from verifier_service.console.overview.schemas import Window


class Confusion(BaseModel):
    """The gate's decisions on the audit sample against the upper tier's judgement."""

    passed_good: int = Field(description="The gate let it up and the upper tier agrees.")
    passed_bad: int = Field(description="The gate let it up; the upper tier scores it low.")
    held_good: int = Field(description="The gate held it back; the upper tier scores it high.")
    held_bad: int = Field(description="The gate held it back and the upper tier agrees.")


class CalibrationBucket(BaseModel):
    """The audit sample of one stretch of time."""

    start: datetime
    pairs: int
    spearman: float | None = Field(description="Rank correlation; null under 2 pairs or ties.")
    confusion: Confusion


class CalibrationPoint(BaseModel):
    """One audited item: its cheap value, its upper score, and what the gate decided."""

    cheap: float
    upper: float
    passed: bool = Field(description="The gate let it up (else it climbed only as an audit).")
    at: datetime = Field(description="When the upper tier's verdict was stored.")


class GateCalibration(BaseModel):
    """How a gate's cheap tier agrees with the tier above, over its audit sample."""

    policy: str
    version: int
    kind: str
    step: int = Field(description="Index of the gated ladder step (its tier is `upper_tier`).")
    cheap_tier: str
    upper_tier: str
    gate: str
    cheap_value: str = Field(description="What the cheap side reads: `score` or a component.")
    audit_fraction: float
    threshold: float = Field(
        description="Where the upper tier's score counts as good: the gate's own threshold "
        "when the gate compares the cheap value with a number, else 0.5 (or as asked)."
    )
    pairs: int = Field(description="Items in the audit sample with both scores.")
    spearman: float | None
    confusion: Confusion
    buckets: list[CalibrationBucket]
    points: list[CalibrationPoint] = Field(description="The sample's pairs (at most 1,000).")


class JudgeConfusion(BaseModel):
    """A model judge's good/bad against people's, each score split at the threshold."""

    both_good: int = Field(description="The judge and people both score it good.")
    judge_good_people_bad: int = Field(description="The judge scores it good; people do not.")
    judge_bad_people_good: int = Field(description="People score it good; the judge does not.")
    both_bad: int = Field(description="The judge and people both score it bad.")


class JudgeDay(BaseModel):
    """A judge against people over one UTC day."""

    day: date
    pairs: int
    agreement: float | None = Field(description="Share of items where both sides agree.")
    spearman: float | None = Field(description="Rank correlation; null under 2 pairs or ties.")
    confusion: JudgeConfusion


class JudgeCalibration(BaseModel):
    """How a model judge (a judge tier, an endpoint's model under a policy version's
    templates) agrees with people on the items that went from it to people."""

    policy: str
    version: int = Field(description="The policy version: the judge's template version.")
    kind: str
    tier: str = Field(
        description="The judge tier: `judge.llm` (a rubric score), `judge.prm` (a step's "
        "process score, or a chain's combined one) or `judge.rank` (a place in its GRPO "
        "group: relative to the group, not an absolute grade)."
    )
    judge_step: int
    human_step: int
    endpoint: str
    model: str | None = Field(
        description="The model that judged, as its verdicts recorded it (judge_model); for "
        "verdicts stored before models were recorded, the endpoint's model as configured now."
    )
    gate: str = Field(description="The gate of the human step: why items went to people.")
    threshold: float = Field(
        description="Where a score counts as good, on both sides: a number the human step's "
        "gate compares the judge's score with, else 0.5 (or as asked)."
    )
    pairs: int
    agreement: float | None
    spearman: float | None
    confusion: JudgeConfusion
    days: list[JudgeDay]


class Calibration(BaseModel):
    """Every audited gate of the policies that ran jobs in the window, and every model judge
    whose items people scored in it."""

    window: Window
    since: datetime
    now: datetime
    gates: list[GateCalibration]
    judges: list[JudgeCalibration] = Field(default_factory=list)
