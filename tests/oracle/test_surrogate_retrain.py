"""Retraining the learned surrogate from lab results, as an operator does it: molecules go up a
[chem.fast, oracle] ladder on a fresh PostgreSQL database, a simulated lab (the pull client's
side of the service: claim, post results) measures a hidden property (RDKit's Crippen logP plus
noise, one measurement failed), and `verifier-service chem train-surrogate --from-oracle lab
--target logp` trains a new model on those results. Its output shows the calibration of the
model configured before (trained on another property) and of the new one on held-out lab
results; the new one must agree with the lab far better, and the file it wrote must load."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rdkit import Chem, RDConfig, rdBase
from rdkit.Chem import Crippen, rdMolDescriptors

from tiers.base import Candidate
from tiers.chem.settings import ChemSettings
from tiers.chem.surrogate import ChemSurrogateTier
from tiers.chem.surrogate_model import SurrogateModel
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import reset_engine_cache, transaction
from verifier_service.core.migrate import upgrade
from verifier_service.jobs import service as jobs
from verifier_service.jobs.schemas import RewardRequest
from verifier_service.oracle import calibration, service
from verifier_service.oracle.schemas import ResultsIn
from verifier_service.policies import service as policies
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers

LAB = "lab"
PARTNER = AuthenticatedPrincipal(name=LAB, roles=frozenset({"oracle"}), via="key")
DEFINITION = {
    "mode": "pull",
    "capacity": 1000,
    "batch_size": 40,
    "lease_s": 60,
    "result_schema": {"logp": {"unit": "log units", "min": -30, "max": 30}},
    "score": {"field": "logp", "low": -10, "high": 10},
    "price_per_item": 40.0,
}
NOISE = 0.2  # the lab's measurement error (std, log units)
CLI = [str(Path(sys.executable).parent / "verifier-service"), "chem", "train-surrogate"]


def _nci_smiles() -> list[str]:
    """Small, distinct, readable molecules from the NCI set RDKit ships (a fixed order)."""
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    found: dict[str, None] = {}
    with rdBase.BlockLogs():
        for line in path.read_text().splitlines():
            mol = Chem.MolFromSmiles(line.split()[0]) if line.strip() else None
            if mol is not None and 8 <= mol.GetNumHeavyAtoms() <= 30 and "." not in line.split()[0]:
                found[Chem.MolToSmiles(mol)] = None
    return list(found)


@pytest.fixture
def database(
    own_pg_url: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    env = {
        "VERIFIER_DATABASE__URL": own_pg_url,
        "VERIFIER_BROKER__URL": redis_url,
        "VERIFIER_ORACLES__DEFINITIONS": json.dumps({LAB: DEFINITION}),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    reset_engine_cache()
    upgrade(own_pg_url)
    configure_tiers(get_settings())
    yield env
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()


def _send_to_lab(smiles: list[str], failing: str) -> None:
    """Submit the molecules under a [chem.fast, oracle lab] policy and let the lab measure
    what reaches it: Crippen logP plus Gaussian noise; the measurement of `failing` fails."""
    name = f"lab-{uuid.uuid4().hex[:8]}"
    ladder = [{"tier": "chem.fast"}, {"tier": "oracle", "config": {"oracle": LAB}}]
    with transaction() as session:
        policies.save(session, {"name": name, "ladders": {"molecule": ladder}})
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    body = RewardRequest.model_validate({"policy": name, "items": items, "deadline_s": 3600})
    with transaction() as session:
        jobs.submit(
            session, body, principal="trainer", idempotency_key=None, runs_here=lambda _: True
        )
    assert service.select(LAB) == len(smiles)
    while True:
        with transaction() as session:
            claim = service.claim(session, LAB, PARTNER, "http://verifier")
        if claim is None:
            break
        results = []
        for item in claim.batch.items:
            smiles = item.payload["smiles"]
            if smiles == failing:
                results.append({"item_id": item.item_id, "error": "crystallised in the well"})
                continue
            # Each molecule's own noise: the same figures whatever order the batches come in.
            noise = random.Random(smiles).gauss(0.0, NOISE)
            value = Crippen.MolLogP(Chem.MolFromSmiles(smiles)) + noise
            results.append({"item_id": item.item_id, "values": {"logp": round(value, 3)}})
        with transaction() as session:
            out = service.record_results(
                session, LAB, PARTNER, ResultsIn.model_validate({"results": results})
            )
        assert out.accepted == len(results)


def _train_old_model(tmp_path: Path, smiles: list[str]) -> Path:
    """The surrogate in use before: trained with the same command on another property (TPSA
    in tens of square angstroms), as a model made for another lab assay would be."""
    csv = tmp_path / "tpsa.csv"
    rows = [f"{s},{rdMolDescriptors.CalcTPSA(Chem.MolFromSmiles(s)) / 10:.3f}" for s in smiles]
    csv.write_text("smiles,tpsa\n" + "\n".join(rows) + "\n")
    old = tmp_path / "old.joblib"
    done = subprocess.run(
        [*CLI, "--csv", str(csv), "--out", str(old), "--n-estimators", "50"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return old


def _row(output: str, label: str) -> list[str]:
    line = next(x for x in output.splitlines() if re.match(rf"{label}\s+\d", x))
    return line.split()


def test_retraining_from_lab_results_shows_better_calibration(
    database: dict[str, str], tmp_path: Path
) -> None:
    molecules = _nci_smiles()
    assert len(molecules) > 300
    _send_to_lab(molecules[:120], failing=molecules[5])
    old = _train_old_model(tmp_path, molecules[200:400])

    with transaction() as session:
        lab = calibration.lab_results(session, LAB, "logp")
    assert (len(lab.results), lab.skipped) == (119, 1)  # the failed measurement is not data

    new = tmp_path / "from-lab.joblib"
    env = {**os.environ, **database, "VERIFIER_CHEM__SURROGATE_MODEL_PATH": str(old)}
    done = subprocess.run(
        [*CLI, "--from-oracle", LAB, "--target", "logp", "--out", str(new), "--n-estimators", "50"],
        capture_output=True, text=True, timeout=180, check=False, env=env,
    )  # fmt: skip
    print(done.stdout)  # the figures the report quotes
    assert done.returncode == 0, done.stderr
    assert "oracle lab, field logp: 119 measured molecules (1 results skipped)" in done.stdout
    assert "trained on 95, held out 24" in done.stdout
    before, after = _row(done.stdout, "before"), _row(done.stdout, "after")
    assert before[1] == after[1] == "24"
    assert before[-1] == str(old)
    assert after[-1] == str(new)
    before_mae, after_mae = float(before[2]), float(after[2])
    assert after_mae < 0.6 * before_mae, done.stdout
    assert after_mae < 1.0
    assert float(after[3]) > max(0.7, float(before[3]) + 0.3)  # Spearman against the lab
    # Coverage of mean +/- 2 std with the calibrated std, and with the trees' raw spread on the
    # same held-out results (the model's std is calibrated on its training rows only).
    assert 0.85 <= float(after[4]) <= 1.0
    spread = re.search(
        r"uncertainty on the same 24 held-out results, raw tree spread -> calibrated: "
        r"coverage\(2std\) ([\d.]+) -> ([\d.]+), mean std ([\d.]+) -> ([\d.]+)",
        done.stdout,
    )
    assert spread is not None, done.stdout
    assert spread[2] == after[4]
    assert spread[4] == after[5]

    model = SurrogateModel.load(new)
    assert model.target == "logp"
    assert model.metrics["mae"] == pytest.approx(after_mae, abs=5e-4)
    assert model.metrics["coverage_2std_raw"] == pytest.approx(float(spread[1]), abs=5e-4)
    scale = model.uncertainty_scale
    assert f"the saved model's std is the trees' spread x {scale:.3f}" in done.stdout
    assert float(spread[4]) == pytest.approx(scale * float(spread[3]), rel=0.01)
    # What chem.surrogate workers do with it once VERIFIER_CHEM__SURROGATE_MODEL_PATH names it.
    tier = ChemSurrogateTier(ChemSettings(surrogate_model_path=new))
    probe = [Candidate(kind="molecule", payload={"smiles": s}) for s in ("CCCCCCCC", "OCC(O)CO")]
    octane, glycerol = tier.verify_batch(probe, {"forcefield": False, "xtb": False})
    assert "Surrogate predicts logp" in octane.feedback
    assert octane.uncertainty is not None
    # Octane is far more lipophilic than glycerol.
    assert octane.components["model_prediction"] > glycerol.components["model_prediction"] + 1.0

    merged = tmp_path / "merged.joblib"
    base = tmp_path / "base.csv"
    base.write_text(
        "".join(f"{s},{Crippen.MolLogP(Chem.MolFromSmiles(s)):.3f}\n" for s in molecules[400:430])
    )
    env.pop("VERIFIER_CHEM__SURROGATE_MODEL_PATH")
    done = subprocess.run(
        [*CLI, "--from-oracle", LAB, "--target", "logp", "--csv", str(base), "--out", str(merged),
         "--n-estimators", "20"],
        capture_output=True, text=True, timeout=180, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "trained on 95 + 30 rows of the CSV, held out 24" in done.stdout
    assert "before     (no model configured" in done.stdout
    assert np.isfinite(float(_row(done.stdout, "after")[2]))

    done = subprocess.run(
        [*CLI, "--from-oracle", LAB, "--target", "ic50_nM", "--out", str(tmp_path / "x.joblib")],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 1
    assert "oracle 'lab' has 0 usable results for 'ic50_nM' (120 skipped)" in done.stderr
    assert not (tmp_path / "x.joblib").exists()


def test_spearman_matches_scipy_with_ties_and_is_undefined_for_constants() -> None:
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    a = rng.integers(0, 6, size=40).astype(float)  # many ties
    b = a + rng.normal(0, 2, size=40)
    assert calibration.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert calibration.spearman(np.ones(5), np.arange(5.0)) is None
