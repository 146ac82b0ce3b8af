"""Lab results as a surrogate's training data: read an oracle's measured values for molecules,
retrain the learned surrogate of chem.surrogate on them, and measure how well the surrogate in
use before and the retrained one after agree with results held out of the training.

Calibration of one model on held-out results is the mean absolute error, Spearman's rank
correlation and the coverage of its uncertainty interval: the fraction of measured values inside
mean +/- 2 std (about 0.95 for a well calibrated Gaussian uncertainty; a model without an
uncertainty has none).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rdkit import Chem, rdBase
from sqlalchemy.orm import Session

from tiers.chem.surrogate_model import (
    FeatureKind,
    SurrogateModel,
    SurrogateModelError,
    fit_surrogate,
    read_training_csv,
)
from verifier_service.oracle import repository

#: Held-out results needed for numbers that mean something.
MIN_HELD_OUT = 3


@dataclass(frozen=True)
class LabResult:
    """One molecule an oracle measured: its SMILES and the value of the chosen field."""

    item_id: str
    smiles: str
    value: float


@dataclass(frozen=True)
class LabResults:
    """An oracle's usable results for one field, and how many answered items were not usable."""

    oracle: str
    field: str
    results: list[LabResult]
    skipped: int


@dataclass(frozen=True)
class Calibration:
    """How one model's predictions agree with measured values."""

    label: str
    n: int
    mae: float
    spearman: float | None
    #: Fraction of measured values within mean +/- 2 std; None when the model has no std.
    coverage: float | None
    mean_std: float | None


@dataclass(frozen=True)
class RetrainReport:
    """What a retraining did: the data it used and the calibration before and after."""

    lab: LabResults
    n_train_lab: int
    n_train_base: int
    n_held_out: int
    before: Calibration | None
    after: Calibration
    #: The new model on the same held-out results with its raw (uncalibrated) spread.
    after_raw: Calibration
    #: What the saved model multiplies its raw spread by.
    uncertainty_scale: float
    old_model: Path | None
    path: Path


def lab_results(session: Session, oracle: str, field: str, latest: int | None = None) -> LabResults:
    """The values of `field` that `oracle` measured for molecule items, one per molecule (the
    latest measurement wins), from every result or only the `latest` ones. Failed measurements,
    results without the field or with a value that is not a finite number, and SMILES RDKit
    cannot read are counted as skipped."""
    by_smiles: dict[str, LabResult] = {}
    skipped = 0
    with rdBase.BlockLogs():
        for row in repository.answered_molecules(session, oracle, latest):
            values = (row.result or {}).get("values") or {}
            smiles = row.payload.get("smiles") if isinstance(row.payload, dict) else None
            raw = values.get(field) if isinstance(values, dict) else None
            value = float(raw) if isinstance(raw, int | float) else math.nan
            if not isinstance(smiles, str) or not math.isfinite(value):
                skipped += 1
                continue
            mol = Chem.MolFromSmiles(smiles)
            if mol is None:
                skipped += 1
                continue
            key = Chem.MolToSmiles(mol)
            if key in by_smiles:
                skipped += 1  # measured twice: the later result stands for the molecule
            by_smiles[key] = LabResult(item_id=row.id, smiles=key, value=value)
    return LabResults(oracle=oracle, field=field, results=list(by_smiles.values()), skipped=skipped)


def split(
    results: Sequence[LabResult], held_out_fraction: float, seed: int
) -> tuple[list[LabResult], list[LabResult]]:
    """(training, held out): a seeded shuffle of the molecules (in SMILES order first, so the
    same results and seed give the same split), at least MIN_HELD_OUT held out."""
    shuffled = sorted(results, key=lambda r: r.smiles)
    random.Random(seed).shuffle(shuffled)
    n_held = max(MIN_HELD_OUT, round(len(shuffled) * held_out_fraction))
    return shuffled[n_held:], shuffled[:n_held]


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their average rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1, dtype=np.float64)
    for value in np.unique(values):
        tied = values == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rank correlation; None when either side is constant (it is undefined)."""
    ra, rb = _ranks(a), _ranks(b)
    if len(a) < 2 or ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def calibrate(model: SurrogateModel, results: Sequence[LabResult], label: str) -> Calibration:
    """Calibration of `model` against measured `results`."""
    if not results:
        raise SurrogateModelError("no results to calibrate against")
    mols = [Chem.MolFromSmiles(r.smiles) for r in results]
    measured = np.asarray([r.value for r in results], dtype=np.float64)
    mean, std = model.predict(mols)
    coverage = mean_std = None
    if std is not None:
        coverage = float(np.mean(np.abs(measured - mean) <= 2.0 * std))
        mean_std = float(np.mean(std))
    return Calibration(
        label=label,
        n=len(results),
        mae=float(np.mean(np.abs(measured - mean))),
        spearman=spearman(mean, measured),
        coverage=coverage,
        mean_std=mean_std,
    )


def retrain(
    lab: LabResults,
    out: Path,
    *,
    old_model: Path | None = None,
    base_csv: Path | None = None,
    features: FeatureKind = "morgan",
    n_estimators: int = 100,
    held_out_fraction: float = 0.2,
    seed: int = 0,
) -> RetrainReport:
    """Retrain the surrogate on an oracle's results (`lab_results`, read in a transaction of
    its own: training holds no connection) plus `base_csv`'s rows, if given; report the old and
    the new model's calibration on held-out results, save the new one.

    The after numbers are those of the model fitted (and its uncertainty calibrated) without
    the held-out results; the file written is then refitted on every result with that same
    uncertainty scale, as `chem train-surrogate` does."""
    oracle, field = lab.oracle, lab.field
    if len(lab.results) < 2 * MIN_HELD_OUT + 4:
        raise SurrogateModelError(
            f"oracle {oracle!r} has {len(lab.results)} usable results for {field!r} "
            f"({lab.skipped} skipped); retraining needs at least {2 * MIN_HELD_OUT + 4}"
        )
    train, held_out = split(lab.results, held_out_fraction, seed)
    base_mols: list[Chem.Mol] = []
    base_values: list[float] = []
    if base_csv is not None:
        base_mols, base_values, _, _ = read_training_csv(base_csv)
    before = None
    if old_model is not None:
        before = calibrate(SurrogateModel.load(old_model), held_out, "before")
    mols = base_mols + [Chem.MolFromSmiles(r.smiles) for r in train]
    values = base_values + [r.value for r in train]

    fitted = fit_surrogate(
        mols, values, features=features, n_estimators=n_estimators, seed=seed, target=field
    )
    after = calibrate(fitted, held_out, "after")
    after_raw = calibrate(replace(fitted, uncertainty_scale=1.0), held_out, "raw")
    # Refitted on every result; the scale stays the one the held-out results just checked.
    model = fit_surrogate(
        mols + [Chem.MolFromSmiles(r.smiles) for r in held_out],
        values + [r.value for r in held_out],
        features=features, n_estimators=n_estimators, seed=seed, target=field, calibrate=False,
    )  # fmt: skip
    model.uncertainty_scale = fitted.uncertainty_scale
    model.metrics = {"mae": after.mae, "n_held_out": float(len(held_out))}
    if after.spearman is not None:
        model.metrics["spearman"] = after.spearman
    if after.coverage is not None and after_raw.coverage is not None:
        model.metrics["coverage_2std"] = after.coverage
        model.metrics["coverage_2std_raw"] = after_raw.coverage
    model.metrics["uncertainty_scale"] = model.uncertainty_scale
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return RetrainReport(
        lab=lab,
        n_train_lab=len(train),
        n_train_base=len(base_mols),
        n_held_out=len(held_out),
        before=before,
        after=after,
        after_raw=after_raw,
        uncertainty_scale=model.uncertainty_scale,
        old_model=old_model,
        path=out,
    )
