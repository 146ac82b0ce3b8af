"""The load bench_sandbox.py puts on the sandbox: its candidates (small programs with tests, some
wrong on purpose) and the drivers that judge them from threads, sustained or as one batch,
tallying latency and wrong verdicts. Split from bench_sandbox.py."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tiers.base import Candidate

PROGRAMS = [
    (
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n"
        "        a, b = b, a + b\n    return a\n",
        "assert fib(0) == 0\nassert fib(1) == 1\nassert fib(10) == 55\nassert fib(30) == 832040\n",
        True,
    ),
    (
        "def is_pal(s):\n    s = ''.join(c.lower() for c in s if c.isalnum())\n"
        "    return s == s[::-1]\n",
        "assert is_pal('A man, a plan, a canal: Panama')\nassert not is_pal('abc')\n",
        True,
    ),
    (
        # wrong for even sizes
        "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n",
        "assert median([3, 1, 2]) == 2\nassert median([4, 1, 3, 2]) == 2.5\n",
        False,
    ),
    (
        "def primes(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]\n",
        "assert primes(10) == [2, 3, 5, 7]\nassert len(primes(200)) == 46\n",
        True,
    ),
]
PYTEST_TESTS = "def test_a():\n    {0}\n"


def candidates(style: str) -> list[tuple[Candidate, bool]]:
    out = []
    for code, tests, ok in PROGRAMS:
        if style == "pytest":
            lines = [line for line in tests.splitlines() if line.strip()]
            tests = "\n".join(PYTEST_TESTS.format(line).replace("test_a", f"test_{i}")
                              for i, line in enumerate(lines))  # fmt: skip
        out.append((Candidate(kind="code", payload={"code": code, "tests": tests}), ok))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Tally:
    """Latency and correctness of judged jobs (one or more candidates each), shared by the
    driving threads."""

    def __init__(self, run_one: Callable[[int], list[bool]]) -> None:
        self.run_one = run_one
        self.latencies: list[float] = []
        self.candidates = 0
        self.wrong = 0
        self._lock = threading.Lock()

    def judge(self, i: int) -> None:
        t0 = time.perf_counter()
        right = self.run_one(i)
        dt = time.perf_counter() - t0
        with self._lock:
            self.latencies.append(dt)
            self.candidates += len(right)
            self.wrong += sum(not r for r in right)

    def figures(self) -> dict[str, Any]:
        return {
            "p50_s": round(statistics.median(self.latencies), 3),
            "p95_s": round(percentile(self.latencies, 0.95), 3),
            "wrong_verdicts": self.wrong,
        }


def drive(run_one: Callable[[int], list[bool]], seconds: float, concurrency: int) -> dict[str, Any]:
    """Call run_one from `concurrency` threads for `seconds`; candidates judged per second and
    latency percentiles of one call (one candidate, or one job of them)."""
    tally = Tally(run_one)
    stop_at = time.monotonic() + seconds

    def worker(seed: int) -> None:
        i = seed
        while time.monotonic() < stop_at:
            tally.judge(i)
            i += concurrency

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        list(ex.map(worker, range(concurrency)))
    elapsed = time.monotonic() - started
    n = tally.candidates
    return {"executions": n, "execs_per_s": round(n / elapsed, 2), **tally.figures()}


def drive_batch(
    run_one: Callable[[int], list[bool]], calls: int, concurrency: int
) -> dict[str, Any]:
    """Make `calls` calls of run_one, `concurrency` at a time; execs/s = candidates / wall time
    of the whole batch, latency per call (from its start to its last verdict)."""
    tally = Tally(run_one)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        list(ex.map(tally.judge, range(calls)))
    wall = time.perf_counter() - started
    size = tally.candidates
    return {
        "executions": size,
        "wall_s": round(wall, 3),
        "execs_per_s": round(size / wall, 2),
        **tally.figures(),
    }
