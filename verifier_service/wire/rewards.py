"""The reward of one item, as the API answers it and the client reads it."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class RewardStatus(StrEnum):
    scored = "scored"
    pending = "pending"
    infra_error = "infra_error"


class RewardCost(BaseModel):
    """What verifying an item cost."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    cost_units: float = 0.0


class Reward(BaseModel):
    """The reward of one item."""

    value: float | None
    status: RewardStatus
    reason: str | None = None
    components: dict[str, float] = Field(default_factory=dict)
    step_rewards: list[float | None] | None = None
    outcome_reward: float | None = None
    fidelity: str | None = Field(default=None, description="Highest tier that contributed.")
    provenance: list[str] = Field(default_factory=list, description="Verdict ids used.")
    cost: RewardCost = Field(default_factory=RewardCost)
    revision: int | None = Field(
        default=None,
        description="1 when first finished; +1 each time it changed after that (e.g. a "
        "deadline fallback superseded by people's answer). See GET /v1/rewards/changes.",
    )
