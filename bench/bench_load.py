"""GRPO-shaped load through the whole service, next to the bare tier code in the same run.

Concurrent trainers each send batches of 16-256 items (molecules and JSON tool calls; a share of
the molecules repeats across batches, as a policy resamples its favourites), wait for every
reward (wait_s, then polling), and the run reports:

- items per second through the service, and as a ratio to the bare chem.fast tier on the same
  molecules in this process on one core (what the service leaves on the table), timed just
  before the service starts and again after it stops (the ratio takes the two's mean time per
  item: the machine's speed drifts between runs minutes apart, so one side alone tilts it);
- request latency p50 / p95 / p99 (POST until every reward of the batch is final);
- errors (non-2xx answers, rewards that are infra_error), which must be 0;
- peak RSS per process of the service (API, each worker process).

Two layouts: `embedded` (`verifier-service dev`: SQLite + embedded Redis) and `postgres` (the API
and a worker as compose runs them, on a PostgreSQL database and a redis-server of this run's
own). Short form (CI-sized): the defaults. Longer: `--batches 20 --trainers 16`.

    .venv/bin/python bench/bench_load.py --layout embedded [--trainers 4] [--batches 4]
    .venv/bin/python bench/bench_load.py --layout postgres --json load.json
    .venv/bin/python bench/bench_load.py --set VERIFIER_WORKER__TASK_ITEMS=128   # a setting

`--baseline REF --rounds N` compares this tree with git REF's on the layout: both services run at
once (each its own database and Redis), and each round sends the same new batches to one, then
to the other, alternating which goes first. The machine's speed can move by a third between
runs a few minutes apart (the bare tier's too), which hides a change of a few percent in the
ratio to the bare tier; the ratio of the two services' items/s within a round does not depend
on it. It prints each round's after/before and their median. On the postgres layout the two
services share one PostgreSQL server (a database each), whose background work after one
service's round (autovacuum, checkpoints) can land in the other's: its rounds spread more
(0.73-1.19x on 2026-11-27 against 1.00-1.15x embedded); use more rounds there.

    .venv/bin/python bench/bench_load.py --baseline main --layout embedded --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from harness import REPO, Layout, embedded, postgres
from rdkit import RDConfig

TOOL_SCHEMA = {"type": "object", "required": ["tool", "args"]}


def nci() -> list[str]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


def labelled(smiles: list[str]) -> Iterator[str]:
    """`smiles`, then, for longer runs than they last, each again with one atom carbon-13
    labelled (the first atom, then the second, ...): a new molecule to the verdict cache, the
    same work to RDKit. Those RDKit cannot parse come once."""
    yield from smiles
    from rdkit import Chem

    seen = set(smiles)
    for position in itertools.count():
        for text in smiles:
            mol = Chem.MolFromSmiles(text)
            if mol is None or position >= mol.GetNumAtoms():
                continue
            mol.GetAtomWithIdx(position).SetIsotope(13)
            variant = Chem.MolToSmiles(mol)
            if variant not in seen:
                seen.add(variant)
                yield variant


def tree_rss(roots: list[psutil.Process]) -> Iterator[tuple[psutil.Process, int]]:
    """Each process under the roots (the roots too) that is still there, with its RSS now."""
    for root in roots:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for process in tree:
            try:
                yield process, process.memory_info().rss
            except psutil.Error:
                continue


class PeakRss:
    """Samples the RSS of every process under the roots; keeps the peak per process."""

    def __init__(self, roots: list[subprocess.Popen[bytes]]) -> None:
        self.roots = [psutil.Process(r.pid) for r in roots]
        self.peaks: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _label(self, process: psutil.Process) -> str:
        try:
            cmd = process.cmdline()
        except psutil.Error:
            return f"pid {process.pid}"
        if "redis-server" in " ".join(cmd[:1]):
            return "redis"
        for word in ("api", "worker", "dev"):
            if word in cmd:
                return f"{word} (pid {process.pid})"
        return f"{Path(cmd[0]).name if cmd else '?'} (pid {process.pid})"

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for process, rss in tree_rss(self.roots):
                label = self._label(process)
                self.peaks[label] = max(self.peaks[label], rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Tally:
    items: int = 0
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    molecules: set[str] = field(default_factory=set)


def make_batch(
    rng: random.Random, pool: Iterator[str], repeats: list[str], size: int, tally: Tally
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for _ in range(size):
        if rng.random() < 0.2:  # a tool call
            call = {"tool": rng.choice(["search", "open", "click"]), "args": {"q": rng.random()}}
            if rng.random() < 0.3:
                del call["args"]  # a wrong one: scored low, not an error
            items.append({"kind": "json", "payload": call, "reference": {"schema": TOOL_SCHEMA}})
            continue
        smiles = rng.choice(repeats) if rng.random() < 0.2 else next(pool)
        tally.molecules.add(smiles)
        items.append({"kind": "molecule", "payload": {"smiles": smiles}})
    return items


async def trainer(
    client: httpx.AsyncClient, batches: list[list[dict[str, Any]]], tally: Tally
) -> None:
    for items in batches:
        started = time.perf_counter()
        response = await client.post("/v1/rewards", json={"items": items, "wait_s": 60})
        if response.status_code not in (200, 202):
            tally.errors.append(f"{response.status_code}: {response.text[:200]}")
            continue
        job = response.json()
        while job["status"] != "completed":
            await asyncio.sleep(0.2)
            job = (await client.get(f"/v1/jobs/{job['id']}")).json()
        tally.latencies_s.append(time.perf_counter() - started)
        tally.items += len(items)
        tally.errors.extend(
            f"item {i['index']}: {i['reward']['reason']}"
            for i in job["items"]
            if i["reward"]["status"] == "infra_error"
        )


def bare_items_per_s(smiles: list[str]) -> float:
    """chem.fast's own throughput on these molecules, in this process (one core)."""
    from tiers.base import Candidate
    from tiers.registry import get_tier

    tier = get_tier("chem.fast")
    candidates = [Candidate(kind="molecule", payload={"smiles": s}) for s in smiles]
    tier.verify_batch(candidates[:20], {})  # warm-up
    started = time.perf_counter()
    for start in range(0, len(candidates), 64):
        tier.verify_batch(candidates[start : start + 64], {})
    return len(candidates) / (time.perf_counter() - started)


def percentile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


Plans = list[list[list[dict[str, Any]]]]  # per trainer, its batches' items


def planner(args: argparse.Namespace) -> Callable[[Tally], Plans]:
    """Makes each trainer's batches from one seeded stream of molecules (new ones, and a share
    of 100 repeated), each call the next `--batches` per trainer, noted in the tally."""
    rng = random.Random(args.seed)
    molecules = nci()
    rng.shuffle(molecules)
    repeats, pool = molecules[:100], labelled(molecules[100:])

    def plans(tally: Tally) -> Plans:
        return [
            [
                make_batch(rng, pool, repeats, rng.randint(args.min_batch, args.max_batch), tally)
                for _ in range(args.batches)
            ]
            for _ in range(args.trainers)
        ]

    return plans


async def _drive(service: Layout, plans: Plans, tally: Tally) -> float:
    """Every trainer's plan against one service at once; the seconds it took."""
    async with httpx.AsyncClient(
        base_url=service.url, headers=service.headers, timeout=120
    ) as client:
        started = time.perf_counter()
        await asyncio.gather(*(trainer(client, plan, tally) for plan in plans))
        return time.perf_counter() - started


def paired(args: argparse.Namespace, settings: dict[str, str]) -> dict[str, Any]:
    """This tree against `args.baseline`'s, round after round on the same batches (the
    module's docstring); the figures, printed."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_throughput import exported

    new_plans = planner(args)
    this, before = "this tree", str(args.baseline)
    tallies = {this: Tally(), before: Tally()}
    rates: dict[str, list[float]] = {this: [], before: []}
    with contextlib.ExitStack() as stack:
        trees = {before: stack.enter_context(exported(args.baseline)), this: REPO}
        services = {
            label: stack.enter_context(
                embedded(settings, code=code)
                if args.layout == "embedded"
                else postgres(args.worker_concurrency, settings, code=code)
            )
            for label, code in trees.items()
        }
        for round_ in range(args.rounds):
            plans = new_plans(Tally())
            n_items = sum(len(b) for plan in plans for b in plan)
            order = [before, this] if round_ % 2 == 0 else [this, before]
            for label in order:
                done = tallies[label].items
                elapsed = asyncio.run(_drive(services[label], plans, tallies[label]))
                rates[label].append((tallies[label].items - done) / elapsed)
            print(
                f"round {round_ + 1}: {n_items} items, {before} {rates[before][-1]:.1f} items/s, "
                f"this tree {rates[this][-1]:.1f} ({rates[this][-1] / rates[before][-1]:.3f}x)",
                flush=True,
            )
    ratios = [a / b for a, b in zip(rates[this], rates[before], strict=True)]
    errors = {label: len(t.errors) for label, t in tallies.items()}
    print(f"after/before items/s, median of {len(ratios)} rounds: {statistics.median(ratios):.3f}x")
    print(f"errors: {errors} (must be 0)")
    return {
        "layout": args.layout,
        "baseline": before,
        "trainers": args.trainers,
        "batches_per_round": args.batches * args.trainers,
        "items_per_s": {label: [round(r, 1) for r in xs] for label, xs in rates.items()},
        "after_over_before": [round(r, 3) for r in ratios],
        "after_over_before_median": round(statistics.median(ratios), 3),
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--layout", choices=["embedded", "postgres"], default="embedded")
    parser.add_argument("--trainers", type=int, default=4, help="concurrent trainers")
    parser.add_argument("--batches", type=int, default=4, help="batches per trainer")
    parser.add_argument("--min-batch", type=int, default=16)
    parser.add_argument("--max-batch", type=int, default=256)
    parser.add_argument("--worker-concurrency", type=int, default=2, help="postgres layout")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--set", action="append", default=[], metavar="VERIFIER_X=VALUE",
        help="a setting of the service under test (repeatable), e.g. "
        "VERIFIER_WORKER__TASK_ITEMS=128",
    )  # fmt: skip
    parser.add_argument("--baseline", help="git ref to compare with, round by round")
    parser.add_argument("--rounds", type=int, default=6, help="with --baseline")
    args = parser.parse_args()
    if any(not item.startswith("VERIFIER_") or "=" not in item for item in args.set):
        parser.error("--set takes VERIFIER_NAME=VALUE")
    if args.baseline:
        figures = paired(args, dict(item.split("=", 1) for item in args.set))
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        if any(figures["errors"].values()):
            raise SystemExit(1)
        return

    new_plans = planner(args)
    tally = Tally()
    plans = new_plans(tally)
    n_items = sum(len(b) for plan in plans for b in plan)
    settings = dict(item.split("=", 1) for item in args.set)
    layout = (
        embedded(settings)
        if args.layout == "embedded"
        else postgres(args.worker_concurrency, settings)
    )
    # The bare tier on the run's molecules just before the service starts and again after it
    # stops; the ratio's denominator is the two's mean time per item, so a drift in the
    # machine's speed during the run (a third, some minutes) tilts it less than one side would.
    molecules = sorted(tally.molecules)
    bare_before = bare_items_per_s(molecules)
    with layout as service, PeakRss(service.roots) as rss:
        elapsed = asyncio.run(_drive(service, plans, tally))
    bare_after = bare_items_per_s(molecules)
    bare = 2 / (1 / bare_before + 1 / bare_after)
    figures = {
        "layout": args.layout,
        "trainers": args.trainers,
        "batches": args.batches * args.trainers,
        "items": n_items,
        "items_done": tally.items,
        "elapsed_s": round(elapsed, 2),
        "items_per_s": round(tally.items / elapsed, 1),
        "bare_chem_fast_items_per_s_one_core": round(bare, 1),
        "bare_before_after_items_per_s": [round(bare_before, 1), round(bare_after, 1)],
        "ratio_to_bare": round(tally.items / elapsed / bare, 3),
        "latency_p50_s": round(statistics.median(tally.latencies_s), 3),
        "latency_p95_s": round(percentile(tally.latencies_s, 0.95), 3),
        "latency_p99_s": round(percentile(tally.latencies_s, 0.99), 3),
        "errors": len(tally.errors),
        "peak_rss_mb": {k: round(v / 2**20, 1) for k, v in sorted(rss.peaks.items())},
    }
    print(f"layout                       : {args.layout}, {os.cpu_count()} cores")
    print(f"trainers x batches           : {args.trainers} x {args.batches} ({n_items} items)")
    print(f"items/s through the service  : {figures['items_per_s']}")
    print(
        f"bare chem.fast, one core     : {figures['bare_chem_fast_items_per_s_one_core']} "
        f"(before the run {bare_before:.1f}, after it {bare_after:.1f})"
    )
    print(f"ratio service / bare         : {figures['ratio_to_bare']}x")
    print(
        f"request latency p50/p95/p99  : {figures['latency_p50_s']} / "
        f"{figures['latency_p95_s']} / {figures['latency_p99_s']} s"
    )
    print(f"errors                       : {len(tally.errors)} (must be 0)")
    for line in tally.errors[:5]:
        print(f"  {line}")
    for label, mb in figures["peak_rss_mb"].items():  # type: ignore[union-attr]
        print(f"peak RSS {label:<20}: {mb} MB")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if tally.errors or tally.items != n_items:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
