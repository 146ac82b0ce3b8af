"""The oracle page's surrogate section is computed once, not on every view: a second view of
the same results and model runs no prediction; a new result or a retrained model file (a new
mtime) makes the next view compute afresh. On a fresh SQLite database in this process, the
results posted through the oracle service as a pull partner does (the retrain test's lab)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import Crippen
from test_surrogate_retrain import DEFINITION, LAB, _nci_smiles, _send_to_lab

from tiers.chem.surrogate_model import SurrogateModel, fit_surrogate
from verifier_service.console.oracles import service as pages
from verifier_service.core.db import reset_engine_cache, transaction
from verifier_service.core.migrate import upgrade
from verifier_service.oracle.service import definition
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_url: str) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'oracle.db'}"
    monkeypatch.setenv("VERIFIER_DATABASE__URL", url)
    monkeypatch.setenv("VERIFIER_BROKER__URL", redis_url)
    monkeypatch.setenv("VERIFIER_ORACLES__DEFINITIONS", json.dumps({LAB: DEFINITION}))
    get_settings.cache_clear()
    reset_engine_cache()
    upgrade(url)
    configure_tiers(get_settings())
    pages.clear_surrogate_checks()
    yield url
    pages.clear_surrogate_checks()
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def predictions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many molecules each model prediction was asked for, in order."""
    calls: list[int] = []
    real = SurrogateModel.predict

    def counted(self: SurrogateModel, mols: Any) -> tuple[np.ndarray, np.ndarray | None]:
        calls.append(len(mols))
        return real(self, mols)

    monkeypatch.setattr(SurrogateModel, "predict", counted)
    return calls


def _check(model: Path, field: str | None = None) -> pages.SurrogateCheck:
    with transaction() as session:
        return pages.surrogate_check(session, LAB, definition(LAB), model, field)


def test_a_second_view_runs_no_prediction_and_new_results_or_a_new_model_do(
    database: str, predictions: list[int], tmp_path: Path
) -> None:
    molecules = _nci_smiles()
    train = molecules[300:360]
    model = tmp_path / "logp.joblib"
    fit_surrogate(
        [Chem.MolFromSmiles(s) for s in train],
        [Crippen.MolLogP(Chem.MolFromSmiles(s)) for s in train],
        n_estimators=10, target="logp",
    ).save(model)  # fmt: skip
    _send_to_lab(molecules[:20], failing="")

    first = _check(model)
    assert first.calibration is not None
    assert first.calibration.n == 20
    assert first.computed_at is not None
    assert predictions == [20]

    again = _check(model)
    assert again == first  # the same figures and the same time of computing
    assert predictions == [20]  # ... and no prediction ran for them

    _send_to_lab(molecules[20:30], failing="")
    fresh = _check(model)
    assert fresh.calibration is not None
    assert fresh.calibration.n == 30
    assert fresh.computed_at is not None
    assert fresh.computed_at > first.computed_at
    assert predictions == [20, 30]
    assert _check(model) == fresh
    assert predictions == [20, 30]

    # A retrained model written over the same path: a new mtime, computed again.
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert _check(model).calibration == fresh.calibration
    assert predictions == [20, 30, 30]

    # No model configured, and a field not in the schema, are their own entries.
    assert _check(None).problem is not None
    assert _check(model, "ic50").problem is not None
    assert predictions == [20, 30, 30]
