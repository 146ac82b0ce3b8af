"""The targets the issues hold the benchmarks to, as checks on a benchmark's flattened figures.

A benchmark's figures (its `--json` output) are flattened to dotted keys, e.g. `peak_rss_mb.api`,
`total.lost` or `sqlite this.sizes.256.service_over_tier`; each Target reads them. A target
holds for the variants of the benchmark it names (report.py's SPECS), or for all of them.
`UNMEASURED` lists targets no benchmark in bench/ measures yet, so the report says so instead of
leaving them out.
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
    variants: tuple[str, ...] = ()  # () applies to every variant of the benchmark

    def applies_to(self, variant: str) -> bool:
        return not self.variants or variant in self.variants


def key(name: str, unit: str = "") -> Callable[[Figures], str]:
    def show(f: Figures) -> str:
        value = f[name]
        return f"{value:.4g}{unit}" if isinstance(value, float) else f"{value}{unit}"

    return show


def _latency_over_tier(f: Figures) -> str:
    return f"{f['service_minus_tier_in_request_ms']:+.2f} ms ({f['service_minus_tier_ms']:+.2f} ms)"


def p95_keys(f: Figures) -> list[str]:
    """The p95 figures in milliseconds; KeyError (the target reads n/a) when there are none."""
    keys = [k for k in f if "p95" in k and "ms" in k]
    if not keys:
        raise KeyError("no p95 figure in ms")
    return keys


def each(f: Figures, name: str) -> dict[str, Any]:
    """Every figure whose last key is `name`, by the rest of its key (KeyError when none)."""
    found = {k.removesuffix(f".{name}"): v for k, v in f.items() if k.endswith(f".{name}")}
    if not found:
        raise KeyError(name)
    return found


def per_size(f: Figures, name: str) -> dict[tuple[str, int], float]:
    """bench_throughput's figure `name` by (layout and ref, batch size)."""
    found = {}
    for rest, value in each(f, name).items():
        label, sizes, size = rest.rsplit(".", 2)
        if sizes == "sizes":
            found[(label, int(size))] = float(value)
    if not found:
        raise KeyError(name)
    return found


def largest_batch(f: Figures, name: str) -> dict[str, float]:
    """bench_throughput's figure `name` at the largest batch size, by layout and ref."""
    rows = per_size(f, name)
    largest: dict[str, int] = {}
    for label, size in rows:
        largest[label] = max(size, largest.get(label, 0))
    return {label: rows[(label, size)] for label, size in largest.items()}


def shown_per_size(f: Figures, name: str, unit: str) -> str:
    rows = per_size(f, name)
    one_label = len({label for label, _ in rows}) == 1
    return ", ".join(
        f"{size if one_label else f'{label} {size}'}: {value:.4g}{unit}"
        for (label, size), value in sorted(rows.items())
    )


def shown_largest(f: Figures, name: str) -> str:
    rows = largest_batch(f, name)
    return ", ".join(
        f"{'' if len(rows) == 1 else f'{label} '}{v:,.0f}/s" for label, v in rows.items()
    )


def soak_rates(f: Figures) -> dict[str, float]:
    """bench_soak's second-half RSS growth (MB/min) by process."""
    return {k.removeprefix("processes."): v for k, v in each(f, "second_half_mb_per_min").items()}


def soak_flat(f: Figures) -> bool:
    """Whether every process's memory stayed flat, judged on a run of the issue's 10 minutes
    only (KeyError, so the report says n/a, for a shorter one: the API's caches and malloc
    arenas still fill during its first minutes)."""
    if f["duration_s"] < 540:
        raise KeyError("duration_s: a short soak; the target holds a 10-minute run")
    return all(v <= 0.5 for v in soak_rates(f).values())


def soak_shown(f: Figures) -> str:
    rates = soak_rates(f)
    worst = max(rates, key=lambda p: rates[p])
    api = [f"{rates[p]:+.2f}" for p in rates if p.startswith("api ")]
    return f"worst {rates[worst]:+.2f} ({worst}); API {', '.join(api) or 'n/a'} MB/min"


TARGETS: dict[str, list[Target]] = {
    "bench_load": [
        Target("error rate", "0 errors", "issue 16", lambda f: f["errors"] == 0, key("errors")),
        Target(
            "items/s vs bare chem.fast on one core (4+ clients)",
            ">= 1.6x",
            "issue 18",
            lambda f: f["ratio_to_bare"] >= 1.6,
            key("ratio_to_bare", "x"),
            ("embedded", "postgres"),
        ),
        Target(
            "items/s vs bare chem.fast on one core (one client, 256-item batches)",
            ">= 1.3x",
            "issue 18",
            lambda f: f["ratio_to_bare"] >= 1.3,
            key("ratio_to_bare", "x"),
            ("one-trainer",),
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
            "single-item sync latency less chem.fast's time in that request, median "
            "(embedded; in brackets: less chem.fast's own back to back)",
            "<= +2 ms",
            "issue 18",
            lambda f: f["service_minus_tier_in_request_ms"] <= 2,
            _latency_over_tier,
            ("embedded",),
        ),
        Target(
            "single-item sync latency less chem.fast's time in that request, median "
            "(PostgreSQL; in brackets: less chem.fast's own back to back)",
            "<= +4 ms",
            "issue 18",
            lambda f: f["service_minus_tier_in_request_ms"] <= 4,
            _latency_over_tier,
            ("postgres",),
        ),
        Target(
            "all-cached batch over HTTP (--batch items, 256 by default), items/s",
            ">= 5,000",
            "issue 18",
            lambda f: f["cached_batch_items_per_s"] >= 5000,
            key("cached_batch_items_per_s", " items/s"),
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
            ("embedded",),  # keyed and keyless alternate on the embedded layout only
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
    "bench_throughput": [
        Target(
            "service CPU per item / chem.fast's own, chem.fast batches of 64-256, every size",
            "<= 1.5x",
            "issue 18",
            lambda f: all(v <= 1.5 for v in per_size(f, "service_over_tier").values()),
            lambda f: shown_per_size(f, "service_over_tier", "x"),
        ),
        Target(
            "cached verdicts: items/s of a batch whose items are all cached (largest batch)",
            ">= 5,000/s",
            "issue 18",
            lambda f: all(v >= 5000 for v in largest_batch(f, "cached_items_per_s").values()),
            lambda f: shown_largest(f, "cached_items_per_s"),
        ),
    ],
    "bench_soak": [
        Target(
            "no memory growth over a 10-minute soak: RSS growth of every service process",
            "<= 0.5 MB/min, each process's second_half_mb_per_min (the run's second half after "
            "warm-up), in a run of 10 minutes (n/a for the short form)",
            "issue 18",
            soak_flat,
            soak_shown,
        ),
        Target(
            "requests that failed during the soak (e.g. a deadlock's 503)",
            "0",
            "issue 18",
            lambda f: f["errors"] == 0,
            key("errors"),
        ),
    ],
    "bench_metrics": [
        Target(
            "fast-tier items/s lost with metrics on (median of paired rounds, same molecules)",
            "<= 2%",
            "issue 13",
            lambda f: f["cost_pct"] <= 2,
            key("cost_pct", "%"),
        ),
        Target(
            "the metric hooks alone, as a share of an item's time at the metrics-off rate",
            "<= 2%",
            "issue 13",
            lambda f: f["hooks_pct_of_item"] <= 2,
            lambda f: f"{f['hooks_pct_of_item']:.2f}% ({f['hooks_us_per_item']} us per item)",
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
    "At least 40 sandboxed executions per second sustained through the whole service with "
    "per-candidate processes in a warm container (issue 14).",
]
