"""chem.fast against known drugs, known PAINS and bad inputs."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tiers.base import Candidate, Tier, VerdictStatus
from tiers.chem.fast import REFERENCE_FP_CACHE, ChemFastTier, _reference_fp
from tiers.chem.fast_config import COMPONENTS
from tiers.registry import get_tier

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
IBUPROFEN = "CC(C)Cc1ccc(cc1)C(C)C(=O)O"
CAFFEINE = "Cn1cnc2c1c(=O)n(C)c(=O)n2C"
# 5-benzylidene rhodanine: the textbook PAINS chemotype (ene_rhod_A).
RHODANINE = "O=C1C(=Cc2ccc(O)cc2)SC(=S)N1"
# Catechol-containing curcumin-like Michael acceptor chain, a PAINS catechol_A hit.
CATECHOL = "Oc1ccc(C=CC(=O)c2ccccc2)cc1O"


def mol(smiles: str, reference: list[str] | None = None) -> Candidate:
    ref = {"smiles": reference} if reference is not None else None
    return Candidate(kind="molecule", payload={"smiles": smiles}, reference=ref)


@pytest.fixture(scope="module")
def tier() -> ChemFastTier:
    return ChemFastTier()


def one(tier: ChemFastTier, smiles: str, config: dict[str, Any] | None = None) -> Any:
    (verdict,) = tier.verify_batch([mol(smiles)], config or {})
    return verdict


def test_registered_and_satisfies_protocol() -> None:
    tier = get_tier("chem.fast")
    assert isinstance(tier, Tier)
    assert tier.queue == "tier.fast"
    assert tier.cost_class == pytest.approx(0.001)
    assert tier.kinds == frozenset({"molecule"})


def test_aspirin_properties(tier: ChemFastTier) -> None:
    v = one(tier, ASPIRIN)
    assert v.status == VerdictStatus.passed
    c = v.components
    assert c["mw"] == pytest.approx(180.159, abs=0.01)
    assert c["logp"] == pytest.approx(1.3101, abs=1e-4)
    assert c["tpsa"] == pytest.approx(63.6, abs=0.01)
    assert (c["hbd"], c["hba"], c["rotatable_bonds"]) == (1.0, 3.0, 2.0)
    assert c["heavy_atoms"] == 13.0
    assert c["fsp3"] == pytest.approx(1 / 9)
    assert (c["rings"], c["aromatic_rings"], c["max_ring_size"]) == (1.0, 1.0, 6.0)
    assert c["qed"] == pytest.approx(0.5501, abs=1e-3)
    assert c["sa_score"] == pytest.approx(1.58, abs=0.01)
    assert c["lipinski_violations"] == 0.0
    assert v.score == pytest.approx(c["qed"])
    assert v.tier == "chem.fast"
    assert v.cost.wall_s > 0
    assert set(c) <= set(COMPONENTS)


def test_ibuprofen_stereocentre_and_caffeine(tier: ChemFastTier) -> None:
    ibu, caf = tier.verify_batch([mol(IBUPROFEN), mol(CAFFEINE)], {})
    assert ibu.components["stereocentres"] == 1.0
    assert ibu.components["unassigned_stereocentres"] == 1.0
    assert ibu.components["mw"] == pytest.approx(206.28, abs=0.01)
    assert caf.components["mw"] == pytest.approx(194.19, abs=0.01)
    assert caf.components["aromatic_rings"] == 2.0
    assert caf.components["hbd"] == 0.0
    assert caf.components["stereocentres"] == 0.0


def test_lipinski_violations_of_a_big_lipophilic_molecule(tier: ChemFastTier) -> None:
    v = one(tier, "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC(=O)O")
    assert v.components["mw"] > 500
    assert v.components["logp"] > 5
    assert v.components["lipinski_violations"] == 2.0
    assert v.components["veber_violations"] == 1.0


def test_pains_hit_fails_with_alert_and_atoms(tier: ChemFastTier) -> None:
    v = one(tier, RHODANINE)
    assert v.status == VerdictStatus.failed
    assert v.reason == "alert:PAINS"
    assert v.score == 0.0
    assert v.components["alerts_pains"] == 1.0
    assert "ene_rhod_A" in v.feedback
    assert "at atoms [" in v.feedback
    catechol = one(tier, CATECHOL)
    assert catechol.reason == "alert:PAINS"
    assert "catechol_A" in catechol.feedback


def test_alerts_as_penalty_scale_qed(tier: ChemFastTier) -> None:
    v = one(tier, RHODANINE, {"alerts": {"PAINS": "penalty"}, "alert_penalty": 0.25})
    assert v.status == VerdictStatus.passed
    assert v.components["alert_penalty"] == pytest.approx(0.25)
    assert v.score == pytest.approx(0.25 * v.components["qed"])


def test_brenk_and_nih_reported(tier: ChemFastTier) -> None:
    v = one(tier, ASPIRIN, {"alerts": {"BRENK": "filter", "NIH": "report"}})
    assert v.status == VerdictStatus.failed
    assert v.reason == "alert:BRENK"
    assert "phenol_ester" in v.feedback
    assert v.components["alerts_nih"] == 0.0


def test_custom_smarts_filter_and_penalty(tier: ChemFastTier) -> None:
    acid = {"name": "carboxylic_acid", "smarts": "C(=O)[OH]"}
    v = one(tier, ASPIRIN, {"custom_alerts": [acid]})
    assert v.status == VerdictStatus.failed
    assert v.reason == "alert:carboxylic_acid"
    v = one(tier, ASPIRIN, {"custom_alerts": [{**acid, "action": "penalty", "penalty": 0.5}]})
    assert v.status == VerdictStatus.passed
    assert v.score == pytest.approx(0.5 * v.components["qed"])
    assert v.components["alerts_custom"] == 1.0


def test_required_substructure(tier: ChemFastTier) -> None:
    cfg = {"required_substructures": ["c1ccccc1"]}
    assert one(tier, ASPIRIN, cfg).status == VerdictStatus.passed
    v = one(tier, "CCO", cfg)
    assert v.status == VerdictStatus.failed
    assert v.reason == "missing_substructure"


def test_ranges_on_heavy_atoms_and_ring_size(tier: ChemFastTier) -> None:
    cfg = {"ranges": {"heavy_atoms": {"min": 5, "max": 50}, "max_ring_size": {"max": 7}}}
    assert one(tier, ASPIRIN, cfg).status == VerdictStatus.passed
    small = one(tier, "CCO", cfg)
    assert small.reason == "out_of_range:heavy_atoms"
    assert "heavy_atoms = 3" in small.feedback
    macro = one(tier, "C1CCCCCCCCCCC1", cfg)
    assert macro.reason == "out_of_range:max_ring_size"


def test_similarity_to_item_and_config_references(tier: ChemFastTier) -> None:
    (same,) = tier.verify_batch([mol(ASPIRIN, [ASPIRIN])], {})
    assert same.components["tanimoto_max"] == pytest.approx(1.0)
    (v,) = tier.verify_batch([mol(ASPIRIN, ["OC(=O)c1ccccc1O"])], {"reference_smiles": [CAFFEINE]})
    assert 0.0 < v.components["tanimoto_mean"] < v.components["tanimoto_max"] < 1.0


def test_item_references_are_not_kept_without_bound(tier: ChemFastTier) -> None:
    """A worker sees a new reference with most items: the fingerprints it keeps are bounded."""
    _reference_fp.cache_clear()
    references = [f"C{'C' * (i % 60)}O{'C' * (i // 60)}N" for i in range(REFERENCE_FP_CACHE + 500)]
    for start in range(0, len(references), 500):
        batch = [mol(ASPIRIN, references[start : start + 500])]
        (verdict,) = tier.verify_batch(batch, {})
        assert verdict.components["tanimoto_max"] > 0.0
    assert _reference_fp.cache_info().currsize == REFERENCE_FP_CACHE
    # The most recent ones are still served from the cache.
    hits = _reference_fp.cache_info().hits
    tier.verify_batch([mol(ASPIRIN, references[-10:])], {})
    assert _reference_fp.cache_info().hits == hits + 10


@pytest.mark.parametrize(
    ("smiles", "reason", "in_feedback"),
    [
        ("", "empty_smiles", "empty"),
        ("   ", "empty_smiles", "empty"),
        ("C1CC(", "invalid_smiles", "syntax error"),
        ("c1cccc1", "sanitization_failed", "Can't kekulize"),
        ("C(C)(C)(C)(C)C", "sanitization_failed", "Explicit valence"),
        ("C" * 10_000, "smiles_too_long", "10000 characters"),
        ("[CH3]", "radical", "unpaired"),
        ("[Pt](Cl)(Cl)(N)N", "element_not_allowed", "Pt"),
    ],
)
def test_bad_inputs_are_failed_verdicts(
    tier: ChemFastTier, smiles: str, reason: str, in_feedback: str
) -> None:
    v = one(tier, smiles)
    assert v.status == VerdictStatus.failed
    assert v.reason == reason
    assert in_feedback in v.feedback
    assert v.score == 0.0


def test_payload_without_smiles_is_failed(tier: ChemFastTier) -> None:
    (v,) = tier.verify_batch([Candidate(kind="molecule", payload={"smi": "CCO"})], {})
    assert v.status == VerdictStatus.failed
    assert v.reason == "invalid_payload"


def test_charged_species_and_charge_rules(tier: ChemFastTier) -> None:
    quat = one(tier, "C[N+](C)(C)C")
    assert quat.status == VerdictStatus.passed
    assert quat.components["formal_charge"] == 1.0
    assert quat.components["charged_atoms"] == 1.0
    assert one(tier, "C[N+](C)(C)C", {"allow_charged_atoms": False}).reason == "charged_atoms"
    assert one(tier, "C[N+](C)(C)C", {"max_abs_formal_charge": 0}).reason == "formal_charge"
    zwitterion = one(tier, "C[N+](C)(C)CC(=O)[O-]", {"max_abs_formal_charge": 0})
    assert zwitterion.status == VerdictStatus.passed


def test_disconnected_fragments(tier: ChemFastTier) -> None:
    salt = "CC(=O)Oc1ccccc1C(=O)[O-].[Na+]"
    stripped = one(tier, salt)
    assert stripped.status == VerdictStatus.passed
    assert stripped.components["fragments"] == 2.0
    assert stripped.components["heavy_atoms"] == 13.0
    assert "only the largest" in stripped.feedback
    rejected = one(tier, salt, {"fragments": "reject"})
    assert rejected.reason == "disconnected"
    kept = one(tier, salt, {"fragments": "keep", "allowed_elements": None})
    assert kept.status == VerdictStatus.passed
    assert kept.components["heavy_atoms"] == 14.0
    metal = one(tier, salt, {"fragments": "keep"})
    assert metal.reason == "element_not_allowed"


def test_batch_keeps_order_and_mixes_good_and_bad(tier: ChemFastTier) -> None:
    smiles = [ASPIRIN, "nonsense((", CAFFEINE, "", IBUPROFEN]
    verdicts = tier.verify_batch([mol(s) for s in smiles], {})
    assert [v.status.value for v in verdicts] == ["passed", "failed", "passed", "failed", "passed"]
    assert verdicts[2].components["mw"] == pytest.approx(194.19, abs=0.01)


def test_canonical_payload(tier: ChemFastTier) -> None:
    assert tier.canonical_payload(mol("OC(=O)c1ccccc1OC(C)=O")) == ASPIRIN
    assert tier.canonical_payload(mol("  not a smiles ")) == "not a smiles"


@pytest.mark.parametrize(
    "config",
    [
        {"unknown_key": 1},
        {"ranges": {"no_such_component": {"max": 1}}},
        {"ranges": {"mw": {"min": 500, "max": 100}}},
        {"alerts": {"NOT_A_CATALOG": "filter"}},
        {"custom_alerts": [{"name": "x", "smarts": "[C"}]},
        {"required_substructures": ["c1ccc"]},
        {"allowed_elements": ["C", "Xx"]},
        {"reference_smiles": ["C1CC("]},
    ],
)
def test_bad_config_raises_value_error(tier: ChemFastTier, config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"invalid chem\.fast config"):
        tier.validate_config(config)
    with pytest.raises(ValueError, match=r"invalid chem\.fast config"):
        tier.verify_batch([mol(ASPIRIN)], config)


def test_module_imports_fast() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import tiers.chem.fast; "
        "print(time.perf_counter() - t); "
        "print(any(m.split('.')[0] in {'sklearn', 'pyscf', 'tblite'} for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert float(out[0]) < 3.0
    assert out[1] == "False"
