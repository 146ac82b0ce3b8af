"""The service's Prometheus metrics, kept in prometheus-client's multiprocess mode.

Every API and worker process of a host writes its samples to files in one directory (the
settings' `metrics_dir`); whichever process serves /metrics adds them up. The metric objects are
made on first use, after `setup()` has pointed prometheus-client at the directory: a metric made
before that would count in its process's memory only, where no scrape sees it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, values
from prometheus_client.multiprocess import MultiProcessCollector

from verifier_service.settings import Settings

#: Seconds: a chem.fast verdict takes milliseconds, a DFT one minutes.
TIER_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)  # fmt: skip
TASK_BUCKETS = TIER_BUCKETS
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

_state: dict[str, Path | None] = {"dir": None}


def setup(settings: Settings) -> bool:
    """Point this process's metrics at the host's directory (made if missing) and remove the
    files of processes that are no longer alive; whether metrics are on. Call once, early, in
    every process entry point; children forked later inherit it."""
    if not settings.metrics.enabled:
        _state["dir"] = None
        return False
    path = settings.metrics_dir
    path.mkdir(parents=True, exist_ok=True)
    # prometheus-client reads its directory from the environment (its only interface for it);
    # set here from the settings, inherited by Celery's pool processes and uvicorn's workers.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    remove_dead_files(path)
    _state["dir"] = path
    return True


def enabled() -> bool:
    """Whether this process counts (setup() ran with metrics on)."""
    return _state["dir"] is not None


_PID_FILE = re.compile(r"_(\d+)\.db$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_files(path: Path) -> int:
    """Remove the files of processes that are gone (a previous run's); how many.

    Files of live processes stay: on a host where the API and workers start one after the
    other, the later one must not erase what the earlier ones have counted.
    """
    removed = 0
    for file in path.glob("*.db"):
        match = _PID_FILE.search(file.name)
        if match and not _alive(int(match.group(1))):
            file.unlink(missing_ok=True)
            removed += 1
    return removed


def wipe(path: Path) -> None:
    """Remove every metrics file (a supervisor that starts all of a host's processes)."""
    if path.is_dir():
        for file in path.glob("*.db"):
            file.unlink(missing_ok=True)


def collect_registry(path: Path) -> CollectorRegistry:
    """A registry that adds up the files of every process of the host."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(path))  # type: ignore[no-untyped-call]
    return registry


@dataclass(frozen=True)
class Metrics:
    """Every metric the service counts. Labels are bounded: names of tiers, queues, tasks,
    policies, statuses and route templates, never ids."""

    task_sent: Counter
    task_received: Counter
    task_started: Counter
    task_succeeded: Counter
    task_failed: Counter
    task_retried: Counter
    task_runtime: Histogram
    rewards: Counter
    verdicts: Counter
    tier_duration: Histogram
    cache_hits: Counter
    cache_misses: Counter
    gate_decisions: Counter
    cost_units: Counter
    http_duration: Histogram


@lru_cache(maxsize=1)
def metrics() -> Metrics:
    """This process's metric objects (made on first use, after setup())."""

    def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
        return Counter(name, doc, labels, registry=None)

    def histogram(
        name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]
    ) -> Histogram:
        return Histogram(name, doc, labels, registry=None, buckets=buckets)

    task = ("name", "queue")
    return Metrics(
        task_sent=counter("celery_task_sent", "Tasks sent to the broker.", task),
        task_received=counter("celery_task_received", "Tasks a worker took from the broker.", task),
        task_started=counter("celery_task_started", "Tasks that started running.", task),
        task_succeeded=counter("celery_task_succeeded", "Tasks that returned.", task),
        task_failed=counter("celery_task_failed", "Tasks that raised.", task),
        task_retried=counter("celery_task_retried", "Tasks that asked to be retried.", task),
        task_runtime=histogram("celery_task_runtime", "Seconds a task ran.", task, TASK_BUCKETS),
        rewards=counter(
            "verifier_rewards", "Rewards finished, by status and policy.", ("policy", "status")
        ),
        verdicts=counter(
            "verifier_verdicts",
            "Verdicts stored, by tier and status; cached=true when the cache (or an identical "
            "item of the same batch) answered.",
            ("tier", "status", "cached"),
        ),
        tier_duration=histogram(
            "verifier_tier_duration_seconds",
            "Wall seconds a tier took per unique candidate (computed verdicts only).",
            ("tier",),
            TIER_BUCKETS,
        ),
        cache_hits=counter(
            "verifier_cache_hits", "Climbs answered by the verdict cache.", ("tier",)
        ),
        cache_misses=counter(
            "verifier_cache_misses", "Climbs the verdict cache could not answer.", ("tier",)
        ),
        gate_decisions=counter(
            "verifier_gate_decisions",
            "Decisions at a ladder step: climb and audit escalate to the step's tier, stop ends "
            "the item below it.",
            ("policy", "step", "tier", "decision"),
        ),
        cost_units=counter("verifier_cost_units", "Cost units charged, by tier.", ("tier",)),
        http_duration=histogram(
            "verifier_http_request_duration_seconds",
            "Seconds from request to response, by route template and status.",
            ("method", "route", "status"),
            HTTP_BUCKETS,
        ),
    )
