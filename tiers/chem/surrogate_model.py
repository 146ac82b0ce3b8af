"""The learned surrogate of chem.surrogate: featurisation, training, saving, prediction.

A model file is a joblib dump of a dict (see `SurrogateModel.save`) holding a fitted
scikit-learn regressor and how to featurise molecules for it. Any regressor works; ensembles
(random forest, extra trees, bagging) and Gaussian processes also give an uncertainty: the
standard deviation across ensemble members, or the GP's predictive standard deviation.
scikit-learn and joblib are the optional extra `ml` and are imported only here, lazily.
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


@dataclass
class SurrogateModel:
    """A fitted regressor plus its featurisation and the numbers it was trained on."""

    estimator: Any
    features: FeatureKind = "morgan"
    radius: int = 2
    n_bits: int = 2048
    target: str = "value"
    metrics: dict[str, float] = field(default_factory=dict)

    def featurize(self, mols: Sequence[Chem.Mol]) -> np.ndarray:
        return featurize(mols, self.features, radius=self.radius, n_bits=self.n_bits)

    def predict(self, mols: Sequence[Chem.Mol]) -> tuple[np.ndarray, np.ndarray | None]:
        """Mean prediction and uncertainty (std) per molecule; None when the model has none."""
        x = self.featurize(mols)
        est = self.estimator
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
    """Fit a random forest on a `SMILES,value` CSV, report held-out R2/MAE, save it."""
    from sklearn.metrics import mean_absolute_error, r2_score
    from sklearn.model_selection import train_test_split

    mols, values, skipped, target = read_training_csv(csv_path)
    if len(mols) < 10:
        raise SurrogateModelError(
            f"{csv_path}: only {len(mols)} usable rows (need at least 10 rows of SMILES,value)"
        )
    model = SurrogateModel(estimator=None, features=features, target=target)
    x = model.featurize(mols)
    y = np.asarray(values, dtype=np.float64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed
    )
    forest = _forest(n_estimators, seed)
    forest.fit(x_train, y_train)
    predicted = forest.predict(x_test)
    metrics = {
        "r2": float(r2_score(y_test, predicted)),
        "mae": float(mean_absolute_error(y_test, predicted)),
    }
    # The saved model is refitted on every row: the held-out numbers describe its quality.
    forest.fit(x, y)
    model.estimator = forest
    model.metrics = metrics
    out_path.parent.mkdir(parents=True, exist_ok=True)
    model.save(out_path)
    return TrainingReport(
        n_train=len(y_train), n_test=len(y_test), n_skipped=skipped, metrics=metrics, path=out_path
    )


def _forest(n_estimators: int, seed: int) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(
        n_estimators=n_estimators, random_state=seed, n_jobs=1, min_samples_leaf=1
    )


def fit_surrogate(
    mols: Sequence[Chem.Mol],
    values: Sequence[float],
    *,
    features: FeatureKind = "morgan",
    n_estimators: int = 100,
    seed: int = 0,
    target: str = "value",
) -> SurrogateModel:
    """A random forest (the recipe of `train_surrogate`) fitted on every molecule given."""
    if len(mols) != len(values) or not mols:
        raise SurrogateModelError(
            f"need molecules and values in pairs, got {len(mols)}/{len(values)}"
        )
    model = SurrogateModel(estimator=None, features=features, target=target)
    forest = _forest(n_estimators, seed)
    forest.fit(model.featurize(mols), np.asarray(values, dtype=np.float64))
    model.estimator = forest
    return model
