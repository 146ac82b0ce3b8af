"""3D geometry: ETKDGv3 conformer ensemble, MMFF94 (UFF fallback) minimisation, strain energy.

Strain energy follows the ligand-strain literature (Perola & Charifson 2004; Gu et al. 2021):
the force-field energy of a conformer after *local* relaxation minus the energy of the global
minimum found in a minimised conformer ensemble. Here the conformer is the first ETKDG
embedding of the molecule (the pose a SMILES-only candidate gets), and the ensemble is every
embedded conformer, each minimised; so strain >= 0, and large values mean the molecule's first
embedding relaxes into a high-energy local minimum (strained rings, clashes, bad stereo).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

from rdkit import Chem
from rdkit.Chem import rdDistGeom, rdForceFieldHelpers

ForceFieldName = Literal["MMFF94", "MMFF94s", "UFF"]


@dataclass(frozen=True, slots=True)
class Geometry:
    """A molecule with explicit hydrogens and minimised conformers, and their energies."""

    mol: Chem.Mol  # with Hs; conformer ids 0..n-1 match `energies`
    energies: list[float]  # kcal/mol, per conformer after minimisation
    converged: list[bool]
    force_field: str  # the force field actually used
    pose_id: int  # the conformer whose strain is reported (the first embedded)
    best_id: int  # the lowest-energy conformer: the geometry handed to xTB / DFT

    @property
    def strain_kcal(self) -> float:
        return self.energies[self.pose_id] - self.energies[self.best_id]

    @property
    def energy_kcal(self) -> float:
        return self.energies[self.best_id]


@dataclass(frozen=True, slots=True)
class GeometryFailure:
    """Why no geometry could be produced; `reason` is a verdict reason code."""

    reason: str
    message: str
    ours: bool = False  # True when the fault is a limit of ours (a timeout), not the molecule


def embed_and_minimise(
    mol: Chem.Mol,
    *,
    n_conformers: int,
    seed: int,
    timeout_s: float,
    force_field: ForceFieldName = "MMFF94",
    max_iterations: int = 2000,
) -> Geometry | GeometryFailure:
    """Embed `n_conformers` with ETKDGv3 (fixed seed, one thread) and minimise each."""
    mol_h = Chem.AddHs(mol)
    params: Any = rdDistGeom.ETKDGv3()  # RDKit's stubs type its attributes wrongly
    params.randomSeed = seed
    params.numThreads = 1  # parallelism is across worker processes; keeps runs reproducible
    params.timeout = max(1, math.ceil(timeout_s))  # RDKit's embedding budget, whole seconds
    params.pruneRmsThresh = -1.0
    started = time.perf_counter()
    conf_ids = list(rdDistGeom.EmbedMultipleConfs(mol_h, n_conformers, params))
    if not conf_ids:
        # Second try from random coordinates: it embeds some cages and fused systems ETKDG's
        # eigenvalue start cannot.
        params.useRandomCoords = True
        conf_ids = list(rdDistGeom.EmbedMultipleConfs(mol_h, n_conformers, params))
    elapsed = time.perf_counter() - started
    if not conf_ids:
        if elapsed >= timeout_s:
            return GeometryFailure(
                reason="embed_timeout",
                message=f"3D embedding did not finish within {timeout_s:g} s.",
                ours=True,
            )
        return GeometryFailure(
            reason="embed_failed",
            message="RDKit ETKDGv3 could not embed the molecule in 3D (tried eigenvalue and "
            "random-coordinate starts): its rings, stereochemistry or valences admit no "
            "reasonable geometry.",
        )

    used = force_field
    if force_field != "UFF":
        variant = "MMFF94s" if force_field == "MMFF94s" else "MMFF94"
        if rdForceFieldHelpers.MMFFHasAllMoleculeParams(mol_h):
            results = rdForceFieldHelpers.MMFFOptimizeMoleculeConfs(
                mol_h, numThreads=1, maxIters=max_iterations, mmffVariant=variant
            )
        else:
            used = "UFF"
    if used == "UFF":
        if not rdForceFieldHelpers.UFFHasAllMoleculeParams(mol_h):
            return GeometryFailure(
                reason="forcefield_unavailable",
                message="Neither MMFF94 nor UFF has parameters for every atom of the molecule.",
            )
        results = rdForceFieldHelpers.UFFOptimizeMoleculeConfs(
            mol_h, numThreads=1, maxIters=max_iterations
        )
    energies = [float(e) for _, e in results]
    converged = [flag == 0 for flag, _ in results]
    best = min(range(len(energies)), key=energies.__getitem__)
    return Geometry(
        mol=mol_h,
        energies=energies,
        converged=converged,
        force_field=used,
        pose_id=0,
        best_id=best,
    )
