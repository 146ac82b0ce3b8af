"""chem.dft: PySCF DFT single point on the force-field geometry, in a capped child process.

Seconds to minutes per molecule. Each molecule runs in its own `python -m
tiers.chem.dft_runner` with an address-space cap (RLIMIT_AS) and a hard kill at the timeout,
so a runaway SCF cannot take a worker down. Non-convergence, timeouts and crashes are `error`
verdicts with reasons, never numbers. The score maps one result (default: the HOMO-LUMO gap)
linearly onto [0, 1]; policies usually build their reward from the components instead.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from rdkit import Chem, rdBase

from tiers.base import Candidate, Cost, Verdict, VerdictStatus, judge_one, missing_package
from tiers.chem.conformers import ForceFieldName, Geometry, embed_and_minimise
from tiers.chem.molecule import (
    FragmentPolicy,
    candidate_smiles,
    canonical_or_raw,
    parse_smiles,
)
from tiers.chem.settings import ChemSettings

ScoreComponent = Literal["dft_gap_ev", "dft_dipole_debye", "dft_homo_ev", "dft_lumo_ev"]


class ChemDftConfig(BaseModel):
    """Policy configuration of chem.dft."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    functional: str = Field(
        default="B3LYP", min_length=1, description="PySCF xc name, or HF for Hartree-Fock."
    )
    basis: str = Field(default="def2-SVP", min_length=1, description="PySCF basis name.")
    density_fit: bool = Field(default=False, description="RI-J/K: faster, ~1e-5 Eh off exact.")
    max_cycle: int = Field(default=100, ge=1, le=1000)
    conv_tol: float = Field(default=1e-9, gt=0, le=1e-4, description="SCF energy tolerance, Eh.")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Lower the settings' dft_timeout_s for this policy."
    )
    memory_mb: int | None = Field(
        default=None, ge=200, description="Lower the settings' dft_memory_mb for this policy."
    )
    max_smiles_length: int = Field(default=2000, gt=0)
    fragments: FragmentPolicy = "largest"
    max_heavy_atoms: int = Field(default=30, ge=1)
    n_conformers: int = Field(default=8, ge=1, le=300, description="As chem.surrogate's.")
    seed: int = Field(default=42, ge=0, description="As chem.surrogate's: same geometry.")
    embed_timeout_s: float = Field(default=10.0, gt=0, le=600)
    force_field: ForceFieldName = "MMFF94"
    score_component: ScoreComponent = "dft_gap_ev"
    score_low: float = Field(default=0.0, description="Component value that maps to score 0.")
    score_high: float = Field(default=10.0, description="Component value that maps to score 1.")

    @model_validator(mode="after")
    def _score_span(self) -> ChemDftConfig:
        if self.score_low == self.score_high:
            raise ValueError("score_low and score_high must differ")
        return self

    @field_validator("functional")
    @classmethod
    def _known_functional(cls, value: str) -> str:
        if value.upper() == "HF":
            return value
        try:
            from pyscf.dft import libxc
        except ImportError:  # validated again by PySCF in the child
            return value
        try:
            libxc.parse_xc(value)
        except Exception as exc:
            raise ValueError(f"PySCF does not know the functional {value!r}: {exc}") from exc
        return value

    @field_validator("basis")
    @classmethod
    def _known_basis(cls, value: str) -> str:
        try:
            from pyscf.gto import basis
        except ImportError:
            return value
        try:
            with warnings.catch_warnings():  # PySCF suggests installing basis-set-exchange
                warnings.simplefilter("ignore")
                basis.load(value, "H")
        except Exception as exc:
            raise ValueError(f"PySCF does not know the basis {value!r}") from exc
        return value


def parse_config(config: Mapping[str, Any]) -> ChemDftConfig:
    try:
        return ChemDftConfig.model_validate(dict(config))
    except ValidationError as exc:
        raise ValueError(f"invalid chem.dft config: {exc}") from exc


@dataclass(frozen=True, slots=True)
class DftOutcome:
    """What the child reported, or why it reported nothing."""

    ok: bool
    result: dict[str, Any]
    reason: str | None = None  # verdict reason when not ok
    message: str = ""
    child_cpu_s: float = 0.0


def run_dft(job: Mapping[str, Any], *, timeout_s: float, memory_mb: int) -> DftOutcome:
    """Run one job in a fresh child process; SIGKILL its process group at the timeout."""
    before = _children_cpu_s()
    outcome = _run_child(job, timeout_s=timeout_s, memory_mb=memory_mb)
    return replace(outcome, child_cpu_s=max(_children_cpu_s() - before, 0.0))


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_child(job: Mapping[str, Any], *, timeout_s: float, memory_mb: int) -> DftOutcome:
    proc = subprocess.Popen(
        # The child caps its own address space (RLIMIT_AS) first thing: no preexec_fn, which
        # is unsafe in a threaded parent.
        [sys.executable, "-m", "tiers.chem.dft_runner", "--memory-mb", str(memory_mb)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the kill reaches any grandchildren
    )
    try:
        stdout, stderr = proc.communicate(json.dumps(dict(job)), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return DftOutcome(
            ok=False,
            result={},
            reason="dft_timeout",
            message=f"DFT did not finish within {timeout_s:g} s and was killed.",
        )
    try:
        result: dict[str, Any] = json.loads(stdout) if stdout.strip() else {}
    except json.JSONDecodeError:
        result = {}
    if not result:
        tail = stderr.strip().splitlines()[-5:]
        died = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        memory_hint = any("MemoryError" in line or "memory" in line.lower() for line in tail)
        return DftOutcome(
            ok=False,
            result={},
            reason="dft_out_of_memory" if memory_hint else "dft_crashed",
            message=f"The DFT process died ({died}) without a result: " + " | ".join(tail),
        )
    if not result.get("ok"):
        kind = result.get("kind")
        reason = {"memory": "dft_out_of_memory", "missing": "dft_unavailable"}.get(
            str(kind), "dft_failed"
        )
        message = str(result["message"])
        if reason == "dft_out_of_memory":
            message = f"The DFT process hit its memory cap of {memory_mb} MB ({message})."
        return DftOutcome(ok=False, result=result, reason=reason, message=message)
    if not result.get("converged"):
        return DftOutcome(
            ok=False,
            result=result,
            reason="dft_not_converged",
            message=f"The SCF did not converge in {job.get('max_cycle')} cycles.",
        )
    return DftOutcome(ok=True, result=result)


def geometry_atoms(geometry: Geometry) -> list[list[Any]]:
    """[symbol, x, y, z] (Angstrom) of the lowest-energy conformer, hydrogens included."""
    conf = geometry.mol.GetConformers()[geometry.best_id]
    positions = conf.GetPositions()
    return [
        [atom.GetSymbol(), *(float(c) for c in positions[atom.GetIdx()])]
        for atom in geometry.mol.GetAtoms()
    ]


class ChemDftTier:
    """PySCF DFT single point (default B3LYP/def2-SVP) on the force-field geometry."""

    name: ClassVar[str] = "chem.dft"
    version: ClassVar[str] = "1.0.0"
    queue: ClassVar[str] = "tier.hifi"
    cost_class: ClassVar[float] = 10.0
    kinds: ClassVar[frozenset[str]] = frozenset({"molecule"})

    settings_model: ClassVar[type[ChemSettings]] = ChemSettings

    def __init__(self, settings: ChemSettings | None = None) -> None:
        self.settings = settings or ChemSettings()
        self.timeout_s = self.settings.dft_timeout_s
        self.memory_mb = self.settings.dft_memory_mb

    def validate_config(self, config: Mapping[str, Any]) -> None:
        """Raise ValueError with a clear message when `config` is not valid for this tier."""
        parse_config(config)

    def missing_packages(self, _config: Mapping[str, Any]) -> list[str]:
        """What this process lacks to run any config: PySCF."""
        missing = missing_package("pyscf", "quantum")
        return [] if missing is None else [missing]

    def canonical_payload(self, item: Candidate) -> str:
        """Canonical isomeric SMILES of the whole input; the raw stripped text if it won't parse."""
        return canonical_or_raw(candidate_smiles(item))

    def _verdict(self, status: VerdictStatus, **fields: Any) -> Verdict:
        return Verdict(status=status, tier=self.name, tier_version=self.version, **fields)

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        """One verdict per item, each from its own capped child process."""
        cfg = parse_config(config)
        return [
            judge_one(self.name, self.version, partial(self._verify_one, item, cfg))
            for item in items
        ]

    def _verify_one(self, item: Candidate, cfg: ChemDftConfig) -> Verdict:
        """The verdict; its cost holds the CPU seconds of its DFT child, if one ran."""
        with rdBase.CaptureErrorLog():
            parsed = parse_smiles(
                candidate_smiles(item), max_length=cfg.max_smiles_length, fragments=cfg.fragments
            )
        if parsed.mol is None:
            return self._verdict(
                VerdictStatus.failed,
                score=0.0,
                components={"valid": 0.0},
                feedback=parsed.message,
                reason=parsed.reason,
            )
        mol = parsed.mol
        heavy = mol.GetNumHeavyAtoms()
        components: dict[str, float] = {"valid": 1.0, "heavy_atoms": float(heavy)}
        if heavy > cfg.max_heavy_atoms:
            return self._verdict(
                VerdictStatus.failed,
                score=0.0,
                components=components,
                feedback=f"The molecule has {heavy} heavy atoms; at most {cfg.max_heavy_atoms} "
                "are accepted by this tier.",
                reason="too_large",
            )
        geometry = embed_and_minimise(
            mol,
            n_conformers=cfg.n_conformers,
            seed=cfg.seed,
            timeout_s=cfg.embed_timeout_s,
            force_field=cfg.force_field,
        )
        if not isinstance(geometry, Geometry):
            return self._verdict(
                VerdictStatus.error if geometry.ours else VerdictStatus.failed,
                score=None if geometry.ours else 0.0,
                components=components,
                feedback=geometry.message,
                reason=geometry.reason,
            )
        charge = Chem.GetFormalCharge(mol)
        spin = sum(a.GetNumRadicalElectrons() for a in mol.GetAtoms())
        components["charge"] = float(charge)
        components["multiplicity"] = float(spin + 1)
        timeout_s = min(cfg.timeout_s or math.inf, self.timeout_s)
        memory_mb = min(cfg.memory_mb or self.memory_mb, self.memory_mb)
        job = {
            "atoms": geometry_atoms(geometry),
            "charge": charge,
            "spin": spin,
            "method": cfg.functional,
            "basis": cfg.basis,
            "density_fit": cfg.density_fit,
            "max_cycle": cfg.max_cycle,
            "conv_tol": cfg.conv_tol,
            # PySCF plans its buffers within this; leave headroom for Python and numpy.
            "max_memory_mb": max(100, int(memory_mb * 0.7)),
        }
        method = f"{'U' if spin else 'R'}{cfg.functional}/{cfg.basis}"
        outcome = run_dft(job, timeout_s=timeout_s, memory_mb=memory_mb)
        if not outcome.ok:
            if outcome.reason == "dft_not_converged":
                components["dft_converged"] = 0.0
                components["dft_scf_cycles"] = float(outcome.result.get("scf_cycles", 0))
            return self._verdict(
                VerdictStatus.error,
                components=components,
                feedback=f"{method} on the {geometry.force_field} geometry: {outcome.message}",
                reason=outcome.reason,
                cost=Cost(cpu_s=outcome.child_cpu_s),
            )
        r = outcome.result
        components.update(
            {
                "dft_converged": 1.0,
                "dft_energy_hartree": float(r["energy_hartree"]),
                "dft_homo_ev": float(r["homo_ev"]),
                "dft_lumo_ev": float(r["lumo_ev"]),
                "dft_gap_ev": float(r["gap_ev"]),
                "dft_dipole_debye": float(r["dipole_debye"]),
                "dft_scf_cycles": float(r["scf_cycles"]),
                "dft_n_basis": float(r["n_basis"]),
            }
        )
        value = components[cfg.score_component]
        score = (value - cfg.score_low) / (cfg.score_high - cfg.score_low)
        if not math.isfinite(score):
            score = 0.0
        return self._verdict(
            VerdictStatus.passed,
            score=min(max(score, 0.0), 1.0),
            components=components,
            cost=Cost(cpu_s=outcome.child_cpu_s),
            feedback=(
                f"{method} on the {geometry.force_field} geometry of {parsed.smiles}: "
                f"E = {r['energy_hartree']:.8f} Eh, HOMO-LUMO gap {r['gap_ev']:.3f} eV, "
                f"dipole {r['dipole_debye']:.3f} D, {r['scf_cycles']} SCF cycles."
            ),
        )
