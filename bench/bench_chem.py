"""Benchmark of the chemistry tiers on molecules from RDKit's bundled NCI set.

Reports, per tier, the median cost (wall and CPU seconds) per molecule from the verdicts, and
for chem.fast the service throughput as a ratio to a bare RDKit loop that computes the same
properties and alerts in the same run (interleaved, best of --repeats).

    .venv/bin/python bench/bench_chem.py                 # ~1-2 minutes on 2 cores
    .venv/bin/python bench/bench_chem.py --n 500 --n-sim 200 --n-dft 0 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rdkit import Chem, RDConfig, rdBase
from rdkit.Chem import QED, FilterCatalog, rdMolDescriptors
from rdkit.Contrib.SA_Score import sascorer

from tiers.base import Candidate, Verdict
from tiers.chem.dft import ChemDftTier
from tiers.chem.fast import ChemFastTier
from tiers.chem.settings import ChemSettings
from tiers.chem.surrogate import ChemSurrogateTier
from tiers.chem.surrogate_model import train_surrogate
from verifier_service.settings import get_settings


def nci_smiles(n: int, *, skip: int = 0, max_heavy: int | None = None) -> list[str]:
    """The first `n` single-fragment molecules of RDKit's NCI/first_5K.smi after `skip`."""
    out: list[str] = []
    lines = (Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi").read_text().splitlines()
    with rdBase.BlockLogs():
        for line in lines[skip:]:
            smiles = line.split()[0]
            mol = Chem.MolFromSmiles(smiles)
            if mol is None or len(Chem.GetMolFrags(mol)) != 1:
                continue
            if max_heavy is not None and mol.GetNumHeavyAtoms() > max_heavy:
                continue
            out.append(smiles)
            if len(out) == n:
                break
    return out


def bare_rdkit_loop(smiles: Sequence[str]) -> int:
    """What chem.fast's default config computes, written as a plain RDKit loop."""

    def catalog(name: str) -> FilterCatalog.FilterCatalog:
        params = FilterCatalog.FilterCatalogParams()
        params.AddCatalog(getattr(FilterCatalog.FilterCatalogParams.FilterCatalogs, name))
        return FilterCatalog.FilterCatalog(params)

    pains, brenk = catalog("PAINS"), catalog("BRENK")
    done = 0
    for s in smiles:
        mol = Chem.MolFromSmiles(s)
        if mol is None:
            continue
        Chem.MolToSmiles(mol)
        props = QED.properties(mol)  # type: ignore[no-untyped-call]
        rings = [len(r) for r in mol.GetRingInfo().AtomRings()]
        _ = (
            mol.GetNumHeavyAtoms(),
            rdMolDescriptors.CalcNumHBD(mol),
            rdMolDescriptors.CalcNumHBA(mol),
            rdMolDescriptors.CalcNumRotatableBonds(mol),
            rdMolDescriptors.CalcFractionCSP3(mol),
            rdMolDescriptors.CalcNumAromaticRings(mol),
            min(rings, default=0),
            max(rings, default=0),
            Chem.FindMolChiralCenters(  # type: ignore[no-untyped-call]
                mol, includeUnassigned=True, includeCIP=False, useLegacyImplementation=False
            ),
            Chem.GetFormalCharge(mol),
            QED.qed(mol, qedProperties=props),  # type: ignore[no-untyped-call]
            sascorer.calculateScore(mol),
            pains.GetMatches(mol),
            brenk.GetMatches(mol),
        )
        done += 1
    return done


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def summarise(name: str, verdicts: Sequence[Verdict], total_wall_s: float) -> dict[str, Any]:
    walls = [v.cost.wall_s for v in verdicts]
    cpus = [v.cost.cpu_s for v in verdicts]
    return {
        "tier": name,
        "molecules": len(verdicts),
        "median_wall_ms": 1e3 * statistics.median(walls),
        "median_cpu_ms": 1e3 * statistics.median(cpus),
        "p90_wall_ms": 1e3 * statistics.quantiles(walls, n=10)[-1] if len(walls) > 1 else 0.0,
        "throughput_per_s": len(verdicts) / total_wall_s if total_wall_s else 0.0,
        "statuses": dict(Counter(v.status.value for v in verdicts)),
        "reasons": dict(Counter(v.reason for v in verdicts if v.reason)),
    }


def bench_fast(smiles: list[str], repeats: int, batch: int) -> dict[str, Any]:
    tier = ChemFastTier()
    items = [Candidate(kind="molecule", payload={"smiles": s}) for s in smiles]
    tier.verify_batch(items[:8], {})  # warm: catalogs, SA fragment table
    bare_rdkit_loop(smiles[:8])
    service_times: list[float] = []
    bare_times: list[float] = []
    verdicts: list[Verdict] = []
    for _ in range(repeats):  # interleaved, so both see the same machine load
        elapsed, bare_done = timed(lambda: bare_rdkit_loop(smiles))
        bare_times.append(elapsed)
        out: list[Verdict] = []
        start = time.perf_counter()
        for i in range(0, len(items), batch):
            out.extend(tier.verify_batch(items[i : i + batch], {}))
        elapsed = time.perf_counter() - start
        service_times.append(elapsed)
        verdicts = out
    result = summarise("chem.fast", verdicts, min(service_times))
    result["bare_rdkit_per_s"] = bare_done / min(bare_times)
    result["throughput_ratio_vs_bare_rdkit"] = (
        result["throughput_per_s"] / result["bare_rdkit_per_s"]
    )
    return result


def bench_surrogate(smiles: list[str], train_smiles: list[str]) -> list[dict[str, Any]]:
    results = []
    items = [Candidate(kind="molecule", payload={"smiles": s}) for s in smiles]
    tier = ChemSurrogateTier()
    tier.verify_batch(items[:2], {})  # warm: tblite load
    elapsed, verdicts = timed(lambda: tier.verify_batch(items, {}))
    results.append(summarise("chem.surrogate (ETKDG x8 + MMFF94 + GFN2-xTB)", verdicts, elapsed))

    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "train.csv"
        rows = [
            f"{s},{rdMolDescriptors.CalcCrippenDescriptors(Chem.MolFromSmiles(s))[0]}"
            for s in train_smiles
        ]
        csv.write_text("smiles,logp\n" + "\n".join(rows) + "\n")
        report = train_surrogate(csv, Path(tmp) / "m.joblib", n_estimators=100)
        model_tier = ChemSurrogateTier(ChemSettings(surrogate_model_path=report.path))
        config = {"forcefield": False, "xtb": False}
        model_tier.verify_batch(items[:2], config)
        elapsed, verdicts = timed(lambda: model_tier.verify_batch(items, config))
        summary = summarise("chem.surrogate (learned model only, RF x100)", verdicts, elapsed)
        summary["model_holdout"] = report.metrics
        results.append(summary)
    return results


def bench_dft(smiles: list[str], basis: str) -> dict[str, Any]:
    tier = ChemDftTier(get_settings().chem)  # the VERIFIER_CHEM__* limits, as a worker's
    items = [Candidate(kind="molecule", payload={"smiles": s}) for s in smiles]
    elapsed, verdicts = timed(lambda: tier.verify_batch(items, {"basis": basis}))
    return summarise(f"chem.dft (B3LYP/{basis})", verdicts, elapsed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=300, help="molecules for chem.fast")
    parser.add_argument("--n-sim", type=int, default=150, help="molecules for chem.surrogate")
    parser.add_argument("--n-dft", type=int, default=2, help="molecules for chem.dft (0: skip)")
    parser.add_argument("--dft-max-heavy", type=int, default=5, help="heavy-atom cap for DFT")
    parser.add_argument("--dft-basis", default="def2-SVP")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of chem.fast")
    parser.add_argument("--batch", type=int, default=64, help="chem.fast items per call")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    results.append(bench_fast(nci_smiles(args.n), args.repeats, args.batch))
    if args.n_sim > 0:
        results.extend(bench_surrogate(nci_smiles(args.n_sim), nci_smiles(300, skip=3000)))
    if args.n_dft > 0:
        dft_smiles = nci_smiles(args.n_dft, max_heavy=args.dft_max_heavy)
        results.append(bench_dft(dft_smiles, args.dft_basis))

    print(f"{'tier':48} {'n':>5} {'median ms':>10} {'cpu ms':>9} {'p90 ms':>9} {'items/s':>9}")
    for r in results:
        print(
            f"{r['tier']:48} {r['molecules']:>5} {r['median_wall_ms']:>10.2f} "
            f"{r['median_cpu_ms']:>9.2f} {r['p90_wall_ms']:>9.2f} {r['throughput_per_s']:>9.1f}"
        )
    fast = results[0]
    print(
        f"\nchem.fast service throughput {fast['throughput_per_s']:.0f}/s vs bare RDKit loop "
        f"{fast['bare_rdkit_per_s']:.0f}/s: ratio {fast['throughput_ratio_vs_bare_rdkit']:.2f}"
    )
    for r in results:
        print(f"{r['tier']}: statuses {r['statuses']} reasons {r['reasons']}")
    print(f"total {time.perf_counter() - started:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
