"""Cascade benchmark: expensive calls the ladder makes, and how much of the true top it keeps.

On N molecules from RDKit's bundled NCI set, chem.fast runs on all of them, and the expensive
tier (chem.surrogate: ETKDG conformers + MMFF94 strain + GFN2-xTB) is REALLY computed on every
valid molecule too, as ground truth. The full-fidelity reward is the policy's composition
(weighted geometric mean of QED and the surrogate's strain score, validity hard gate). The cascade
is the same policy with a gate on the expensive step: within GRPO-style groups of 16, only the top
k by chem.fast QED climb, plus a 2% audit sample. The gate decisions and the reward use the
project's own decide_step and compose_reward, as the ladder engine does.

    .venv/bin/python bench/bench_cascade.py [--n 2000] [--group 16] [--top-k 3] [--procs 2]

Prints: expensive calls of the cascade as a fraction of running the expensive tier on every item
(target <= 20%), the fraction of the true top-10% items the cascade scored at full fidelity
(target >= 90%). The cost of a job whose items are 50% duplicates is measured through the live
service by tests/ladder/test_ladder_live.py::test_half_duplicate_job_costs_half_and_reports_it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from multiprocessing import Pool
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from rdkit import RDConfig

from tiers.base import Candidate, Verdict
from tiers.chem.fast import ChemFastTier
from tiers.chem.surrogate import ChemSurrogateTier
from verifier_service.policies.gates import GateContext, audit_draw, decide_step
from verifier_service.policies.loader import parse_policy
from verifier_service.scoring.compose import compose_reward

SURROGATE_CONFIG = {"n_conformers": 4, "xtb": True, "score": "strain"}


def policy_text(top_k: int, audit: float) -> str:
    return f"""
name: cascade-bench
ladders:
  molecule:
    - tier: chem.fast
    - tier: chem.surrogate
      config: {{n_conformers: 4, xtb: true, score: strain}}
      gate: "verdicts['chem.fast'].status == 'passed'"
      group: {{top_k: {top_k}, by: "verdicts['chem.fast'].components.qed"}}
      audit_fraction: {audit}
reward:
  molecule:
    aggregator: weighted_geometric_mean
    components:
      - {{name: qed, tier: chem.fast, component: qed, weight: 2}}
      - {{name: strain, tier: chem.surrogate, component: score, weight: 1}}
    hard_gates:
      - {{when: "verdicts['chem.fast'].status == 'passed'", reason: invalid molecule}}
"""


def nci(n: int) -> list[str]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    smiles = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    return list(dict.fromkeys(smiles))[:n]


def _surrogate(chunk: list[str]) -> list[Verdict]:
    tier = ChemSurrogateTier()
    items = [Candidate(kind="molecule", payload={"smiles": s}) for s in chunk]
    return tier.verify_batch(items, SURROGATE_CONFIG)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument(
        "--audit", type=float, default=0.02, help="audit fraction of the expensive step"
    )
    parser.add_argument(
        "--truth-cache",
        type=Path,
        default=None,
        help="JSON file of the expensive tier's verdicts: read if present, else written "
        "(lets a sweep of cascade settings reuse one ground-truth computation)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    doc = parse_policy(policy_text(args.top_k, args.audit), fmt="yaml")
    smiles = nci(args.n)

    t0 = time.perf_counter()
    fast = ChemFastTier().verify_batch(
        [Candidate(kind="molecule", payload={"smiles": s}) for s in smiles], {}
    )
    fast_s = time.perf_counter() - t0
    valid = [i for i, v in enumerate(fast) if v.status == "passed"]

    t0 = time.perf_counter()
    cache = args.truth_cache
    if cache is not None and cache.exists():
        stored = json.loads(cache.read_text())
        expensive_list = [Verdict.model_validate(stored[smiles[i]]) for i in valid]
    else:
        chunks = [[smiles[i] for i in valid[k : k + 20]] for k in range(0, len(valid), 20)]
        with Pool(args.procs) as pool:
            expensive_list = [v for chunk in pool.map(_surrogate, chunks) for v in chunk]
        if cache is not None:
            dump = {
                smiles[i]: v.model_dump(mode="json")
                for i, v in zip(valid, expensive_list, strict=True)
            }
            cache.write_text(json.dumps(dump))
    expensive = dict(zip(valid, expensive_list, strict=True))
    expensive_s = time.perf_counter() - t0

    spec = doc.reward_for("molecule")
    order = ["chem.fast", "chem.surrogate"]

    def reward(i: int, with_expensive: bool) -> float:
        verdicts = {"chem.fast": fast[i]}
        if with_expensive and i in expensive:
            verdicts["chem.surrogate"] = expensive[i]
        ctx = GateContext.build(kind="molecule", verdicts=verdicts)
        value = compose_reward(spec, verdicts, ctx, order=order).value
        return -1.0 if value is None else value

    truth = {i: reward(i, True) for i in range(len(smiles))}
    ranked = sorted(truth, key=lambda i: -truth[i])
    top = set(ranked[: max(1, len(smiles) // 10)])

    order_ids = list(range(len(smiles)))
    random.Random(0).shuffle(order_ids)  # GRPO groups: random sets of `group` items
    step = doc.ladder_for("molecule")[1]
    assert step.group is not None
    climbed: set[int] = set()
    for g in range(0, len(order_ids), args.group):
        members = order_ids[g : g + args.group]
        contexts = [
            GateContext.build(
                kind="molecule",
                verdicts={"chem.fast": fast[i]},
                audit=audit_draw(smiles[i], 1),
            )
            for i in members
        ]
        decisions = decide_step(
            contexts, gate=step.gate, audit_fraction=step.audit_fraction,
            group_by=step.group.by, top_k=step.group.top_k,
        )  # fmt: skip
        climbed |= {i for i, d in zip(members, decisions, strict=True) if d.climb}
    calls = len(climbed & set(valid))
    every = len(valid)
    recall = len(top & climbed) / len(top)

    reached = len(top & climbed)
    print(f"molecules                   : {len(smiles)} ({len(valid)} valid)")
    print(f"chem.fast on all            : {fast_s:.1f} s")
    print(f"chem.surrogate on all valid : {expensive_s:.1f} s (ground truth, {args.procs} procs)")
    print(
        f"cascade                     : groups of {args.group}, top {args.top_k} by QED, 2% audit"
    )
    print(f"expensive calls / valid     : {calls} / {every} = {calls / every:.1%} (target <= 20%)")
    n = len(smiles)
    print(f"expensive calls / all items : {calls} / {n} = {calls / n:.1%} (target <= 20%)")
    print(f"true top-10% at full fid.   : {reached} / {len(top)} = {recall:.1%} (target >= 90%)")
    if args.json:
        figures = {
            "molecules": n,
            "valid": every,
            "group": args.group,
            "top_k": args.top_k,
            "audit": args.audit,
            "chem_fast_s": round(fast_s, 2),
            "expensive_s": round(expensive_s, 2),
            "expensive_calls": calls,
            "expensive_calls_per_valid": round(calls / every, 4),
            "expensive_calls_per_item": round(calls / n, 4),
            "top10_recall": round(recall, 4),
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
