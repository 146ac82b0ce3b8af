"""The targets the issues hold the benchmarks to, as checks on a benchmark's flattened figures.

A benchmark's figures (its `--json` output) are flattened to dotted keys, e.g. `peak_rss_mb.api`
or `total.lost`; each Target reads them. `UNMEASURED` lists targets no benchmark in bench/
measures yet, so the report says so instead of leaving them out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Figures = dict[str, Any]


@dataclass(frozen=True)
class Target:
    name: str
    held_to: str
    source: str
    check: Callable[[Figures], bool]
    show: Callable[[Figures], str] | None = None
    variant: str = ""  # "" applies to every variant of the benchmark (e.g. both load layouts)


def key(name: str, unit: str = "") -> Callable[[Figures], str]:
    def show(f: Figures) -> str:
        value = f[name]
        return f"{value:.4g}{unit}" if isinstance(value, float) else f"{value}{unit}"

    return show


def p95_keys(f: Figures) -> list[str]:
    """The p95 figures in milliseconds; KeyError (the target reads n/a) when there are none."""
    keys = [k for k in f if "p95" in k and "ms" in k]
    if not keys:
        raise KeyError("no p95 figure in ms")
    return keys


TARGETS: dict[str, list[Target]] = {
    "bench_load": [
        Target("error rate", "0 errors", "issue 16", lambda f: f["errors"] == 0, key("errors")),
        Target(
            "items/s vs bare chem.fast on one core (4+ clients)",
            ">= 1.6x",
            "issue 18",
            lambda f: f["ratio_to_bare"] >= 1.6,
            key("ratio_to_bare", "x"),
        ),
        Target(
            "all items answered",
            "items_done = items",
            "issue 16",
            lambda f: f["items_done"] == f["items"],
            lambda f: f"{f['items_done']} / {f['items']}",
        ),
    ],
    "bench_faults": [
        Target("items lost", "0", "issue 16", lambda f: f["total.lost"] == 0, key("total.lost")),
        Target(
            "items duplicated (verdicts per tier > 1, ledger != verdicts, a key's second job)",
            "0",
            "issue 16",
            lambda f: f["total.duplicated"] == 0,
            key("total.duplicated"),
        ),
        Target(
            "5xx answers other than 503 + Retry-After",
            "0",
            "issue 16",
            lambda f: f["total.5xx seen"] == 0,
            key("total.5xx seen"),
        ),
    ],
    "bench_latency": [
        Target(
            "single-molecule sync latency, median (fresh molecules)",
            "< 20 ms",
            "issue 2",
            lambda f: f["fresh_median_ms"] < 20,
            key("fresh_median_ms", " ms"),
        ),
        Target(
            "median latency minus bare RDKit on the same molecules (embedded)",
            "<= +2 ms",
            "issue 18",
            lambda f: f["fresh_median_ms"] - f["bare_rdkit_median_ms"] <= 2,
            lambda f: f"{f['fresh_median_ms'] - f['bare_rdkit_median_ms']:+.2f} ms",
        ),
        Target(
            "authentication added to the median (fresh / cached)",
            "<= 1 ms",
            "issue 11",
            lambda f: max(f["auth_added_fresh_median_ms"], f["auth_added_cached_median_ms"]) <= 1,
            lambda f: (
                f"{f['auth_added_fresh_median_ms']:+.3f} / "
                f"{f['auth_added_cached_median_ms']:+.3f} ms"
            ),
        ),
    ],
    "bench_cascade": [
        Target(
            "expensive calls of the cascade / all items",
            "<= 20%",
            "issue 3",
            lambda f: f["expensive_calls_per_item"] <= 0.20,
            lambda f: f"{f['expensive_calls_per_item']:.1%}",
        ),
        Target(
            "true top-10% scored at full fidelity",
            ">= 90%",
            "issue 3",
            lambda f: f["top10_recall"] >= 0.90,
            lambda f: f"{f['top10_recall']:.1%}",
        ),
    ],
    "bench_sandbox": [
        Target(
            "isolated executions per second, sustained, warm pool",
            ">= 15/s",
            "issue 5",
            lambda f: f["pool.execs_per_s"] >= 15,
            key("pool.execs_per_s", "/s"),
        ),
        Target(
            "warm pool / docker run, executions per second",
            "reported (ratio in one run)",
            "issue 14",
            lambda f: f["pool_vs_docker_run.execs_per_s"] > 0,
            key("pool_vs_docker_run.execs_per_s", "x"),
        ),
    ],
    "bench_chem": [
        Target(
            "chem.fast throughput vs a bare RDKit loop, same molecules",
            "reported (ratio in one run)",
            "issue 18",
            lambda f: f["[chem.fast].throughput_ratio_vs_bare_rdkit"] > 0,
            key("[chem.fast].throughput_ratio_vs_bare_rdkit", "x"),
        ),
    ],
    "bench_review_next": [
        Target(
            "next task p95 with 20 concurrent reviewers",
            "< 50 ms",
            "issue 12",
            lambda f: all(f[k] < 50 for k in p95_keys(f)),
            lambda f: ", ".join(f"{k} {f[k]}" for k in p95_keys(f)),
        ),
    ],
}

UNMEASURED = [
    "Metrics add at most 2% to the fast-tier throughput (issue 13).",
    "Service CPU per item at most 1.5x the tier's own for chem.fast batches of 64-256 (issue 18).",
    "One client's 256-item batch at least 1.3x the one-core bare tier (issue 18; "
    "`bench_load.py --trainers 1 --min-batch 256` measures it, not run by the report).",
    "Single-item sync latency median at most the tier's own + 4 ms on PostgreSQL (issue 18; "
    "bench_latency.py runs the embedded default only).",
    "A batch of cached verdicts answers at least 5,000 items/s (issue 18).",
    "Peak RSS per worker: no growth over a 10-minute soak (issue 18).",
    "At least 40 sandboxed executions per second sustained through the whole service with "
    "per-candidate processes in a warm container (issue 14).",
]
