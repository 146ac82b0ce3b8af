"""chem.surrogate: 3D embedding and force-field strain, GFN2-xTB single point, learned surrogate.

Tens to hundreds of milliseconds per molecule. The score is the learned model's prediction
mapped linearly onto [0, 1] when a model is configured, otherwise exp(-strain / scale).
The uncertainty is in the score's units, so a gate can set it beside the score
(`abs(score - 0.8) < 2 * uncertainty`): the model's calibrated standard deviation (ensemble
spread times the scale stored with the model, `surrogate_model.SurrogateModel.predict`) carried
through the score's mapping, half the width of [score(mean - std), score(mean + std)] after
clipping to [0, 1]. A molecule predicted far outside the scored window is sure of its score and
has an uncertainty near 0. Without a model, or when the score is the strain's, it is null: the
model's spread says nothing about that score. The spread in the target's units is the
`model_std` component.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from rdkit import rdBase

from tiers.base import Candidate, Cost, Stopwatch, Verdict, VerdictStatus, missing_package
from tiers.chem.conformers import ForceFieldName, Geometry, embed_and_minimise
from tiers.chem.molecule import (
    FragmentPolicy,
    ParsedMolecule,
    candidate_smiles,
    canonical_or_raw,
    fmt,
    parse_smiles,
)
from tiers.chem.settings import ChemSettings
from tiers.chem.surrogate_model import SurrogateModel, SurrogateModelError
from tiers.chem.xtb import XtbError, XtbMethod, xtb_single_point

HARTREE_TO_KCAL = 627.509474


class ChemSurrogateConfig(BaseModel):
    """Policy configuration of chem.surrogate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_smiles_length: int = Field(default=2000, gt=0)
    fragments: FragmentPolicy = "largest"
    max_heavy_atoms: int = Field(
        default=80, ge=1, description="Larger molecules fail with reason too_large."
    )
    forcefield: bool = Field(default=True, description="Embed, minimise and compute strain.")
    xtb: bool = Field(default=True, description="GFN-xTB single point (needs forcefield).")
    model: Literal["auto", "required", "off"] = Field(
        default="auto",
        description="Learned surrogate: used when a model file is configured (auto), "
        "an error when none is (required), or skipped (off).",
    )
    score: Literal["auto", "model", "strain"] = Field(
        default="auto", description="auto: the model's prediction if a model ran, else strain."
    )
    n_conformers: int = Field(default=8, ge=1, le=300)
    seed: int = Field(default=42, ge=0, description="ETKDG random seed: fixed, reproducible.")
    embed_timeout_s: float = Field(default=10.0, gt=0, le=600)
    force_field: ForceFieldName = "MMFF94"
    max_ff_iterations: int = Field(default=2000, ge=10)
    xtb_method: XtbMethod = "GFN2-xTB"
    xtb_max_iterations: int = Field(default=250, ge=10)
    atom_charges: bool = Field(
        default=False, description="Also report each atom's xTB charge as xtb_charge_<index>."
    )
    max_strain_kcal: float | None = Field(
        default=None, gt=0, description="Strain above this fails the molecule."
    )
    strain_scale_kcal: float = Field(
        default=10.0, gt=0, description="Strain score = exp(-strain / strain_scale_kcal)."
    )
    model_score_low: float = Field(default=0.0, description="Prediction that maps to score 0.")
    model_score_high: float = Field(default=1.0, description="Prediction that maps to score 1.")

    @model_validator(mode="after")
    def _consistent(self) -> ChemSurrogateConfig:
        if self.xtb and not self.forcefield:
            raise ValueError("xtb needs a geometry: set forcefield true or xtb false")
        if self.score == "strain" and not self.forcefield:
            raise ValueError("score 'strain' needs forcefield true")
        if self.score == "model" and self.model == "off":
            raise ValueError("score 'model' needs model 'auto' or 'required'")
        if self.model_score_low == self.model_score_high:
            raise ValueError("model_score_low and model_score_high must differ")
        if not (self.forcefield or self.model != "off"):
            raise ValueError("nothing to do: enable forcefield or the model")
        return self


def parse_config(config: Mapping[str, Any]) -> ChemSurrogateConfig:
    try:
        return ChemSurrogateConfig.model_validate(dict(config))
    except ValidationError as exc:
        raise ValueError(f"invalid chem.surrogate config: {exc}") from exc


class ChemSurrogateTier:
    """Force-field strain, GFN2-xTB properties and a learned surrogate with uncertainty."""

    name: ClassVar[str] = "chem.surrogate"
    version: ClassVar[str] = "1.0.0"
    queue: ClassVar[str] = "tier.sim"
    cost_class: ClassVar[float] = 0.1
    kinds: ClassVar[frozenset[str]] = frozenset({"molecule"})

    settings_model: ClassVar[type[ChemSettings]] = ChemSettings

    def __init__(self, settings: ChemSettings | None = None) -> None:
        self.settings = settings or ChemSettings()
        self.model_path: Path | None = self.settings.surrogate_model_path
        self._model: SurrogateModel | None = None

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Raise ValueError with a clear message when `config` is not valid for this tier."""
        parse_config(config)

    def missing_packages(self, config: Mapping[str, Any]) -> list[str]:
        """What this process lacks to run `config`: tblite for xTB, scikit-learn for a model."""
        cfg = parse_config(config)
        wanted = []
        if cfg.xtb and cfg.forcefield:
            wanted.append(("tblite", "quantum"))
        if cfg.model != "off" and (self.model_path is not None or cfg.model == "required"):
            wanted += [("sklearn", "ml"), ("joblib", "ml")]
        return [m for m in (missing_package(*w) for w in wanted) if m is not None]

    def canonical_payload(self, item: Candidate) -> str:
        """Canonical isomeric SMILES of the whole input; the raw stripped text if it won't parse."""
        return canonical_or_raw(candidate_smiles(item))

    def model(self) -> SurrogateModel | None:
        """The learned model (loaded once), or None when no model file is configured."""
        if self.model_path is None:
            return None
        if self._model is None:
            self._model = SurrogateModel.load(self.model_path)
        return self._model

    def _verdict(self, status: VerdictStatus, **fields: Any) -> Verdict:
        return Verdict(status=status, tier=self.name, tier_version=self.version, **fields)

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """One verdict per item, in order; embed/xTB failures are verdicts with reasons."""
        cfg = parse_config(config)
        verdicts: list[Verdict | None] = [None] * len(items)
        parsed: list[ParsedMolecule] = []
        costs: list[Stopwatch] = []
        with rdBase.CaptureErrorLog():
            for i, item in enumerate(items):
                watch = Stopwatch()
                with watch.measure():
                    p = parse_smiles(
                        candidate_smiles(item),
                        max_length=cfg.max_smiles_length,
                        fragments=cfg.fragments,
                    )
                    if p.mol is None:
                        verdicts[i] = self._verdict(
                            VerdictStatus.failed,
                            score=0.0,
                            components={"valid": 0.0},
                            feedback=p.message,
                            reason=p.reason,
                        )
                    elif p.mol.GetNumHeavyAtoms() > cfg.max_heavy_atoms:
                        verdicts[i] = self._verdict(
                            VerdictStatus.failed,
                            score=0.0,
                            components={"valid": 1.0, "heavy_atoms": p.mol.GetNumHeavyAtoms()},
                            feedback=f"The molecule has {p.mol.GetNumHeavyAtoms()} heavy atoms; "
                            f"at most {cfg.max_heavy_atoms} are accepted by this tier.",
                            reason="too_large",
                        )
                parsed.append(p)
                costs.append(watch)

            todo = [i for i, v in enumerate(verdicts) if v is None]
            model_watch = Stopwatch()
            with model_watch.measure():
                predictions, model_error = self._predict(cfg, [parsed[i] for i in todo])
            model_share = model_watch.cost(len(todo))

            for slot, i in enumerate(todo):
                with costs[i].measure():
                    try:
                        verdicts[i] = self._verify_one(
                            cfg, parsed[i], predictions[slot] if predictions else None, model_error
                        )
                    except Exception as exc:  # a bug of ours must not lose the batch
                        verdicts[i] = self._verdict(
                            VerdictStatus.error,
                            reason="internal_error",
                            feedback=f"chem.surrogate failed: {type(exc).__name__}: {exc}",
                        )
        out: list[Verdict] = []
        shared = set(todo)
        for i, verdict in enumerate(verdicts):
            assert verdict is not None
            cost = costs[i].cost()
            if i in shared:  # the model ran once for the batch: each item carries its share
                cost = Cost(
                    cpu_s=cost.cpu_s + model_share.cpu_s, wall_s=cost.wall_s + model_share.wall_s
                )
            verdict.cost = cost
            out.append(verdict)
        return out

    def _predict(
        self, cfg: ChemSurrogateConfig, parsed: list[ParsedMolecule]
    ) -> tuple[list[tuple[float, float | None]], str | None]:
        """One vectorised model call for the batch: (mean, std) per molecule, or why none."""
        if cfg.model == "off" or not parsed:
            return [], None
        try:
            model = self.model()
        except SurrogateModelError as exc:
            return [], str(exc)
        except ImportError as exc:
            return [], (
                f"scikit-learn/joblib missing ({exc}); install the 'ml' extra "
                "(pip install 'verifier-service[ml]')"
            )
        if model is None:
            if cfg.model == "required" or cfg.score == "model":
                return [], (
                    "no surrogate model is configured (settings chem.surrogate_model_path, "
                    "env VERIFIER_CHEM__SURROGATE_MODEL_PATH); train one with "
                    "'verifier-service chem train-surrogate'"
                )
            return [], None
        try:
            mean, std = model.predict([p.mol for p in parsed if p.mol is not None])
        except Exception as exc:  # a model that does not fit its own features, say
            return [], f"surrogate model prediction failed: {type(exc).__name__}: {exc}"
        return [
            (float(mean[k]), None if std is None else float(std[k])) for k in range(len(parsed))
        ], None

    def _verify_one(
        self,
        cfg: ChemSurrogateConfig,
        parsed: ParsedMolecule,
        prediction: tuple[float, float | None] | None,
        model_error: str | None,
    ) -> Verdict:
        mol = parsed.mol
        assert mol is not None
        components: dict[str, float] = {"valid": 1.0, "heavy_atoms": float(mol.GetNumHeavyAtoms())}
        feedback: list[str] = [f"Canonical SMILES {parsed.smiles}."]
        if model_error is not None:
            return self._verdict(
                VerdictStatus.error,
                components=components,
                feedback=model_error,
                reason="model_unavailable",
            )
        uncertainty: float | None = None
        if prediction is not None:
            mean, std = prediction
            components["model_prediction"] = mean
            if std is not None:
                components["model_std"] = std
                if cfg.score in {"auto", "model"}:
                    uncertainty = score_uncertainty(
                        mean, std, cfg.model_score_low, cfg.model_score_high
                    )
            model = self._model
            target = model.target if model is not None else "value"
            spread = f" +/- {fmt(std)}" if std is not None else ""
            feedback.append(f"Surrogate predicts {target} = {fmt(mean)}{spread}.")

        geometry: Geometry | None = None
        if cfg.forcefield:
            result = embed_and_minimise(
                mol,
                n_conformers=cfg.n_conformers,
                seed=cfg.seed,
                timeout_s=cfg.embed_timeout_s,
                force_field=cfg.force_field,
                max_iterations=cfg.max_ff_iterations,
            )
            if not isinstance(result, Geometry):
                return self._verdict(
                    VerdictStatus.error if result.ours else VerdictStatus.failed,
                    score=None if result.ours else 0.0,
                    uncertainty=uncertainty,
                    components=components,
                    feedback=" ".join([*feedback, result.message]),
                    reason=result.reason,
                )
            geometry = result
            components.update(
                {
                    "conformers": float(len(geometry.energies)),
                    "ff_energy_kcal": geometry.energy_kcal,
                    "strain_kcal": geometry.strain_kcal,
                    "ff_converged": float(geometry.converged[geometry.pose_id]),
                    "ff_uff": float(geometry.force_field == "UFF"),
                }
            )
            fallback = (
                " (UFF fallback: MMFF94 lacks parameters)"
                if geometry.force_field == ("UFF") and cfg.force_field != "UFF"
                else ""
            )
            feedback.append(
                f"{geometry.force_field}{fallback}: strain {fmt(geometry.strain_kcal)} kcal/mol "
                f"over {len(geometry.energies)} conformers."
            )

        if cfg.xtb and geometry is not None:
            charge = sum(a.GetFormalCharge() for a in mol.GetAtoms())
            unpaired = sum(a.GetNumRadicalElectrons() for a in mol.GetAtoms())
            components["charge"] = float(charge)
            components["multiplicity"] = float(unpaired + 1)
            conf_id = geometry.mol.GetConformers()[geometry.best_id].GetId()
            try:
                xtb = xtb_single_point(
                    geometry.mol,
                    conf_id,
                    method=cfg.xtb_method,
                    charge=charge,
                    uhf=unpaired,
                    max_iterations=cfg.xtb_max_iterations,
                )
            except XtbError as exc:
                return self._verdict(
                    VerdictStatus.error,
                    uncertainty=uncertainty,
                    components=components,
                    feedback=" ".join([*feedback, str(exc)]),
                    reason="xtb_failed",
                )
            components.update(
                {
                    "xtb_energy_hartree": xtb.energy_hartree,
                    "xtb_gap_ev": xtb.gap_ev,
                    "xtb_dipole_debye": xtb.dipole_debye,
                    "xtb_charge_min": min(xtb.charges),
                    "xtb_charge_max": max(xtb.charges),
                }
            )
            if cfg.atom_charges:
                components.update({f"xtb_charge_{k}": q for k, q in enumerate(xtb.charges)})
            feedback.append(
                f"{cfg.xtb_method}: E = {xtb.energy_hartree:.6f} Eh, HOMO-LUMO gap "
                f"{fmt(xtb.gap_ev)} eV, dipole {fmt(xtb.dipole_debye)} D."
            )

        use_model = prediction is not None and cfg.score in {"auto", "model"}
        if use_model and prediction is not None:
            score = model_score(prediction[0], cfg.model_score_low, cfg.model_score_high)
        elif geometry is not None:
            score = math.exp(-geometry.strain_kcal / cfg.strain_scale_kcal)
        else:  # pragma: no cover - the config validator rules this out
            score = 0.0
        score = min(max(score, 0.0), 1.0)

        if (
            cfg.max_strain_kcal is not None
            and geometry is not None
            and geometry.strain_kcal > cfg.max_strain_kcal
        ):
            feedback.append(f"Strain exceeds the limit of {fmt(cfg.max_strain_kcal)} kcal/mol.")
            return self._verdict(
                VerdictStatus.failed,
                score=0.0,
                uncertainty=uncertainty,
                components=components,
                feedback=" ".join(feedback),
                reason="strain_too_high",
            )
        return self._verdict(
            VerdictStatus.passed,
            score=score,
            uncertainty=uncertainty,
            components=components,
            feedback=" ".join(feedback),
        )


def model_score(prediction: float, low: float, high: float) -> float:
    """A prediction mapped linearly onto the score (low -> 0, high -> 1), clipped to [0, 1]."""
    return min(max((prediction - low) / (high - low), 0.0), 1.0)


def score_uncertainty(mean: float, std: float, low: float, high: float) -> float:
    """A prediction's standard deviation in the score's units: half the width of the clipped
    score interval of mean +/- std (std / |high - low| inside the window, less at its edges)."""
    ends = (model_score(mean - std, low, high), model_score(mean + std, low, high))
    return abs(ends[1] - ends[0]) / 2.0
