"""Settings of the chemistry tiers (the service composes them as its `chem` group)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class ChemSettings(BaseModel):
    """Chemistry tiers: runtime limits not set by the policy."""

    dft_timeout_s: float = Field(default=600.0, description="Hard wall clock for one DFT run.")
    dft_memory_mb: int = Field(default=4000, description="Memory cap of the DFT subprocess.")
    surrogate_model_path: Path | None = Field(
        default=None, description="joblib file of the learned surrogate (chem.surrogate)."
    )
