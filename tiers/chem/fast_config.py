"""chem.fast's policy configuration: the rules a molecule must pass, the alert catalogs and what
their hits do, the references for similarity, and every component the tier can report (names
that `ranges` may bound)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from rdkit import Chem, rdBase

from tiers.chem.alerts import AlertCatalog, compile_smarts
from tiers.chem.molecule import MAX_SMILES_LENGTH, FragmentPolicy

AlertAction = Literal["filter", "penalty", "report"]

# Elements of organic, drug-like chemistry; the default `allowed_elements`.
ORGANIC_ELEMENTS: tuple[str, ...] = (
    "H", "B", "C", "N", "O", "F", "Si", "P", "S", "Cl", "Se", "Br", "I",
)  # fmt: skip

# Every component chem.fast can report (the similarity ones only when references are given).
COMPONENTS: dict[str, str] = {
    "valid": "1 when the SMILES parsed and sanitized, else 0",
    "passed": "1 when every rule of the config passed, else 0",
    "fragments": "number of disconnected fragments in the input",
    "heavy_atoms": "heavy (non-hydrogen) atoms",
    "mw": "average molecular weight, g/mol",
    "logp": "Crippen logP (Wildman-Crippen)",
    "tpsa": "topological polar surface area, A^2 (N and O contributions)",
    "hbd": "hydrogen-bond donors (RDKit NumHDonors)",
    "hba": "hydrogen-bond acceptors (RDKit NumHAcceptors)",
    "rotatable_bonds": "rotatable bonds (RDKit strict definition)",
    "fsp3": "fraction of sp3 carbons",
    "rings": "rings in the SSSR",
    "aromatic_rings": "aromatic rings",
    "min_ring_size": "smallest ring size (0 when acyclic)",
    "max_ring_size": "largest ring size (0 when acyclic)",
    "stereocentres": "tetrahedral stereocentres, specified or not",
    "unassigned_stereocentres": "stereocentres whose configuration the SMILES leaves open",
    "formal_charge": "net formal charge",
    "charged_atoms": "atoms with a non-zero formal charge",
    "radical_electrons": "unpaired electrons",
    "qed": "quantitative estimate of drug-likeness (Bickerton 2012), 0..1",
    "sa_score": "synthetic accessibility (Ertl & Schuffenhauer 2009), 1 easy .. 10 hard",
    "lipinski_violations": "rule-of-five violations: MW>500, logP>5, HBD>5, HBA>10 (0..4)",
    "veber_violations": "Veber violations: rotatable bonds>10, TPSA>140 (0..2)",
    "alerts": "structural alerts hit (all catalogs and custom SMARTS)",
    "alerts_custom": "custom SMARTS alerts hit",
    "alert_penalty": "multiplier applied to the score by penalty alerts, 0..1",
    "substructures_missing": "required substructures not found",
    "tanimoto_max": "largest Morgan-fingerprint Tanimoto similarity to a reference, 0..1",
    "tanimoto_mean": "mean Morgan-fingerprint Tanimoto similarity to the references, 0..1",
}
CATALOG_COMPONENTS = {f"alerts_{c.lower()}": f"{c} alerts hit" for c in get_args(AlertCatalog)}
COMPONENTS.update(CATALOG_COMPONENTS)


def _default_alerts() -> dict[AlertCatalog, AlertAction]:
    # NIH is left out of the default: it costs about as much as PAINS (~1 ms) and adds little.
    return {"PAINS": "filter", "BRENK": "report"}


class RangeSpec(BaseModel):
    """Inclusive bounds on one component; a molecule outside them fails."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> RangeSpec:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self


class CustomAlert(BaseModel):
    """An operator SMARTS: a hit fails the molecule (filter) or scales its score (penalty)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    smarts: str = Field(min_length=1)
    action: Literal["filter", "penalty"] = "filter"
    penalty: float = Field(default=0.5, ge=0.0, le=1.0, description="Score multiplier per hit.")

    @field_validator("smarts")
    @classmethod
    def _valid_smarts(cls, value: str) -> str:
        if compile_smarts(value) is None:
            raise ValueError(f"invalid SMARTS {value!r}")
        return value


class ChemFastConfig(BaseModel):
    """Policy configuration of chem.fast."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_smiles_length: int = Field(
        default=2000,
        gt=0,
        le=MAX_SMILES_LENGTH,
        description=f"Longer input fails unparsed (at most {MAX_SMILES_LENGTH}).",
    )
    fragments: FragmentPolicy = Field(
        default="largest",
        description="Disconnected input: keep all, keep the largest (salt stripping), or reject.",
    )
    allowed_elements: list[str] | None = Field(
        default=list(ORGANIC_ELEMENTS), description="Element symbols allowed; null allows all."
    )
    allow_radicals: bool = False
    allow_charged_atoms: bool = True
    max_abs_formal_charge: int | None = Field(default=None, ge=0, description="On the net charge.")
    ranges: dict[str, RangeSpec] = Field(
        default_factory=dict, description="Component name -> {min, max}, e.g. heavy_atoms."
    )
    alerts: dict[AlertCatalog, AlertAction] = Field(
        default_factory=_default_alerts,
        description="RDKit FilterCatalog -> what a hit does.",
    )
    alert_penalty: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Score multiplier per hit of a 'penalty' catalog."
    )
    custom_alerts: list[CustomAlert] = Field(default_factory=list)
    required_substructures: list[str] = Field(
        default_factory=list, description="SMARTS that must all match."
    )
    reference_smiles: list[str] = Field(
        default_factory=list, description="References for similarity, besides each item's own."
    )
    fingerprint_radius: int = Field(default=2, ge=1, le=6)
    fingerprint_size: int = Field(default=2048, ge=64, le=16384)

    @field_validator("allowed_elements")
    @classmethod
    def _known_elements(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        table = Chem.GetPeriodicTable()
        for symbol in value:
            try:
                number = table.GetAtomicNumber(symbol)
            except Exception:
                number = -1
            if number <= 0:
                raise ValueError(f"unknown element symbol {symbol!r}")
        return value

    @field_validator("ranges")
    @classmethod
    def _known_components(cls, value: dict[str, RangeSpec]) -> dict[str, RangeSpec]:
        unknown = sorted(set(value) - set(COMPONENTS))
        if unknown:
            raise ValueError(
                f"unknown component(s) {unknown} in ranges; known: {sorted(COMPONENTS)}"
            )
        return value

    @field_validator("required_substructures")
    @classmethod
    def _valid_required(cls, value: list[str]) -> list[str]:
        for smarts in value:
            if compile_smarts(smarts) is None:
                raise ValueError(f"invalid SMARTS {smarts!r} in required_substructures")
        return value

    @field_validator("reference_smiles")
    @classmethod
    def _valid_references(cls, value: list[str]) -> list[str]:
        for smiles in value:
            if len(smiles) > MAX_SMILES_LENGTH:
                raise ValueError(f"reference SMILES longer than {MAX_SMILES_LENGTH} characters")
            with rdBase.BlockLogs():
                mol = Chem.MolFromSmiles(smiles)
            if mol is None:
                raise ValueError(f"reference SMILES {smiles!r} does not parse")
        return value


def parse_config(config: Mapping[str, Any]) -> ChemFastConfig:
    """Validated config; ValueError with every problem when it is bad."""
    try:
        return ChemFastConfig.model_validate(dict(config))
    except ValidationError as exc:
        raise ValueError(f"invalid chem.fast config: {exc}") from exc
