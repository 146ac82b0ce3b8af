"""Bodies of the operators' policy API (the policy document itself is in schemas.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from verifier_service.policies.models import PolicyVersionRecord


class PolicyIn(BaseModel):
    """A policy document, as a JSON object or as YAML/JSON text."""

    model_config = ConfigDict(extra="forbid")

    document: dict[str, Any] | None = Field(default=None, description="The policy as an object.")
    text: str | None = Field(default=None, description="The policy as YAML or JSON text.")
    format: Literal["yaml", "json"] | None = Field(
        default=None, description="Format of `text` (guessed when absent)."
    )
    activate: bool = Field(default=True, description="Make this version active when saved.")

    @model_validator(mode="before")
    @classmethod
    def _not_a_bare_document(cls, data: Any) -> Any:
        # A policy posted as the body itself (the newcomer's first try) would get one "extra
        # inputs" error per key; say what the body is instead.
        if (
            isinstance(data, dict)
            and "document" not in data
            and "text" not in data
            and {"name", "ladders"} & data.keys()
        ):
            raise ValueError(
                "the body is a policy document itself: send it as {\"document\": {...}} "
                "or as YAML text in {\"text\": \"...\"}"
            )
        return data

    @model_validator(mode="after")
    def _one_source(self) -> PolicyIn:
        if (self.document is None) == (self.text is None):
            raise ValueError("give exactly one of `document` and `text`")
        return self

    def source(self) -> str | dict[str, Any]:
        if self.document is not None:
            return self.document
        assert self.text is not None
        return self.text


class PolicySummary(BaseModel):
    """A policy's versions and its active one."""

    name: str
    active_version: int | None
    versions: list[int]


class PolicyVersionOut(BaseModel):
    """One stored policy version."""

    name: str
    version: int
    active: bool
    document: dict[str, Any]
    created_by: str
    created_at: datetime

    @classmethod
    def from_record(cls, record: PolicyVersionRecord, *, active: bool) -> PolicyVersionOut:
        return cls(
            name=record.name,
            version=record.version,
            active=active,
            document=record.document,
            created_by=record.created_by,
            created_at=record.created_at,
        )


class ValidationOut(BaseModel):
    """A document that validated."""

    valid: bool
    name: str
    document: dict[str, Any]


class ReplayIn(PolicyIn):
    """A draft policy to replay over stored items (`activate` is ignored)."""

    job_ids: list[str] | None = Field(
        default=None, description="Replay these jobs' items; default: the policy's latest items."
    )
    limit: int = Field(default=1000, ge=1, le=20_000, description="Most items to replay.")
    compute_missing: bool = Field(
        default=False,
        description="Run tiers for verdicts nobody has computed yet (costs real compute).",
    )
