"""One trainer's slow `/run_code` calls against another trainer's request latency (issue 36).

Starts the API and a worker as compose runs them (a PostgreSQL database and a redis-server of the
run's own, the real Docker engine), makes two trainer keys A and B without rate limits, and
times B's `GET /v1/jobs/{id}` back to back for `--measure` seconds, twice: on a quiet service,
then while A has `--load` (42) programs in flight that sleep `--sleep` (25) s each (B starts
`--settle` s after A's burst, when the runs are in). Prints B's p50/p99 both times and their
ratio (loaded / quiet), and what A's calls got (200 / 429 and the cap named).

Runs, one after the other, each on a fresh service:
- `caps`: this tree with its default caps (run_code_concurrency, run_code_concurrency_per_key);
- `open`: this tree with both caps raised to `--load`, so every one of A's runs goes in: what is
  left is the thread pool of their own (B's latency beside 42 running containers);
- with `--baseline REF`: git REF's code (e.g. the tree before issue 36: all of A's calls on the
  thread pool the API's other routes share).

    .venv/bin/python bench/bench_run_code_fairness.py                   # ~2 min
    .venv/bin/python bench/bench_run_code_fairness.py --baseline ff31d7a --json fairness.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from bench_load import percentile
from bench_throughput import exported
from harness import REPO, backing, cli, make_key, served

ITEM = {"kind": "json", "payload": {"tool": "t", "args": {}}, "reference": {"schema": {}}}


@contextmanager
def service(code: Path, settings: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """The API and a worker on a database and Redis of their own: (URL, key A, key B)."""
    with backing("verifier_fair", settings) as env:
        cli(env, "migrate", code=code)
        a, b = (make_key(env, who, code=code) for who in ("trainer-a", "trainer-b"))
        worker = ["--queues", "ladder,tier.fast", "--concurrency", "1"]
        # (A's runs may still be going: the API gets longer to stop than the default)
        with served(env, [worker], code=code, stop_timeout=90) as (url, _):
            yield url, a, b


def timed_gets(http: httpx.Client, key: str, path: str, seconds: float) -> list[float]:
    """B's requests back to back for `seconds` (the last one may end later): their latencies."""
    took: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        answer = http.get(path, headers={"Authorization": f"Bearer {key}"})
        took.append(time.monotonic() - started)
        if answer.status_code != 200:
            raise SystemExit(f"B's GET {path}: {answer.status_code} {answer.text[:300]}")
    return took


def figures(took: list[float]) -> dict[str, float]:
    return {
        "n": len(took),
        "p50_ms": round(percentile(took, 0.5) * 1000, 2),
        "p99_ms": round(percentile(took, 0.99) * 1000, 2),
        "max_ms": round(max(took) * 1000, 2),
    }


def outcome(answer: httpx.Response) -> str:
    """What one of A's calls got: `200 Success`, `429 per_key`, `429 overall`, ..."""
    if answer.status_code == 200:
        return f"200 {answer.json().get('status')}"
    if answer.status_code == 429:
        return f"429 {answer.json().get('cap')}"
    return str(answer.status_code)


def measure(url: str, a: str, b: str, args: argparse.Namespace) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=args.load + 8, max_keepalive_connections=args.load + 8)
    with httpx.Client(base_url=url, timeout=args.sleep + 120, limits=limits) as http:
        body = {"policy": "default", "items": [ITEM], "wait_s": 10}
        submitted = http.post("/v1/rewards", json=body, headers={"Authorization": f"Bearer {b}"})
        if submitted.status_code != 200:
            raise SystemExit(f"B's job: {submitted.status_code} {submitted.text[:300]}")
        job = f"/v1/jobs/{submitted.json()['id']}"
        timed_gets(http, b, job, 1.0)  # warm: connections, caches
        quiet = timed_gets(http, b, job, args.measure)

        run = {
            "language": "python",
            "code": f"import time\ntime.sleep({args.sleep})\nprint('done')",
            "run_timeout": args.sleep + 30,
        }
        answers: list[httpx.Response] = []
        lock = threading.Lock()

        def call() -> None:
            answer = http.post("/run_code", json=run, headers={"Authorization": f"Bearer {a}"})
            with lock:
                answers.append(answer)

        with ThreadPoolExecutor(args.load) as pool:
            burst = time.monotonic()
            for _ in range(args.load):
                pool.submit(call)
            time.sleep(args.settle)
            loaded = timed_gets(http, b, job, args.measure)
        a_wall = time.monotonic() - burst
    outcomes = Counter(outcome(r) for r in answers)
    quiet_f, loaded_f = figures(quiet), figures(loaded)
    return {
        "quiet": quiet_f,
        "loaded": loaded_f,
        "ratio_p50": round(loaded_f["p50_ms"] / quiet_f["p50_ms"], 2),
        "ratio_p99": round(loaded_f["p99_ms"] / quiet_f["p99_ms"], 2),
        "a_outcomes": dict(outcomes),
        "a_wall_s": round(a_wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--load", type=int, default=42, help="A's concurrent /run_code calls")
    parser.add_argument("--sleep", type=float, default=25.0, help="seconds each of A's runs")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before timing B")
    parser.add_argument("--measure", type=float, default=10.0, help="seconds of B's requests")
    parser.add_argument("--baseline", help="git ref also measured, e.g. the tree before")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.settle + args.measure >= args.sleep:
        parser.error("--settle + --measure must end before A's runs do (--sleep)")

    opened = str(args.load)
    runs: list[tuple[str, Path | None, dict[str, str]]] = [
        ("caps", None, {}),
        ("open", None, {"VERIFIER_SANDBOX__RUN_CODE_CONCURRENCY": opened,
                        "VERIFIER_SANDBOX__RUN_CODE_CONCURRENCY_PER_KEY": opened}),
    ]  # fmt: skip
    results: dict[str, Any] = {"load": os.getloadavg()[0], "args": vars(args) | {"json": None}}
    with contextlib.ExitStack() as stack:
        if args.baseline:
            runs.append(
                (f"baseline {args.baseline}", stack.enter_context(exported(args.baseline)), {})
            )
        for label, code, settings in runs:
            with service(code or REPO, settings) as (url, a, b):
                found = measure(url, a, b, args)
            results[label] = found
            q, lo = found["quiet"], found["loaded"]
            print(
                f"{label:>20}: B quiet p50 {q['p50_ms']} ms p99 {q['p99_ms']} ms (n={q['n']}); "
                f"beside A's {args.load} runs p50 {lo['p50_ms']} ms p99 {lo['p99_ms']} ms "
                f"max {lo['max_ms']} ms (n={lo['n']}); ratio p50 {found['ratio_p50']}x "
                f"p99 {found['ratio_p99']}x; A got {found['a_outcomes']}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
