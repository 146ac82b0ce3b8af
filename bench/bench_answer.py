"""Benchmark of the `answer` tier: service throughput against the bare math-verify loop, and the
worst-case latency of a batch of pathological answers.

One run, one machine:

1. `--n` unique (answer, reference) pairs in MATH and GSM8K styles (fractions, radicals,
   polynomials, intervals, whole numbers; about a quarter wrong), seeded.
2. The bare library loop: math-verify's parse of both sides and verify, one process, one core,
   no bound on time (what a trainer's reward function does in-process), run before and after
   the service's turn; the faster of the two is the baseline (the machine may be shared).
3. The same pairs as `text` items under the shipped `math` policy through the live service
   (API + a Celery worker with --concurrency 2 on PostgreSQL and Redis), posted in batches of
   `--batch` by `--clients` concurrent clients: items/s from the first POST to the last result.
   Both must agree on every pair; disagreements are printed.
4. A batch of runaways (`10^{10^{10^{10}}}`, `99999999!`, ...) with ordinary answers mixed in,
   through the worker, and one runaway alone through the inline lane: wall time to the rewards.

5. `--tier-only`: no service; the `answer` tier in this process (its pool of math children)
   on the same pairs, items/s and how many were decided exactly without sympy (whole numbers
   and fractions of them on both sides).

    .venv/bin/python bench/bench_answer.py                  # ~2-3 minutes on 2 cores
    .venv/bin/python bench/bench_answer.py --n 2000 --json out.json
    .venv/bin/python bench/bench_answer.py --tier-only      # the tier alone, ~1 minute
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

RUNAWAYS = [
    "10^{10^{10^{10}}}",
    "99999999!",
    "2^{2^{2^{2^{2^{2}}}}}",
    "(" * 300 + "1" + ")" * 300,
    "9^{9^{9^{9}}}",
    "\\binom{10^{9}}{10^{8}}",
]


def pairs(n: int, seed: int) -> list[tuple[str, str, bool]]:
    """(answer, reference, expected equal), every answer text distinct."""
    rng = random.Random(seed)
    out: list[tuple[str, str, bool]] = []
    seen: set[tuple[str, str]] = set()
    while len(out) < n:
        right = rng.random() < 0.75
        style = rng.randrange(5)
        a, b, k = rng.randint(1, 97), rng.randint(2, 99), rng.randint(2, 9)
        if style == 0:  # MATH: an unreduced fraction against the reduced one
            answer, reference = f"\\frac{{{a * k}}}{{{b * k}}}", f"\\frac{{{a}}}{{{b}}}"
            if not right:
                answer = f"\\frac{{{a * k + 1}}}{{{b * k}}}"
        elif style == 1:  # MATH: a radical simplified
            answer, reference = f"{k}\\sqrt{{{b}}}", f"\\sqrt{{{k * k * b}}}"
            if not right:
                answer = f"{k + 1}\\sqrt{{{b}}}"
        elif style == 2:  # MATH: a factored polynomial
            answer, reference = f"x^2+{a + b}x+{a * b}", f"(x+{a})(x+{b})"
            if not right:
                answer = f"x^2+{a + b}x+{a * b + 1}"
        elif style == 3:  # MATH: an interval
            answer, reference = f"[{a}, {a + b})", f"[{a},{a + b})"
            if not right:
                answer = f"[{a}, {a + b}]"
        else:  # GSM8K: a whole number, with a thousands separator when large
            value = a * b * k * 13
            answer, reference = f"{value:,}", str(value if right else value + 1)
        if (answer, reference) not in seen:
            seen.add((answer, reference))
            out.append((answer, reference, right))
    return out


def bare_loop(items: list[tuple[str, str, bool]]) -> tuple[float, list[bool]]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    logging.disable(logging.WARNING)
    targets = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    results = []
    started = time.perf_counter()
    for answer, reference, _ in items:
        gold = parse(f"\\boxed{{{reference}}}", targets)
        pred = parse(f"\\boxed{{{answer}}}", targets)
        results.append(bool(verify(gold, pred)))
    return time.perf_counter() - started, results


def tier_only(items: list[tuple[str, str, bool]], integers_only: bool) -> dict[str, Any]:
    """The `answer` tier in this process on the pairs (math policy config): items/s, agreement
    with what the generator meant, and how many skipped sympy. `integers_only`: as the tier was
    before fractions of whole numbers were compared exactly (only whole numbers skip sympy)."""
    from fractions import Fraction

    from tiers.base import Candidate
    from tiers.text import answer as answer_tier

    rational = answer_tier._rational
    if integers_only:

        def whole(text: str) -> Fraction | None:
            value = answer_tier._integer(text.strip())
            return None if value is None else Fraction(value)

        answer_tier._rational = whole

    tier = answer_tier.AnswerTier()
    config = {"mode": "math", "extract": ["boxed", "answer_tag", "answer_is"]}
    candidates = [
        Candidate(
            kind="text",
            payload=_item(a, r)["payload"],
            reference={"answer": r},
        )
        for a, r, _ in items
    ]
    tier.verify_batch(candidates[:4], config)  # start the pool's children
    exact = sum(
        answer_tier._rational(a) is not None and answer_tier._rational(r) is not None
        for a, r, _ in items
    )
    started = time.perf_counter()
    verdicts = []
    for i in range(0, len(candidates), 50):
        verdicts.extend(tier.verify_batch(candidates[i : i + 50], config))
    wall = time.perf_counter() - started
    answer_tier._rational = rational
    wrong = sum(
        (v.components.get("correct") == 1.0) != e
        for v, (_, _, e) in zip(verdicts, items, strict=True)
    )
    return {
        "integers_only": integers_only,
        "pairs": len(items),
        "tier_items_per_s": round(len(items) / wall, 1),
        "decided_without_sympy": exact,
        "wrong_vs_expected": wrong,
    }


def _item(answer: str, reference: str) -> dict[str, Any]:
    text = f"Working it out step by step, the result is \\boxed{{{answer}}}."
    return {"kind": "text", "payload": {"text": text}, "reference": {"answer": reference}}


def _rewards(client: httpx.Client, items: list[dict[str, Any]], wait_s: float) -> list[Any]:
    body = {"policy": "math", "items": items, "wait_s": wait_s}
    response = client.post("/v1/rewards", json=body)
    response.raise_for_status()
    job = response.json()
    while job["status"] != "completed":
        time.sleep(0.2)
        job = client.get(f"/v1/jobs/{job['id']}").raise_for_status().json()
    return list(job["items"])


def through_service(
    client_of: Any, items: list[tuple[str, str, bool]], batch: int, clients: int
) -> tuple[float, list[bool], list[str]]:
    chunks = [items[i : i + batch] for i in range(0, len(items), batch)]

    def send(chunk: list[tuple[str, str, bool]]) -> list[Any]:
        with client_of() as client:
            return _rewards(client, [_item(a, r) for a, r, _ in chunk], 120)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = list(pool.map(send, chunks))
    wall = time.perf_counter() - started
    results: list[bool] = []
    statuses: list[str] = []
    for out in done:
        for item in out:
            statuses.append(item["reward"]["status"])
            results.append(item["reward"]["value"] == 1.0)
    return wall, results, statuses


def pathological(client_of: Any) -> dict[str, Any]:
    ordinary = [("\\frac{2}{4}", "\\frac{1}{2}"), ("2\\sqrt{2}", "\\sqrt{8}")]
    items = [_item(a, "7") for a in RUNAWAYS] + [_item(a, r) for a, r in ordinary]
    with client_of() as client:
        started = time.perf_counter()
        out = _rewards(client, items, 120)
        batch_wall = time.perf_counter() - started
        started = time.perf_counter()
        (inline,) = _rewards(client, [_item("99999999!", "5")], 60)
        inline_wall = time.perf_counter() - started
        started = time.perf_counter()
        (after,) = _rewards(client, [_item("\\frac{6}{8}", "0.75")], 60)
        after_wall = time.perf_counter() - started
    reasons = [next(v["reason"] for v in item["verdicts"] if v["tier"] == "answer") for item in out]
    return {
        "batch_items": len(items),
        "batch_runaways": len(RUNAWAYS),
        "batch_wall_s": round(batch_wall, 2),
        "batch_reasons": reasons,
        "batch_values": [item["reward"]["value"] for item in out],
        "inline_runaway_wall_s": round(inline_wall, 2),
        "inline_runaway_reason": next(
            v["reason"] for v in inline["verdicts"] if v["tier"] == "answer"
        ),
        "next_request_wall_s": round(after_wall, 3),
        "next_request_value": after["reward"]["value"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="unique (answer, reference) pairs")
    parser.add_argument("--batch", type=int, default=50, help="items per request")
    parser.add_argument("--clients", type=int, default=4, help="concurrent requests")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--tier-only",
        action="store_true",
        help="the tier in-process only: whole numbers alone skipping sympy, then fractions too "
        "(twice each, alternating)",
    )
    args = parser.parse_args(argv)
    if args.tier_only:
        items = pairs(args.n, args.seed)
        runs = [tier_only(items, integers_only=flag) for flag in (True, False, True, False)]
        print(json.dumps(runs, indent=2))
        return 0

    from harness import postgres  # the live stack: PostgreSQL, Redis, API, Celery worker

    items = pairs(args.n, args.seed)
    before_wall, bare = bare_loop(items)
    report: dict[str, Any] = {
        "pairs": len(items),
        "bare_loop_items_per_s_before": round(len(items) / before_wall, 1),
        "bare_loop_wrong_vs_expected": sum(
            b != e for b, (_, _, e) in zip(bare, items, strict=True)
        ),
    }
    print(f"bare math-verify loop, 1 core: {len(items) / before_wall:.1f} items/s", flush=True)
    with postgres(2) as layout:

        def client_of() -> httpx.Client:
            return httpx.Client(base_url=layout.url, headers=layout.headers, timeout=300)

        warm = pairs(40, args.seed + 1)  # imports, connections, the workers' math children
        through_service(client_of, warm, 10, 2)
        wall, served, statuses = through_service(client_of, items, args.batch, args.clients)
        report["service_items_per_s"] = round(len(items) / wall, 1)
        report["service_not_scored"] = sum(s != "scored" for s in statuses)
        disagreements = [
            (a, r, s, b) for (a, r, _), s, b in zip(items, served, bare, strict=True) if s != b
        ]
        report["disagreements_with_bare_loop"] = len(disagreements)
        for a, r, s, b in disagreements[:10]:
            print(f"  disagree: answer {a!r} reference {r!r}: service {s}, math-verify {b}")
        print(f"service (API + worker x2): {len(items) / wall:.1f} items/s", flush=True)
        report["pathological"] = pathological(client_of)
    after_wall, _ = bare_loop(items)
    report["bare_loop_items_per_s_after"] = round(len(items) / after_wall, 1)
    best = len(items) / min(before_wall, after_wall)
    report["service_over_best_bare"] = round(len(items) / wall / best, 2)
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
