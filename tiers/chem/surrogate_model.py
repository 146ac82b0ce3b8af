"""The learned surrogate of chem.surrogate: featurisation, training, saving, prediction.

A model file is a joblib dump of a dict (see `SurrogateModel.save`) holding a fitted
scikit-learn regressor and how to featurise molecules for it. Any regressor works; ensembles
(random forest, extra trees, bagging) and Gaussian processes also give an uncertainty: the
standard deviation across ensemble members, or the GP's predictive standard deviation.
scikit-learn and joblib are the optional extra `ml` and are imported only here, lazily.

The raw spread of a random forest's trees is no calibrated error bar (on held-out lab results
mean +/- 2 std held every measured value, where about 95% is what a Gaussian 2 sigma promises).
Training therefore calibrates it, split-conformal style: each training row is predicted by a
forest fitted without it (K-fold cross-validation), its error divided by that forest's std gives
a z; the scale is half the z below which 95% of rows fall (the conformal rank
ceil((n + 1) * 0.95)), so that mean +/- 2 * scale * std covers about 95% of new molecules.
The scale is stored in the model file (`uncertainty_scale`; 1.0 for files written before it) and
`SurrogateModel.predict` multiplies the std by it.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rdkit import Chem, rdBase
from rdkit.Chem import rdFingerprintGenerator, rdMolDescriptors

FeatureKind = Literal["morgan", "descriptors"]
MODEL_FORMAT = "verifier-service/chem-surrogate/1"
#: Share of molecules whose |error| the calibrated mean +/- 2 std should cover.
COVERAGE_TARGET = 0.95
#: Cross-validation folds of the calibration, and the fewest rows it is made on.
CALIBRATION_FOLDS = 5
MIN_CALIBRATION_ROWS = 10


class SurrogateModelError(ValueError):
    """A model file or training set that cannot be used, with the reason."""


def descriptor_names() -> list[str]:
    """Names of the `descriptors` features: RDKit's C++ property set plus the 42 MQNs."""
    names = [str(n) for n in rdMolDescriptors.Properties.GetAvailableProperties()]
    return names + [f"MQN{i}" for i in range(1, 43)]


def featurize(
    mols: Sequence[Chem.Mol], kind: FeatureKind, *, radius: int = 2, n_bits: int = 2048
) -> np.ndarray:
    """Feature matrix, one row per molecule (float64)."""
    if kind == "morgan":
        gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
        out = np.zeros((len(mols), n_bits), dtype=np.float64)
        for i, mol in enumerate(mols):
            out[i] = gen.GetCountFingerprintAsNumPy(mol)
        return out
    props = rdMolDescriptors.Properties()
    rows = [list(props.ComputeProperties(m)) + list(rdMolDescriptors.MQNs_(m)) for m in mols]
    return np.asarray(rows, dtype=np.float64).reshape(len(mols), -1)


def predict_raw(estimator: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """An estimator's mean and raw uncertainty (std across ensemble members, or a GP's
    predictive std) on a feature matrix; None when it has none."""
    est = estimator
    members = getattr(est, "estimators_", None)
    name = type(est).__name__
    if members is not None and name in {
        "RandomForestRegressor",
        "ExtraTreesRegressor",
    }:
        per_member = np.stack([m.predict(x) for m in members])
        return per_member.mean(axis=0), per_member.std(axis=0)
    if members is not None and name == "BaggingRegressor":
        per_member = np.stack(
            [
                m.predict(x[:, cols])
                for m, cols in zip(members, est.estimators_features_, strict=True)
            ]
        )
        return per_member.mean(axis=0), per_member.std(axis=0)
    if name == "GaussianProcessRegressor":
        mean, std = est.predict(x, return_std=True)
        return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    return np.asarray(est.predict(x), dtype=np.float64), None


def conformal_scale(
    errors: np.ndarray, std: np.ndarray, coverage: float = COVERAGE_TARGET
) -> float:
    """The factor for `std` such that |error| <= 2 * factor * std for `coverage` of the rows:
    half the ceil((n + 1) * coverage)-th smallest |error| / std (the split-conformal rank; the
    largest when n is too small for it). A row with std 0 and an error counts as infinite z;
    1.0 when the scale found is not a finite positive number."""
    err, spread = np.abs(np.asarray(errors, dtype=np.float64)), np.asarray(std, dtype=np.float64)
    if err.size == 0:
        return 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(spread > 0, err / spread, np.where(err > 0, np.inf, 0.0))
    rank = min(math.ceil((z.size + 1) * coverage), z.size)
    scale = float(np.sort(z)[rank - 1]) / 2.0
    return scale if math.isfinite(scale) and scale > 0 else 1.0


@dataclass
class SurrogateModel:
    """A fitted regressor plus its featurisation and the numbers it was trained on."""

    estimator: Any
    features: FeatureKind = "morgan"
    radius: int = 2
    n_bits: int = 2048
    target: str = "value"
    metrics: dict[str, float] = field(default_factory=dict)
    #: What the raw std is multiplied by (`calibrate_scale`); 1.0: not calibrated.
    uncertainty_scale: float = 1.0

    def featurize(self, mols: Sequence[Chem.Mol]) -> np.ndarray:
        return featurize(mols, self.features, radius=self.radius, n_bits=self.n_bits)

    def predict(self, mols: Sequence[Chem.Mol]) -> tuple[np.ndarray, np.ndarray | None]:
        """Mean prediction and uncertainty (the calibrated std: the raw spread times
        `uncertainty_scale`) per molecule; None when the model has none."""
        mean, std = predict_raw(self.estimator, self.featurize(mols))
        return mean, None if std is None else std * self.uncertainty_scale

    def save(self, path: Path) -> None:
        import joblib

        joblib.dump(
            {
                "format": MODEL_FORMAT,
                "estimator": self.estimator,
                "features": self.features,
                "radius": self.radius,
                "n_bits": self.n_bits,
                "target": self.target,
                "metrics": self.metrics,
                "uncertainty_scale": self.uncertainty_scale,
            },
            path,
        )

    @classmethod
    def load(cls, path: Path) -> SurrogateModel:
        """Load a file written by `save`, or a bare estimator (then Morgan counts, r=2, 2048)."""
        import joblib

        try:
            data = joblib.load(path)
        except Exception as exc:  # unreadable, truncated or not a joblib file
            raise SurrogateModelError(f"cannot load surrogate model {path}: {exc}") from exc
        if isinstance(data, dict):
            if data.get("format") != MODEL_FORMAT:
                raise SurrogateModelError(
                    f"{path} is not a chem surrogate model (format {data.get('format')!r})"
                )
            return cls(
                estimator=data["estimator"],
                features=data["features"],
                radius=int(data["radius"]),
                n_bits=int(data["n_bits"]),
                target=str(data["target"]),
                metrics=dict(data.get("metrics", {})),
                # Files written before calibration existed carry no scale: their raw std stands.
                uncertainty_scale=float(data.get("uncertainty_scale", 1.0)),
            )
        if not hasattr(data, "predict"):
            raise SurrogateModelError(f"{path} holds a {type(data).__name__}, not an estimator")
        return cls(estimator=data)


@dataclass(frozen=True)
class TrainingReport:
    """What `train_surrogate` did: rows used and skipped, held-out quality."""

    n_train: int
    n_test: int
    n_skipped: int
    metrics: dict[str, float]
    path: Path
    #: What the saved model multiplies its raw spread by.
    uncertainty_scale: float = 1.0


def read_training_csv(path: Path) -> tuple[list[Chem.Mol], list[float], int, str]:
    """Molecules, values, skipped-row count and target name from a `SMILES,value` CSV.

    A header row is optional (detected by a second field that is not a number); rows whose
    SMILES do not parse or whose value is not a finite number are skipped and counted.
    """
    mols: list[Chem.Mol] = []
    values: list[float] = []
    skipped = 0
    target = "value"
    with path.open(newline="") as handle, rdBase.BlockLogs():
        for i, row in enumerate(csv.reader(handle)):
            if len(row) < 2:
                skipped += bool(row)
                continue
            try:
                value = float(row[1])
            except ValueError:
                if i == 0:
                    target = row[1].strip() or target
                else:
                    skipped += 1
                continue
            mol = Chem.MolFromSmiles(row[0].strip())
            if mol is None or not math.isfinite(value):
                skipped += 1
                continue
            mols.append(mol)
            values.append(value)
    return mols, values, skipped, target


def train_surrogate(
    csv_path: Path,
    out_path: Path,
    *,
    features: FeatureKind = "morgan",
    n_estimators: int = 100,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> TrainingReport:
    """Fit a calibrated random forest on a `SMILES,value` CSV, report held-out R2, MAE and the
    coverage of mean +/- 2 std before and after calibration (`coverage_report`), save it."""
    from sklearn.metrics import r2_score
    from sklearn.model_selection import train_test_split

    mols, values, skipped, target = read_training_csv(csv_path)
    if len(mols) < 10:
        raise SurrogateModelError(
            f"{csv_path}: only {len(mols)} usable rows (need at least 10 rows of SMILES,value)"
        )
    x = featurize(mols, features)
    y = np.asarray(values, dtype=np.float64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed
    )
    held = _fit_calibrated(x_train, y_train, features, n_estimators, seed, target)
    mean, std = predict_raw(held.estimator, x_test)
    metrics = {"r2": float(r2_score(y_test, mean)), "mae": float(np.mean(np.abs(y_test - mean)))}
    if std is not None:
        metrics.update(coverage_report(y_test - mean, std, held.uncertainty_scale))
    # The saved model is refitted on every row and keeps the scale calibrated on the training
    # rows: the held-out numbers describe this recipe and check exactly that scale.
    model = _fit_calibrated(x, y, features, n_estimators, seed, target, calibrate=False)
    model.uncertainty_scale = held.uncertainty_scale
    model.metrics = {**metrics, "uncertainty_scale": model.uncertainty_scale}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    model.save(out_path)
    return TrainingReport(
        n_train=len(y_train), n_test=len(y_test), n_skipped=skipped, metrics=metrics,
        path=out_path, uncertainty_scale=model.uncertainty_scale,
    )  # fmt: skip


def coverage_report(errors: np.ndarray, raw_std: np.ndarray, scale: float) -> dict[str, float]:
    """Held-out coverage of mean +/- 2 std and the mean std, with the raw spread and with the
    calibrated one (`scale` times it)."""
    err = np.abs(errors)
    return {
        "coverage_2std_raw": float(np.mean(err <= 2.0 * raw_std)),
        "coverage_2std": float(np.mean(err <= 2.0 * scale * raw_std)),
        "mean_std_raw": float(np.mean(raw_std)),
        "mean_std": float(np.mean(raw_std) * scale),
    }


def _forest(n_estimators: int, seed: int) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(
        n_estimators=n_estimators, random_state=seed, n_jobs=1, min_samples_leaf=1
    )


def calibrate_scale(x: np.ndarray, y: np.ndarray, n_estimators: int, seed: int) -> float:
    """The uncertainty scale of the forest recipe on these rows (`conformal_scale` of K-fold
    cross-validated predictions: each row predicted by a forest fitted without its fold);
    1.0 with fewer than MIN_CALIBRATION_ROWS rows."""
    from sklearn.model_selection import KFold

    if len(y) < MIN_CALIBRATION_ROWS:
        return 1.0
    errors = np.empty(len(y), dtype=np.float64)
    spread = np.empty(len(y), dtype=np.float64)
    folds = KFold(n_splits=min(CALIBRATION_FOLDS, len(y)), shuffle=True, random_state=seed)
    for fit_rows, out_rows in folds.split(x):
        forest = _forest(n_estimators, seed)
        forest.fit(x[fit_rows], y[fit_rows])
        mean, std = predict_raw(forest, x[out_rows])
        assert std is not None  # a forest always has a spread
        errors[out_rows], spread[out_rows] = y[out_rows] - mean, std
    return conformal_scale(errors, spread)


def _fit_calibrated(
    x: np.ndarray,
    y: np.ndarray,
    features: FeatureKind,
    n_estimators: int,
    seed: int,
    target: str,
    calibrate: bool = True,
) -> SurrogateModel:
    forest = _forest(n_estimators, seed)
    forest.fit(x, y)
    scale = calibrate_scale(x, y, n_estimators, seed) if calibrate else 1.0
    return SurrogateModel(
        estimator=forest, features=features, target=target, uncertainty_scale=scale
    )


def fit_surrogate(
    mols: Sequence[Chem.Mol],
    values: Sequence[float],
    *,
    features: FeatureKind = "morgan",
    n_estimators: int = 100,
    seed: int = 0,
    target: str = "value",
    calibrate: bool = True,
) -> SurrogateModel:
    """A random forest (the recipe of `train_surrogate`) fitted on every molecule given, its
    uncertainty calibrated on them by cross-validation unless `calibrate` is False."""
    if len(mols) != len(values) or not mols:
        raise SurrogateModelError(
            f"need molecules and values in pairs, got {len(mols)}/{len(values)}"
        )
    x = featurize(mols, features)
    y = np.asarray(values, dtype=np.float64)
    return _fit_calibrated(x, y, features, n_estimators, seed, target, calibrate)
