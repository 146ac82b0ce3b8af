"""The payload of a `molecule` candidate (also the API's request model of molecule items)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tiers.chem.molecule import MAX_SMILES_LENGTH


class MoleculePayload(BaseModel):
    """A molecule as SMILES."""

    model_config = ConfigDict(extra="forbid")

    smiles: str = Field(
        max_length=MAX_SMILES_LENGTH,
        description=f"SMILES string as the policy wrote it (at most {MAX_SMILES_LENGTH} "
        "characters: the most the chemistry tiers can read safely).",
    )
