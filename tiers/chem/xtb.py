"""GFN2-xTB single points with tblite (optional extra `quantum`), one thread per process."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np
from rdkit import Chem

XtbMethod = Literal["GFN2-xTB", "GFN1-xTB"]

ANGSTROM_TO_BOHR = 1.0 / 0.52917721067
HARTREE_TO_EV = 27.211386245988
E_BOHR_TO_DEBYE = 2.541746473


@dataclass(frozen=True, slots=True)
class XtbResult:
    """Results of one xTB single point, in the units named."""

    energy_hartree: float
    gap_ev: float
    dipole_debye: float
    charges: list[float]  # Mulliken-type partial charges (e), one per atom incl. H


class XtbError(RuntimeError):
    """tblite is missing, or its SCF failed on this molecule."""


@cache
def _calculator_class() -> Any:
    try:
        from tblite.interface import Calculator
    except ImportError as exc:  # the optional extra is not installed
        raise XtbError(
            "tblite is not installed; install the 'quantum' extra (pip install "
            "'verifier-service[quantum]') or leave xtb out of the chem.surrogate config"
        ) from exc
    return Calculator


def _one_thread() -> Any:
    """Pin OpenMP/BLAS pools to one thread: parallelism is across molecules and processes.

    threadpoolctl (a scikit-learn dependency) calls omp_set_num_threads on the OpenMP runtime
    tblite has loaded, so this holds even when the worker did not set OMP_NUM_THREADS.
    """
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - scikit-learn brings it
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(limits=1)


def homo_lumo_gap_ev(energies: np.ndarray, occupations: np.ndarray) -> float:
    """HOMO-LUMO gap (eV) from orbital energies and occupations (restricted or [2, norb])."""
    energies = np.atleast_2d(energies)
    occupations = np.atleast_2d(occupations)
    occupied = energies[occupations > 0.5]
    virtual = energies[occupations <= 0.5]
    if occupied.size == 0 or virtual.size == 0:
        return float("nan")
    return float((virtual.min() - occupied.max()) * HARTREE_TO_EV)


def xtb_single_point(
    mol: Chem.Mol,
    conf_id: int = -1,
    *,
    method: XtbMethod = "GFN2-xTB",
    charge: int | None = None,
    uhf: int | None = None,
    max_iterations: int = 250,
) -> XtbResult:
    """xTB single point on a conformer of `mol` (explicit Hs). Charge/spin default to the mol's."""
    calculator_class = _calculator_class()
    conf = mol.GetConformer(conf_id)
    numbers = np.array([a.GetAtomicNum() for a in mol.GetAtoms()], dtype=np.int32)
    positions = np.asarray(conf.GetPositions(), dtype=np.float64) * ANGSTROM_TO_BOHR
    if charge is None:
        charge = Chem.GetFormalCharge(mol)
    if uhf is None:
        uhf = sum(a.GetNumRadicalElectrons() for a in mol.GetAtoms())
    with _one_thread():
        try:
            calc = calculator_class(method, numbers, positions, charge=float(charge), uhf=uhf)
            calc.set("verbosity", 0)
            calc.set("max-iter", max_iterations)
            res = calc.singlepoint()
            energy = float(res.get("energy"))
            orbital_energies = np.asarray(res.get("orbital-energies"))
            occupations = np.asarray(res.get("orbital-occupations"))
            dipole = np.asarray(res.get("dipole"))
            charges = np.asarray(res.get("charges"))
        except Exception as exc:  # tblite raises its own error types; all mean "no result"
            raise XtbError(f"{method} single point failed: {exc}") from exc
    if not np.isfinite(energy):
        raise XtbError(f"{method} returned a non-finite energy")
    return XtbResult(
        energy_hartree=energy,
        gap_ev=homo_lumo_gap_ev(orbital_energies, occupations),
        dipole_debye=float(np.linalg.norm(dipole) * E_BOHR_TO_DEBYE),
        charges=[float(q) for q in charges],
    )
