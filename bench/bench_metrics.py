"""What metrics cost the fast tier: chem.fast throughput with metrics on and off, in one run.

In this process, on a fresh SQLite database (or --database-url), jobs of --batch molecules from
RDKit's bundled NCI set go through the service's own path for fast-tier work (jobs.service.submit
with the inline lane: store the job, climb the ladder, run chem.fast, store verdicts, cache,
cost ledger, rewards, commit). Rounds come in pairs, one with metrics on and one off, which
alternate in going first; both rounds of a pair send the same molecules (RDKit's time differs a
lot from one molecule to the next), and the verdict cache and the process's cache-key memo are
emptied between them, so that neither round has a cache hit. With metrics on, every hook fires
(verdicts, tier durations, cache misses, gate decisions, cost, rewards) into prometheus-client's
multiprocess files, and one /metrics render per round adds them up as a scrape would.

    .venv/bin/python bench/bench_metrics.py [--rounds 10] [--jobs 8] [--batch 32] [--json m.json]

Prints items/s for each setting and the cost: one minus the median of the pairs' on/off ratios
(target: metrics cost at most 2%).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="pairs of rounds (on and off)")
    parser.add_argument("--jobs", type=int, default=8, help="jobs per round")
    parser.add_argument("--batch", type=int, default=32, help="molecules per job")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    os.environ["VERIFIER_DATA_DIR"] = str(tmp)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["VERIFIER_CACHE_KEY_MEMO"] = "0"  # a pair's second round derives keys anew too
    if args.database_url:
        os.environ["VERIFIER_DATABASE__URL"] = args.database_url
    subprocess.run(
        [sys.executable, "-m", "verifier_service", "migrate"],
        check=True, cwd=REPO, capture_output=True, env=os.environ,
    )  # fmt: skip

    from prometheus_client import generate_latest
    from rdkit import RDConfig
    from sqlalchemy import delete

    from tiers.registry import get_tier
    from verifier_service.core.db import transaction
    from verifier_service.core.gc_tuning import tune_gc
    from verifier_service.jobs.schemas import RewardRequest
    from verifier_service.jobs.service import submit
    from verifier_service.ladder.models import VerdictCacheEntry
    from verifier_service.metrics import registry
    from verifier_service.settings import MetricsSettings, get_settings
    from verifier_service.wiring import configure_tiers

    settings = get_settings()
    configure_tiers(settings)
    off = settings.model_copy(update={"metrics": MetricsSettings(enabled=False)})
    per_round = args.jobs * args.batch
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    smiles = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    need = per_round * (args.rounds + 1)
    if need > len(smiles):
        raise SystemExit(f"{need} molecules needed; the NCI set has {len(smiles)}")

    def fast(tier: str) -> bool:
        return get_tier(tier).queue == "tier.fast"

    def one_round(molecules: list[str]) -> float:
        t0 = time.perf_counter()
        for start in range(0, len(molecules), args.batch):
            chunk = molecules[start : start + args.batch]
            request = RewardRequest.model_validate(
                {"items": [{"kind": "molecule", "payload": {"smiles": s}} for s in chunk]}
            )
            with transaction() as session:
                submit(session, request, principal="bench", idempotency_key=None, runs_here=fast)
        if registry.enabled():  # a scrape per round (the broker's gauges aside: no broker here)
            generate_latest(registry.collect_registry(settings.metrics_dir))
        return len(molecules) / (time.perf_counter() - t0)

    def forget_verdicts() -> None:
        with transaction() as session:
            session.execute(delete(VerdictCacheEntry))

    registry.setup(settings)
    one_round(smiles[:per_round])  # warm-up: imports, RDKit, SQLite pages
    tune_gc(settings.gc_young_threshold)  # as the API and workers run (else its pauses add noise)
    rates: dict[bool, list[float]] = {True: [], False: []}
    for pair in range(args.rounds):
        molecules = smiles[per_round * (pair + 1) : per_round * (pair + 2)]
        for on in (True, False) if pair % 2 == 0 else (False, True):
            forget_verdicts()
            registry.setup(settings if on else off)
            rates[on].append(one_round(molecules))
    registry.setup(settings)

    on_rate, off_rate = statistics.median(rates[True]), statistics.median(rates[False])
    ratios = [on / off for on, off in zip(rates[True], rates[False], strict=True)]
    ratio = statistics.median(ratios)
    print(f"database: {settings.database_url.split('://')[0]}; {args.rounds} pairs of rounds "
          f"of {per_round} molecules ({args.jobs} jobs x {args.batch})")  # fmt: skip
    print(f"metrics off: {off_rate:8.1f} items/s (median; rounds {_fmt(rates[False])})")
    print(f"metrics on:  {on_rate:8.1f} items/s (median; rounds {_fmt(rates[True])})")
    print(f"on/off ratio of each pair: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(f"median on/off ratio: {ratio:.4f} (cost {100 * (1 - ratio):+.2f}%)")
    per_item = hooks_us_per_item()
    print(
        f"the hooks alone: {per_item:.1f} us per item = {100 * per_item * 1e-6 * off_rate:.2f}% "
        f"of an item's {1e6 / off_rate:.0f} us at the off rate (less noisy than the ratio on a "
        "shared machine)"
    )
    if args.json:
        figures = {
            "database": settings.database_url.split("://")[0],
            "pairs_of_rounds": args.rounds,
            "molecules_per_round": per_round,
            "metrics_off_items_per_s": round(off_rate, 1),
            "metrics_on_items_per_s": round(on_rate, 1),
            "rounds_off_items_per_s": [round(v, 1) for v in rates[False]],
            "rounds_on_items_per_s": [round(v, 1) for v in rates[True]],
            "pair_on_off_ratios": [round(r, 4) for r in ratios],
            "on_off_ratio": round(ratio, 4),
            "cost_pct": round(100 * (1 - ratio), 2),
            "hooks_us_per_item": round(per_item, 1),
            "item_us_at_off_rate": round(1e6 / off_rate),
            "hooks_pct_of_item": round(100 * per_item * 1e-6 * off_rate, 2),
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def hooks_us_per_item(n: int = 20_000) -> float:
    """Microseconds of metric work one fast-tier item causes: the ladder's calls (gate
    decision, cache lookup, verdict, reward) and their counting at commit."""
    from sqlalchemy.orm import Session

    from tiers.base import Verdict, VerdictStatus
    from verifier_service.ladder.states import Decision
    from verifier_service.metrics import record

    class Step:
        tier = "chem.fast"

    verdict = Verdict(status=VerdictStatus.passed, score=0.5, tier="chem.fast", tier_version="1")
    session = Session()
    t0 = time.perf_counter()
    for _ in range(n):
        record.gate_decision(session, "default", 0, Step, Decision.climb)
        record.cache_lookups(session, [("chem.fast", False)])
        record.verdict(session, verdict)
        record.reward(session, "default", "scored")
        record._count(session)  # what the after_commit hook does
    return (time.perf_counter() - t0) / n * 1e6


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


if __name__ == "__main__":
    main()
