"""chem.dft: reference energies of water, and every way a DFT run can go wrong."""

from __future__ import annotations

from typing import Any

import pytest

from tiers.base import Candidate, Tier, VerdictStatus
from tiers.chem.conformers import Geometry, embed_and_minimise
from tiers.chem.dft import ChemDftTier, geometry_atoms, run_dft
from tiers.chem.molecule import parse_smiles
from tiers.chem.settings import ChemSettings
from tiers.registry import get_tier

BOHR = 0.52917721067  # Angstrom

# Water of the Crawford group's SCF programming project #3 (geometry in Bohr), whose published
# RHF/STO-3G total energy is -74.942079928192 Eh: a reference from outside PySCF.
CRAWFORD_WATER = [
    ["O", 0.0, -0.143225816552 * BOHR, 0.0],
    ["H", 1.638036840407 * BOHR, 1.136548822547 * BOHR, 0.0],
    ["H", -1.638036840407 * BOHR, 1.136548822547 * BOHR, 0.0],
]
CRAWFORD_RHF_STO3G = -74.942079928192


def mol(smiles: str) -> Candidate:
    return Candidate(kind="molecule", payload={"smiles": smiles})


@pytest.fixture(scope="module")
def tier() -> ChemDftTier:
    return ChemDftTier(ChemSettings(dft_timeout_s=120, dft_memory_mb=2000))


def run(tier: ChemDftTier, smiles: str, config: dict[str, Any] | None = None) -> Any:
    (verdict,) = tier.verify_batch([mol(smiles)], config or {})
    return verdict


def test_registered_and_satisfies_protocol() -> None:
    tier = get_tier("chem.dft")
    assert isinstance(tier, Tier)
    assert (tier.queue, tier.cost_class) == ("tier.hifi", pytest.approx(10.0))


def test_child_process_matches_published_water_rhf_energy() -> None:
    job = {
        "atoms": CRAWFORD_WATER,
        "charge": 0,
        "spin": 0,
        "method": "HF",
        "basis": "sto-3g",
        "max_cycle": 100,
        "conv_tol": 1e-10,
    }
    outcome = run_dft(job, timeout_s=120, memory_mb=2000)
    assert outcome.ok, outcome.message
    assert outcome.result["energy_hartree"] == pytest.approx(CRAWFORD_RHF_STO3G, abs=1e-6)
    assert outcome.child_cpu_s > 0


def test_water_b3lyp_def2svp_matches_in_process_pyscf(tier: ChemDftTier) -> None:
    v = run(tier, "O")
    assert v.status == VerdictStatus.passed, v.feedback
    energy = v.components["dft_energy_hartree"]
    # The same single point in this process, on the same force-field geometry.
    from pyscf import dft, gto

    parsed = parse_smiles("O", max_length=10)
    assert parsed.mol is not None
    geometry = embed_and_minimise(parsed.mol, n_conformers=8, seed=42, timeout_s=10)
    assert isinstance(geometry, Geometry)
    atoms = [(a[0], tuple(a[1:])) for a in geometry_atoms(geometry)]
    ref = dft.RKS(gto.M(atom=atoms, basis="def2-SVP", verbose=0), xc="B3LYP")
    ref.conv_tol = 1e-9
    assert energy == pytest.approx(ref.kernel(), abs=1e-6)
    assert energy == pytest.approx(-76.358, abs=5e-3)  # B3LYP/def2-SVP water, near equilibrium
    assert v.components["dft_converged"] == 1.0
    assert 8.0 < v.components["dft_gap_ev"] < 10.5
    assert 1.8 < v.components["dft_dipole_debye"] < 2.2
    assert v.score == pytest.approx(v.components["dft_gap_ev"] / 10.0)
    assert "RB3LYP/def2-SVP" in v.feedback
    assert v.cost.cpu_s > 0.1  # the child's CPU time is counted


def test_open_shell_uses_uks(tier: ChemDftTier) -> None:
    v = run(tier, "[OH]", {"basis": "sto-3g"})
    assert v.status == VerdictStatus.passed, v.feedback
    assert v.components["multiplicity"] == 2.0
    assert "UB3LYP/sto-3g" in v.feedback


def test_timeout_kills_the_child(tier: ChemDftTier) -> None:
    v = run(tier, "O", {"timeout_s": 0.2})
    assert v.status == VerdictStatus.error
    assert v.reason == "dft_timeout"
    assert "killed" in v.feedback
    assert v.score is None
    assert v.cost.wall_s < 5


def test_settings_timeout_cannot_be_raised_by_config() -> None:
    short = ChemDftTier(ChemSettings(dft_timeout_s=0.2, dft_memory_mb=2000))
    assert run(short, "O", {"timeout_s": 1000}).reason == "dft_timeout"


def test_non_convergence_is_an_error_not_a_number(tier: ChemDftTier) -> None:
    v = run(tier, "O", {"max_cycle": 2})
    assert v.status == VerdictStatus.error
    assert v.reason == "dft_not_converged"
    assert v.components["dft_converged"] == 0.0
    assert "dft_energy_hartree" not in v.components


def test_memory_cap(tier: ChemDftTier) -> None:
    v = run(tier, "O", {"memory_mb": 250})
    assert v.status == VerdictStatus.error
    assert v.reason == "dft_out_of_memory"
    assert "memory cap of 250 MB" in v.feedback


def test_bad_molecules(tier: ChemDftTier) -> None:
    verdicts = tier.verify_batch([mol("C1CC("), mol(""), mol("C" * 40)], {})
    assert [v.reason for v in verdicts] == ["invalid_smiles", "empty_smiles", "too_large"]
    assert all(v.status == VerdictStatus.failed for v in verdicts)


@pytest.mark.parametrize(
    "config",
    [
        {"functional": "NOT-A-FUNCTIONAL"},
        {"basis": "no-such-basis"},
        {"timeout_s": -1},
        {"memory_mb": 10},
        {"score_low": 1, "score_high": 1},
        {"unknown": 1},
    ],
)
def test_bad_config(tier: ChemDftTier, config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"invalid chem\.dft config"):
        tier.validate_config(config)
