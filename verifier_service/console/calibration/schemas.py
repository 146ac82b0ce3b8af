"""What the calibration page draws: per audited gate, the cheap tier against the tier above."""

from __future__ import annotations

from datetime import datetime

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


class Calibration(BaseModel):
    """Every audited gate of the policies that ran jobs in the window."""

    window: Window
    since: datetime
    now: datetime
    gates: list[GateCalibration]
