"""The DFT child: `python -m tiers.chem.dft_runner --memory-mb N` reads one job (JSON) on stdin and
writes one result (JSON) on stdout. chem.dft starts it with a memory cap and kills it at its
timeout, so a runaway SCF cannot take a worker down.

Job: {"atoms": [[symbol, x, y, z], ...] (Angstrom), "charge": int, "spin": int (2S),
"method": "B3LYP" | "HF" | any PySCF xc, "basis": str, "max_cycle": int, "conv_tol": float,
"density_fit": bool, "max_memory_mb": int}.
Result: {"ok": true, "converged", "energy_hartree", "homo_ev", "lumo_ev", "gap_ev",
"dipole_debye", "scf_cycles", "n_basis", "open_shell"} or {"ok": false, "kind", "message"}.
"""

from __future__ import annotations

import os
import resource
import sys

# The thread pools of numpy's BLAS and PySCF read these when they load: one thread per child,
# parallelism across molecules. Set before anything imports numpy.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import errno  # noqa: E402
import json  # noqa: E402
from typing import Any  # noqa: E402

HARTREE_TO_EV = 27.211386245988


def compute(job: dict[str, Any]) -> dict[str, Any]:
    """Run one PySCF single point (RKS/RHF, or UKS/UHF for open shells)."""
    import numpy as np
    from pyscf import dft, gto, lib, scf

    lib.num_threads(1)
    mol = gto.M(
        atom=[(a[0], (float(a[1]), float(a[2]), float(a[3]))) for a in job["atoms"]],
        unit="Angstrom",
        basis=job["basis"],
        charge=int(job["charge"]),
        spin=int(job["spin"]),
        verbose=0,
        max_memory=int(job.get("max_memory_mb", 4000)),
    )
    method = str(job["method"])
    open_shell = mol.spin > 0
    if method.upper() == "HF":
        mf = scf.UHF(mol) if open_shell else scf.RHF(mol)
    else:
        mf = dft.UKS(mol) if open_shell else dft.RKS(mol)
        mf.xc = method
    if job.get("density_fit"):
        mf = mf.density_fit()
    mf.max_cycle = int(job.get("max_cycle", 100))
    mf.conv_tol = float(job.get("conv_tol", 1e-9))
    cycles = {"n": 0}

    def count(_envs: dict[str, Any]) -> None:
        cycles["n"] += 1

    mf.callback = count
    energy = float(mf.kernel())
    mo_energy = np.asarray(mf.mo_energy)
    mo_occ = np.asarray(mf.mo_occ)
    occupied = mo_energy[mo_occ > 0.5]
    virtual = mo_energy[mo_occ <= 0.5]
    homo = float(occupied.max()) * HARTREE_TO_EV if occupied.size else float("nan")
    lumo = float(virtual.min()) * HARTREE_TO_EV if virtual.size else float("nan")
    dipole = np.asarray(mf.dip_moment(unit="Debye", verbose=0))
    return {
        "ok": True,
        "converged": bool(mf.converged),
        "energy_hartree": energy,
        "homo_ev": homo,
        "lumo_ev": lumo,
        "gap_ev": lumo - homo,
        "dipole_debye": float(np.linalg.norm(dipole)),
        "scf_cycles": cycles["n"],
        "n_basis": int(mol.nao_nr()),
        "open_shell": open_shell,
    }


def _classify(exc: OSError | ImportError) -> str:
    # Under the address-space cap, mapping a shared library fails (ENOMEM) at import time.
    text = str(exc)
    if getattr(exc, "errno", None) == errno.ENOMEM or "failed to map segment" in text:
        return "memory"
    return "missing" if isinstance(exc, ImportError) else "failed"


def limit_memory(argv: list[str]) -> None:
    """`--memory-mb N`: cap this process's address space before numpy and PySCF load."""
    if "--memory-mb" in argv:
        limit = int(argv[argv.index("--memory-mb") + 1]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    try:
        limit_memory(sys.argv[1:])
        job = json.loads(sys.stdin.read())
        result = compute(job)
    except MemoryError:
        result = {"ok": False, "kind": "memory", "message": "MemoryError"}
    except (OSError, ImportError) as exc:
        result = {"ok": False, "kind": _classify(exc), "message": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # report PySCF's own message to the parent, which decides
        result = {"ok": False, "kind": "failed", "message": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
