"""Benchmark of the judge tiers' call discipline: throughput of `judge.llm` against an endpoint
of fixed latency, one item at a time against batched with many requests in flight, and the
same endpoint called directly at that concurrency (the best the endpoint allows).

The endpoint is the FAULT-INJECTION STUB of the OpenAI protocol (tests/tiers/judge/
judge_stub.py) run as its own process, every answer after `--latency` seconds: it measures the
tier's concurrency and overhead, not any model (a real model server's latency and its own
batching decide real figures). One run, one machine:

1. one at a time: `verify_batch([item])` for each of `--n` distinct items, one after another
   (a reward function that blocks on each call);
2. batched: `verify_batch` over batches of `--batch` items, the endpoint's `max_in_flight`
   `--in-flight`;
3. direct: the same requests with httpx's async client, `--in-flight` at once, no tier.
2 and 3 run `--repeat` times, alternating; the best run of each counts (a shared machine).

Figures: items/s of each, `batched_over_one` (the ratio the issue asks for), `tier_over_direct`
(the tier's throughput as a share of the bare client's), and the tier's CPU per judged item.

    .venv/bin/python bench/bench_judge.py                       # short form, ~15 s
    .venv/bin/python bench/bench_judge.py --n 2000 --batch 256 --in-flight 128 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from harness import direct_calls, judge_stub

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tiers.base import Candidate  # noqa: E402
from tiers.judge.client import reset_state  # noqa: E402
from tiers.judge.llm import JudgeLlmTier  # noqa: E402
from tiers.judge.settings import JudgeEndpoint, JudgeSettings  # noqa: E402

CONFIG = {
    "endpoint": "bench",
    "rubric": {"criteria": "Is it right?", "scale": {"min": 0, "max": 10}},
}
REPLY = '{"score": 7, "confidence": 0.9, "reasoning": "mostly right"}'


def items(n: int, tag: str) -> list[Candidate]:
    return [Candidate(kind="text", payload={"text": f"answer {tag} {i}"}) for i in range(n)]


def tier_for(url: str, in_flight: int) -> JudgeLlmTier:
    endpoint = JudgeEndpoint(url=url, model="stub", max_in_flight=in_flight)
    return JudgeLlmTier(JudgeSettings(endpoints={"bench": endpoint}))


def one_at_a_time(url: str, n: int) -> dict[str, float]:
    tier = tier_for(url, 1)
    batch = items(n, "one")
    cpu0, started = time.process_time(), time.perf_counter()
    verdicts = [tier.verify_batch([item], CONFIG)[0] for item in batch]
    return _figures(verdicts, n, started, cpu0)


def batched(url: str, n: int, size: int, in_flight: int) -> dict[str, float]:
    tier = tier_for(url, in_flight)
    batch = items(n, "batched")
    cpu0, started = time.process_time(), time.perf_counter()
    verdicts = []
    for start in range(0, n, size):
        verdicts.extend(tier.verify_batch(batch[start : start + size], CONFIG))
    return _figures(verdicts, n, started, cpu0)


def _figures(verdicts: list[Any], n: int, started: float, cpu0: float) -> dict[str, float]:
    wall = time.perf_counter() - started
    bad = [v for v in verdicts if v.status != "passed"]
    if bad:
        raise SystemExit(f"{len(bad)} of {n} items not scored: {bad[0].feedback}")
    return {
        "items_per_s": n / wall,
        "wall_s": wall,
        "cpu_ms_per_item": 1000 * (time.process_time() - cpu0) / n,
    }


def direct(url: str, n: int, in_flight: int) -> dict[str, float]:
    """The same requests from a bare async client, `in_flight` at once."""
    cpu0 = time.process_time()
    wall = direct_calls(url, n, in_flight)
    return {
        "items_per_s": n / wall,
        "wall_s": wall,
        "cpu_ms_per_item": 1000 * (time.process_time() - cpu0) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=256, help="items judged batched and directly")
    parser.add_argument("--n-one", type=int, default=40, help="items judged one at a time")
    parser.add_argument("--latency", type=float, default=0.05, help="the endpoint's seconds")
    parser.add_argument("--batch", type=int, default=64, help="items per verify_batch")
    parser.add_argument("--in-flight", type=int, default=64, help="endpoint max_in_flight")
    parser.add_argument(
        "--repeat", type=int, default=3, help="batched and direct runs, alternating; the best"
    )
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    with judge_stub(REPLY, args.latency) as base:
        url = f"{base}/v1"
        reset_state()
        one = one_at_a_time(url, args.n_one)
        runs = [
            (batched(url, args.n, args.batch, args.in_flight), direct(url, args.n, args.in_flight))
            for _ in range(args.repeat)
        ]  # the machine may be shared: the best of each
        many = max((r[0] for r in runs), key=lambda f: f["items_per_s"])
        bare = max((r[1] for r in runs), key=lambda f: f["items_per_s"])
    figures = {
        "latency_s": args.latency,
        "batch": args.batch,
        "in_flight": args.in_flight,
        "one_at_a_time": one,
        "batched": many,
        "direct": bare,
        "batched_over_one": many["items_per_s"] / one["items_per_s"],
        "tier_over_direct": many["items_per_s"] / bare["items_per_s"],
    }
    print(
        f"endpoint latency {args.latency * 1000:.0f} ms\n"
        f"one at a time     {one['items_per_s']:8.1f} items/s  ({args.n_one} items)\n"
        f"batched           {many['items_per_s']:8.1f} items/s  ({args.n} items, batches of "
        f"{args.batch}, {args.in_flight} in flight)  cpu {many['cpu_ms_per_item']:.2f} ms/item\n"
        f"direct (httpx)    {bare['items_per_s']:8.1f} items/s  ({args.in_flight} in flight)\n"
        f"batched / one at a time: {figures['batched_over_one']:.1f}x; "
        f"tier / direct: {figures['tier_over_direct']:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
