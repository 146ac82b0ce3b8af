"""chem.surrogate: reproducible MMFF/xTB numbers, embed failures, the learned model and its CLI."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen
from typer.testing import CliRunner

from tiers.base import Candidate, Tier, VerdictStatus
from tiers.chem.settings import ChemSettings
from tiers.chem.surrogate import ChemSurrogateTier, score_uncertainty
from tiers.chem.surrogate_model import (
    MODEL_FORMAT,
    SurrogateModel,
    SurrogateModelError,
    conformal_scale,
    predict_raw,
    train_surrogate,
)
from tiers.registry import get_tier
from verifier_service.chem.cli import chem_app

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
# Bicyclo[2.2.1]heptane with both bridgehead F "inverted": parses, has no 3D embedding.
UNEMBEDDABLE = "F[C@]12CC[C@@](F)(CC1)C2"
TRAIN_LOGP: list[float] = []


def mol(smiles: str) -> Candidate:
    return Candidate(kind="molecule", payload={"smiles": smiles})


def nci_smiles(n: int, start: int = 0) -> list[str]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    out: list[str] = []
    for line in path.read_text().splitlines()[start:]:
        smiles = line.split()[0]
        m = Chem.MolFromSmiles(smiles)
        if m is not None and len(Chem.GetMolFrags(m)) == 1:
            out.append(smiles)
        if len(out) == n:
            break
    return out


@pytest.fixture(scope="module")
def logp_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training CSV from RDKit's bundled NCI set with Crippen logP as the target."""
    path = tmp_path_factory.mktemp("surrogate") / "logp.csv"
    rows = ["smiles,logp"]
    for smiles in nci_smiles(500):
        logp = Crippen.MolLogP(Chem.MolFromSmiles(smiles))
        TRAIN_LOGP.append(logp)
        rows.append(f"{smiles},{logp:.4f}")
    rows.append("not-a-smiles,1.0")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def model_path(logp_csv: Path) -> Path:
    """Trained through the CLI, as an operator would."""
    out = logp_csv.parent / "logp.joblib"
    result = CliRunner().invoke(
        chem_app,
        ["train-surrogate", "--csv", str(logp_csv), "--out", str(out), "--n-estimators", "40"],
    )
    assert result.exit_code == 0, result.output
    assert "trained on 400 rows, tested on 100 (skipped 1)" in result.output
    assert "uncertainty on the 100 test rows, raw tree spread -> calibrated" in result.output
    return out


@pytest.fixture(scope="module")
def tier() -> ChemSurrogateTier:
    return ChemSurrogateTier()


def run(tier: ChemSurrogateTier, smiles: str, config: dict[str, Any] | None = None) -> Any:
    (verdict,) = tier.verify_batch([mol(smiles)], config or {})
    return verdict


def test_registered_and_satisfies_protocol() -> None:
    tier = get_tier("chem.surrogate")
    assert isinstance(tier, Tier)
    assert (tier.queue, tier.cost_class) == ("tier.sim", pytest.approx(0.1))


def test_water_xtb_matches_gfn2_reference(tier: ChemSurrogateTier) -> None:
    v = run(tier, "O")
    assert v.status == VerdictStatus.passed
    c = v.components
    # GFN2-xTB water at its own optimum is -5.0705 Eh (xtb docs); the MMFF94 geometry is
    # slightly off that optimum, so the single point lies a fraction of a mEh above it.
    assert c["xtb_energy_hartree"] == pytest.approx(-5.0705, abs=1e-3)
    assert c["xtb_energy_hartree"] > -5.0706
    assert 12.0 < c["xtb_gap_ev"] < 16.0
    assert 1.8 < c["xtb_dipole_debye"] < 2.6  # GFN2 overestimates the gas-phase 1.85 D
    assert c["xtb_charge_min"] < -0.4 < 0.2 < c["xtb_charge_max"]  # O negative, H positive
    assert (c["charge"], c["multiplicity"]) == (0.0, 1.0)


def test_mmff_and_xtb_reproducible_with_fixed_seed(tier: ChemSurrogateTier) -> None:
    first = run(tier, ASPIRIN)
    again = ChemSurrogateTier().verify_batch([mol(ASPIRIN)], {})[0]
    assert first.components["ff_energy_kcal"] == again.components["ff_energy_kcal"]
    assert first.components["xtb_energy_hartree"] == again.components["xtb_energy_hartree"]
    # Values of this code version with seed 42 and 8 conformers (MMFF94, GFN2-xTB).
    assert first.components["ff_energy_kcal"] == pytest.approx(18.9098, abs=1e-3)
    assert first.components["xtb_energy_hartree"] == pytest.approx(-39.62296, abs=1e-4)
    assert first.components["ff_uff"] == 0.0
    other_seed = run(tier, "CCCCCCCCCCCCO", {"seed": 7, "xtb": False})
    assert other_seed.components["conformers"] == 8.0


def test_strain_score_and_limit(tier: ChemSurrogateTier) -> None:
    relaxed = run(tier, ASPIRIN, {"xtb": False})
    assert relaxed.components["strain_kcal"] == pytest.approx(0.0, abs=1e-3)
    assert relaxed.score == pytest.approx(1.0, abs=1e-3)
    chain = run(tier, "CCCCCCCCCCCCO", {"xtb": False})
    strain = chain.components["strain_kcal"]
    assert strain > 0.5
    assert chain.score == pytest.approx(math.exp(-strain / 10.0))
    limited = run(tier, "CCCCCCCCCCCCO", {"xtb": False, "max_strain_kcal": 0.1})
    assert limited.status == VerdictStatus.failed
    assert limited.reason == "strain_too_high"


def test_open_shell_and_charged(tier: ChemSurrogateTier) -> None:
    radical, anion = tier.verify_batch([mol("[CH3]"), mol("CC(=O)[O-]")], {})
    assert radical.status == VerdictStatus.passed
    assert radical.components["multiplicity"] == 2.0
    assert anion.components["charge"] == -1.0
    assert anion.components["xtb_charge_min"] < -0.5


def test_atom_charges_component(tier: ChemSurrogateTier) -> None:
    v = run(tier, "O", {"atom_charges": True})
    charges = [v.components[f"xtb_charge_{i}"] for i in range(3)]
    assert charges[0] < 0 < charges[1]
    assert sum(charges) == pytest.approx(0.0, abs=1e-6)


def test_unembeddable_molecule_is_failed_with_reason(tier: ChemSurrogateTier) -> None:
    v = run(tier, UNEMBEDDABLE, {"embed_timeout_s": 30})
    assert v.status == VerdictStatus.failed
    assert v.reason == "embed_failed"
    assert "could not embed" in v.feedback


def test_bad_inputs(tier: ChemSurrogateTier) -> None:
    verdicts = tier.verify_batch(
        [mol(""), mol("C1CC("), mol("C" * 10_000), mol("C" * 90)], {"xtb": False}
    )
    assert [v.reason for v in verdicts] == [
        "empty_smiles",
        "invalid_smiles",
        "smiles_too_long",
        "too_large",
    ]
    assert all(v.status == VerdictStatus.failed for v in verdicts)


def test_learned_model_prediction_and_uncertainty(model_path: Path) -> None:
    tier = ChemSurrogateTier(ChemSettings(surrogate_model_path=model_path))
    test_smiles = nci_smiles(40, start=2000)
    config = {"forcefield": False, "xtb": False, "model_score_low": -2, "model_score_high": 8}
    verdicts = tier.verify_batch([mol(s) for s in test_smiles], config)
    errors = []
    for smiles, v in zip(test_smiles, verdicts, strict=True):
        assert v.status == VerdictStatus.passed
        assert v.uncertainty is not None
        pred, std = v.components["model_prediction"], v.components["model_std"]
        # The uncertainty is in the score's units (the logP window -2..8 is 10 wide), so a
        # gate can compare it with the score; model_std stays in logP units.
        low_end, high_end = ((pred - std + 2) / 10, (pred + std + 2) / 10)
        expected = (min(max(high_end, 0.0), 1.0) - min(max(low_end, 0.0), 1.0)) / 2
        assert v.uncertainty == pytest.approx(expected)
        assert 0.0 <= v.uncertainty <= 0.5
        assert v.score == pytest.approx(min(max((pred + 2) / 10, 0.0), 1.0))
        errors.append(abs(pred - Crippen.MolLogP(Chem.MolFromSmiles(smiles))))
    # Compared with always predicting the training mean, the forest's error is much smaller.
    train_mean = sum(TRAIN_LOGP) / len(TRAIN_LOGP)
    baseline = [abs(train_mean - Crippen.MolLogP(Chem.MolFromSmiles(s))) for s in test_smiles]
    assert sum(errors) < 0.7 * sum(baseline)
    assert sum(v.uncertainty or 0 for v in verdicts) > 0
    # Far from the training set the ensemble disagrees more than on a training molecule.
    (train_like,) = tier.verify_batch([mol(nci_smiles(1)[0])], config)
    (odd,) = tier.verify_batch(
        [mol("FC(F)(F)C(F)(F)C(F)(F)C(F)(F)C(F)(F)C(F)(F)S(=O)(=O)O")], config
    )
    assert (odd.uncertainty or 0) > (train_like.uncertainty or 0)


def test_model_is_also_reported_with_geometry(model_path: Path) -> None:
    v = ChemSurrogateTier(ChemSettings(surrogate_model_path=model_path)).verify_batch(
        [mol(ASPIRIN)], {"xtb": False}
    )[0]
    assert {"model_prediction", "model_std", "strain_kcal"} <= set(v.components)
    assert "Surrogate predicts logp" in v.feedback


def test_required_model_missing_is_error(tier: ChemSurrogateTier) -> None:
    v = run(tier, ASPIRIN, {"model": "required", "forcefield": False, "xtb": False})
    assert v.status == VerdictStatus.error
    assert v.reason == "model_unavailable"
    assert "train-surrogate" in v.feedback


def test_corrupt_model_file_is_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.joblib"
    bad.write_bytes(b"not a joblib file")
    v = ChemSurrogateTier(ChemSettings(surrogate_model_path=bad)).verify_batch(
        [mol(ASPIRIN)], {"xtb": False}
    )[0]
    assert v.status == VerdictStatus.error
    assert v.reason == "model_unavailable"
    with pytest.raises(SurrogateModelError):
        SurrogateModel.load(bad)


def test_descriptor_features_train(logp_csv: Path, tmp_path: Path) -> None:
    report = train_surrogate(
        logp_csv, tmp_path / "d.joblib", features="descriptors", n_estimators=20
    )
    assert report.metrics["r2"] > 0.7  # logP is close to a sum of descriptor terms
    model = SurrogateModel.load(report.path)
    assert model.features == "descriptors"
    mean, std = model.predict([Chem.MolFromSmiles(ASPIRIN)])
    assert std is not None
    assert mean.shape == (1,)


def test_cli_rejects_unknown_features(logp_csv: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        chem_app,
        [
            "train-surrogate",
            *("--csv", str(logp_csv), "--out", str(tmp_path / "m.joblib")),
            *("--features", "ecfp"),
        ],
    )
    assert result.exit_code != 0
    assert not (tmp_path / "m.joblib").exists()


@pytest.mark.parametrize(
    "config",
    [
        {"xtb": True, "forcefield": False},
        {"score": "model", "model": "off"},
        {"n_conformers": 0},
        {"model_score_low": 1, "model_score_high": 1},
        {"bogus": True},
    ],
)
def test_bad_config(tier: ChemSurrogateTier, config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"invalid chem\.surrogate config"):
        tier.validate_config(config)


def test_salt_is_scored_on_its_largest_fragment(model_path: Path) -> None:
    # The fragment split off a salt carried no ring information: the model's ring descriptors
    # raised "RingInfo not initialized" and the item ended infra_error instead of being scored.
    tier = ChemSurrogateTier(ChemSettings(surrogate_model_path=model_path))
    config = {"forcefield": False, "xtb": False}
    salt, acid = tier.verify_batch(
        [mol("CC(=O)Oc1ccccc1C(=O)[O-].[Na+]"), mol("CC(=O)Oc1ccccc1C(=O)[O-]")], config
    )
    assert salt.status == VerdictStatus.passed, salt.feedback
    assert salt.components["model_prediction"] == acid.components["model_prediction"]


def test_uncertainty_is_calibrated_on_molecules_never_seen(model_path: Path) -> None:
    """mean +/- 2 std holds about 95% of unseen molecules' values with the calibrated std,
    closer to it than the raw spread of the trees (which the tier used before)."""
    model = SurrogateModel.load(model_path)
    assert model.uncertainty_scale != 1.0
    assert model.metrics["uncertainty_scale"] == model.uncertainty_scale
    mols = [Chem.MolFromSmiles(s) for s in nci_smiles(300, start=2000)]
    measured = np.asarray([Crippen.MolLogP(m) for m in mols])
    mean, std = model.predict(mols)
    raw_mean, raw_std = predict_raw(model.estimator, model.featurize(mols))
    assert std is not None
    assert raw_std is not None
    assert np.array_equal(mean, raw_mean)
    assert np.allclose(std, raw_std * model.uncertainty_scale)
    covered = float(np.mean(np.abs(measured - mean) <= 2 * std))
    covered_raw = float(np.mean(np.abs(measured - mean) <= 2 * raw_std))
    print(f"coverage(2std) on 300 unseen: raw {covered_raw:.3f} -> calibrated {covered:.3f}; "
          f"mean std {raw_std.mean():.3f} -> {std.mean():.3f}")  # fmt: skip
    assert 0.88 <= covered <= 0.99
    assert abs(covered - 0.95) < abs(covered_raw - 0.95)
    # What the tier reports (and the ladder's gates read) is the calibrated std.
    tier = ChemSurrogateTier(ChemSettings(surrogate_model_path=model_path))
    window = {"model_score_low": -2.0, "model_score_high": 8.0}
    (verdict,) = tier.verify_batch([mol(ASPIRIN)], {"forcefield": False, "xtb": False, **window})
    aspirin_std = model.predict([Chem.MolFromSmiles(ASPIRIN)])[1]
    assert aspirin_std is not None
    assert verdict.components["model_std"] == pytest.approx(float(aspirin_std[0]))
    assert verdict.uncertainty == pytest.approx(float(aspirin_std[0]) / 10.0)


def test_uncertainty_is_in_score_units_and_shrinks_outside_the_window() -> None:
    # Inside the window: the std divided by the window's width (either direction).
    assert score_uncertainty(3.0, 0.5, -2.0, 8.0) == pytest.approx(0.05)
    assert score_uncertainty(3.0, 0.5, 8.0, -2.0) == pytest.approx(0.05)
    # Predicted far above the window: the score is 1 whichever way the error goes.
    assert score_uncertainty(20.0, 1.0, -2.0, 8.0) == 0.0
    # Straddling the top edge: only the part of the interval below it counts.
    assert score_uncertainty(8.0, 1.0, -2.0, 8.0) == pytest.approx(0.05)


def test_a_gate_near_the_threshold_is_not_open_for_every_molecule(model_path: Path) -> None:
    # drug-likeness's DFT gate: score >= 0.8 or |score - 0.8| < 2 * uncertainty. With the
    # uncertainty in logP units (~1) the second clause held for every molecule; in score units
    # it holds only for those the model cannot tell apart from 0.8.
    tier = ChemSurrogateTier(ChemSettings(surrogate_model_path=model_path))
    config = {"forcefield": False, "xtb": False, "model_score_low": -2, "model_score_high": 8}
    verdicts = tier.verify_batch([mol(s) for s in nci_smiles(40, start=2000)], config)
    opened = [
        v for v in verdicts
        if (v.score or 0) >= 0.8 or abs((v.score or 0) - 0.8) < 2 * (v.uncertainty or 0)
    ]  # fmt: skip
    print(f"gate opened for {len(opened)} of {len(verdicts)}; old units would open all")
    assert 0 < len(opened) < len(verdicts) // 2


@pytest.mark.parametrize("spread", [3.0, 0.4])
def test_conformal_scale_fixes_a_spread_too_wide_or_too_narrow(spread: float) -> None:
    rng = np.random.default_rng(7)
    errors = rng.normal(0.0, 1.0, size=400)  # the true error sd is 1; the model says `spread`
    scale = conformal_scale(errors, np.full(400, spread))
    assert scale * spread == pytest.approx(0.98, abs=0.1)  # 2 sd cover 95% of a Gaussian
    fresh = rng.normal(0.0, 1.0, size=4000)
    assert np.mean(np.abs(fresh) <= 2 * scale * spread) == pytest.approx(0.95, abs=0.02)
    # Uncalibrated, 2 * spread covers erf(2 * spread / sqrt 2) of them: 1.00 or 0.58.
    expected_raw = math.erf(2 * spread / math.sqrt(2))
    assert np.mean(np.abs(fresh) <= 2 * spread) == pytest.approx(expected_raw, abs=0.02)
    assert conformal_scale(np.zeros(5), np.zeros(5)) == 1.0  # nothing to go on: unchanged


def test_model_file_from_before_calibration_still_loads(model_path: Path, tmp_path: Path) -> None:
    """Files written before the scale existed (the dict without it, or a bare estimator) load
    with scale 1.0: their std is the raw spread of the trees, as before."""
    import joblib

    model = SurrogateModel.load(model_path)
    old = tmp_path / "old.joblib"
    joblib.dump(
        {
            "format": MODEL_FORMAT, "estimator": model.estimator, "features": "morgan",
            "radius": 2, "n_bits": 2048, "target": "logp", "metrics": {"r2": 0.5},
        },
        old,
    )  # fmt: skip
    bare = tmp_path / "bare.joblib"
    joblib.dump(model.estimator, bare)
    probe = [Chem.MolFromSmiles(s) for s in (ASPIRIN, "CCCCCCCC")]
    raw_mean, raw_std = predict_raw(model.estimator, model.featurize(probe))
    assert raw_std is not None
    for path in (old, bare):
        loaded = SurrogateModel.load(path)
        assert loaded.uncertainty_scale == 1.0
        mean, std = loaded.predict(probe)
        assert np.array_equal(mean, raw_mean)
        assert std is not None
        assert np.array_equal(std, raw_std)
    assert replace(SurrogateModel.load(old), uncertainty_scale=2.0).predict(probe)[1] == (
        pytest.approx(2 * raw_std)
    )
