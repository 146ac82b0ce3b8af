"""Request and response bodies of the reward API."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tiers.base import TextPayload
from tiers.chem.schemas import MoleculePayload
from tiers.code.schemas import CodePayload
from verifier_service.events.schemas import CallbackIn
from verifier_service.policies.schemas import POLICY_NAME_PATTERN

# The answer's models are the wire contract's (light: the client imports them); exported here too.
from verifier_service.wire.jobs import ItemOut as ItemOut
from verifier_service.wire.jobs import JobOut as JobOut
from verifier_service.wire.jobs import StoredVerdict as StoredVerdict
from verifier_service.wire.rewards import Reward as Reward
from verifier_service.wire.rewards import RewardCost as RewardCost
from verifier_service.wire.rewards import RewardStatus as RewardStatus


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: Longest metadata.group accepted (it is stored and indexed with the item).
MAX_GROUP_LENGTH = 256
#: Longest deadline_s accepted: 30 days.
MAX_DEADLINE_S = 30 * 86400.0


def _check_group(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    group = (metadata or {}).get("group")
    if group is None:
        return metadata
    if isinstance(group, bool) or not isinstance(group, str | int):
        raise ValueError("metadata.group must be a string or an integer")
    text = str(group)
    if len(text) > MAX_GROUP_LENGTH or "\x00" in text:
        raise ValueError(
            f"metadata.group must be at most {MAX_GROUP_LENGTH} characters, without NUL"
        )
    return metadata


class _CandidateBase(_In):
    reference: dict[str, Any] | None = Field(
        default=None, description="What to compare against (schema, reference molecules, ...)."
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="Seen by gates. metadata.group (a string or integer) names the GRPO group "
        "of the item, which group-selecting ladder steps rank within.",
    )

    _group = field_validator("metadata")(_check_group)


class MoleculeCandidate(_CandidateBase):
    """A molecule candidate."""

    kind: Literal["molecule"]
    payload: MoleculePayload


class CodeCandidate(_CandidateBase):
    """A code candidate with tests."""

    kind: Literal["code"]
    payload: CodePayload


class JsonCandidate(_CandidateBase):
    """A tool call or structured action, checked against reference.schema."""

    kind: Literal["json"]
    payload: dict[str, Any]

    @field_validator("reference")
    @classmethod
    def _schema_is_valid(cls, reference: dict[str, Any] | None) -> dict[str, Any] | None:
        from tiers.schema import check_schema

        if reference is not None and "schema" in reference:
            check_schema(reference["schema"])
        return reference


class TextCandidate(_CandidateBase):
    """Free text."""

    kind: Literal["text"]
    payload: TextPayload


CandidateIn = Annotated[
    MoleculeCandidate | CodeCandidate | JsonCandidate | TextCandidate,
    Field(discriminator="kind"),
]


class TrajectoryStep(_In):
    """One step of a trajectory: the action taken and what the environment answered."""

    action: CandidateIn
    observation: str | None = None


class Trajectory(_In):
    """A multi-step rollout: per-step rewards plus an outcome reward."""

    kind: Literal["trajectory"]
    steps: list[TrajectoryStep] = Field(min_length=1)
    final_answer: CandidateIn | None = None
    metadata: dict[str, Any] | None = None

    _group = field_validator("metadata")(_check_group)


ItemIn = Annotated[
    MoleculeCandidate | CodeCandidate | JsonCandidate | TextCandidate | Trajectory,
    Field(discriminator="kind"),
]


class RewardRequest(_In):
    """Items to score under a policy."""

    policy: str = Field(
        default="default", pattern=POLICY_NAME_PATTERN, description="Name of the policy to run."
    )
    items: list[ItemIn] = Field(min_length=1, description="Candidates or trajectories.")
    wait_s: float | None = Field(
        default=None, ge=0, description="Wait this long for the rewards before answering 202."
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DEADLINE_S,
        description="At this many seconds, finish with what is available (at most 30 days).",
    )
    callback: CallbackIn | None = Field(
        default=None,
        description="Send this job's events (item.finished, item.revised, job.finished) to a "
        "URL as signed webhooks (Standard Webhooks), retried with backoff.",
    )
