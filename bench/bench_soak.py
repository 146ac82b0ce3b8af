"""Soak: GRPO-shaped load for a fixed time, and how each service process's memory moves.

Trainers send batches (the mix of bench_load.py: molecules, a share of them repeated, and JSON
tool calls) back to back for `--duration` seconds. Every `--every` seconds the RSS of each
process of the service (API, worker processes, dev's children) is sampled. The report gives,
per process: RSS after the warm-up (the first `--warmup` share of the run), at the end, the
peak, the growth from warm-up to end (MB and MB per minute), and the second half's growth per
minute and per 100k items answered. Pool/cache fill-up happens in the warm-up; what grows after
it at the same pace per item, under steady load, is a leak. A heap reaching its high-water mark
grows more slowly the more work it has done (`--samples FILE` keeps the curve to see which).

    .venv/bin/python bench/bench_soak.py                       # 10 minutes, embedded default
    .venv/bin/python bench/bench_soak.py --duration 30         # the short form
    .venv/bin/python bench/bench_soak.py --layout postgres --json soak.json
    .venv/bin/python bench/bench_soak.py --env MALLOC_ARENA_MAX=2   # glibc's malloc arenas
    .venv/bin/python bench/bench_soak.py --samples rss.csv     # every sample, for a plot
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import Tally, make_batch, nci, trainer, tree_rss
from harness import embedded, postgres


class RssSamples:
    """RSS of every process under the roots, sampled every `every` seconds, by process, with
    the items answered so far (`done()`) at each sample."""

    def __init__(self, roots: list[Any], every: float, done: Callable[[], int]) -> None:
        self.roots = [psutil.Process(r.pid) for r in roots]
        self.every = every
        self.done = done
        self.samples: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.items: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = time.monotonic()

    def _label(self, process: psutil.Process) -> str:
        try:
            cmd = " ".join(process.cmdline())
        except psutil.Error:
            return f"pid {process.pid}"
        for word in ("celery", "worker", "uvicorn", "api", "dev", "redis"):
            if word in cmd:
                return f"{word} (pid {process.pid})"
        return f"pid {process.pid}"

    def _run(self) -> None:
        while True:
            now = time.monotonic() - self.started
            self.items.append((now, self.done()))
            for process, rss in tree_rss(self.roots):
                self.samples[self._label(process)].append((now, rss))
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> RssSamples:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def soak(url: str, headers: dict[str, str], args: argparse.Namespace, tally: Tally) -> None:
    rng = random.Random(args.seed)
    molecules = nci()
    rng.shuffle(molecules)
    repeats = molecules[:100]
    stop_at = time.monotonic() + args.duration

    def recycled() -> Iterator[str]:
        pool = molecules[100:]
        while True:
            yield from reversed(pool)
            rng.shuffle(pool)  # the pool ran out: the same molecules again

    fresh = recycled()

    async def one(client: httpx.AsyncClient) -> None:
        while time.monotonic() < stop_at:
            size = rng.randint(args.min_batch, args.max_batch)
            await trainer(client, [make_batch(rng, fresh, repeats, size, tally)], tally)

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        await asyncio.gather(*(one(client) for _ in range(args.trainers)))


def items_between(items: list[tuple[float, int]], start: float, end: float) -> int:
    """Items answered between two sample times (the counts sampled nearest to each)."""
    if not items:
        return 0

    def at(when: float) -> int:
        return min(items, key=lambda point: abs(point[0] - when))[1]

    return at(end) - at(start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--layout", choices=["embedded", "postgres"], default="embedded")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--warmup", type=float, default=0.2, help="share of the run")
    parser.add_argument("--every", type=float, default=2.0, help="RSS sample period, seconds")
    parser.add_argument("--trainers", type=int, default=4)
    parser.add_argument("--min-batch", type=int, default=16)
    parser.add_argument("--max-batch", type=int, default=256)
    parser.add_argument("--worker-concurrency", type=int, default=2, help="postgres layout")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--samples", type=Path,
        help="also write every RSS sample here (CSV: process, seconds, MB), to see whether a "
        "process's growth levels off",
    )  # fmt: skip
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable of the service's processes (repeatable), e.g. "
        "MALLOC_ARENA_MAX=2 or VERIFIER_API__INLINE_MAX_ITEMS=0",
    )  # fmt: skip
    args = parser.parse_args()
    if any("=" not in item for item in args.env):
        parser.error("--env takes NAME=VALUE")
    environment = dict(item.split("=", 1) for item in args.env)

    tally = Tally()
    load_before = os.getloadavg()
    layout = (
        embedded(environment)
        if args.layout == "embedded"
        else postgres(args.worker_concurrency, environment)
    )
    with layout as service, RssSamples(service.roots, args.every, lambda: tally.items) as rss:
        started = time.perf_counter()
        asyncio.run(soak(service.url, service.headers, args, tally))
        elapsed = time.perf_counter() - started
    load = tuple(round((a + b) / 2, 2) for a, b in zip(load_before, os.getloadavg(), strict=True))
    warm_at = args.warmup * args.duration
    processes: dict[str, dict[str, float]] = {}
    for label, points in sorted(rss.samples.items()):
        # A process that started during the run (a worker's pool process) warms up for as
        # long from its own start: its imports are not growth.
        after = [p for p in points if p[0] >= max(warm_at, points[0][0] + warm_at)]
        if len(after) < 2:
            continue
        (t0, first), (t1, last) = after[0], after[-1]
        growth = (last - first) / 2**20
        # The second half alone: a cache filling to its bound grows early and then stops; a
        # leak grows at the same pace in both halves.
        middle = t0 + (t1 - t0) / 2
        tm, at_middle = next(p for p in after if p[0] >= middle)
        late = (last - at_middle) / 2**20
        # Growth per item answered as well: a heap reaching its high-water mark grows with the
        # work done, so a loaded machine's slower run shows less growth per minute.
        items = items_between(rss.items, tm, t1)
        processes[label] = {
            "rss_after_warmup_mb": round(first / 2**20, 1),
            "rss_end_mb": round(last / 2**20, 1),
            "peak_mb": round(max(r for _, r in points) / 2**20, 1),
            "growth_mb": round(growth, 1),
            "growth_mb_per_min": round(growth / max(t1 - t0, 1e-9) * 60, 2),
            "second_half_mb_per_min": round(late / max(t1 - tm, 1e-9) * 60, 2),
            "second_half_mb_per_100k_items": round(late / max(items, 1) * 100_000, 2),
        }
    figures: dict[str, Any] = {
        "layout": args.layout,
        "environment": environment,
        "duration_s": round(elapsed, 1),
        "load_average": load,
        "items": tally.items,
        "items_per_s": round(tally.items / elapsed, 1),
        "errors": len(tally.errors),
        "processes": processes,
    }
    print(f"layout {args.layout}, {elapsed:.0f} s, {args.trainers} trainers, load {load}")
    if environment:
        print("environment: " + " ".join(f"{k}={v}" for k, v in environment.items()))
    print(f"items {tally.items} ({figures['items_per_s']}/s), errors {len(tally.errors)}")
    print(
        f"{'process':24}{'after warm-up':>15}{'end':>10}{'peak':>10}{'growth':>10}{'MB/min':>10}"
        f"{'2nd half MB/min':>17}{'MB/100k items':>15}"
    )
    for label, row in processes.items():
        print(
            f"{label:24}{row['rss_after_warmup_mb']:>15}{row['rss_end_mb']:>10}"
            f"{row['peak_mb']:>10}{row['growth_mb']:>10}{row['growth_mb_per_min']:>10}"
            f"{row['second_half_mb_per_min']:>17}{row['second_half_mb_per_100k_items']:>15}"
        )
    for line in tally.errors[:5]:
        print(f"  {line}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.samples:
        lines = ["process,seconds,rss_mb"] + [
            f"{label},{t:.1f},{rss / 2**20:.1f}"
            for label, points in sorted(rss.samples.items())
            for t, rss in points
        ]
        args.samples.write_text("\n".join(lines) + "\n")
    if tally.errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
