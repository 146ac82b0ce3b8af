"""What the ladder reports, counted when its transaction commits.

The ladder calls these from inside a transaction that may still roll back (and be retried): a
sample is kept on the session and counted by the `after_commit` hook, so that a retried
transaction counts once and a rolled-back one not at all. Counter increments are summed per
metric and labels until then: a batch of 256 items adds to each of its counters once, not 256
times (each increment of a multi-process counter is a write to its memory-mapped file).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from tiers.base import Verdict, charged_units
from tiers.registry import UnknownTierError, get_tier
from verifier_service.metrics.registry import Metrics, enabled, metrics

_PENDING = "metrics.pending"
_COUNTS = "metrics.counts"

Sample = Callable[[Metrics], None]


def _defer(session: Session, sample: Sample) -> None:
    session.info.setdefault(_PENDING, []).append(sample)


def _add(session: Session, counter: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
    """Add to a counter of `Metrics` (by attribute name) when the transaction commits."""
    counts: defaultdict[tuple[str, tuple[str, ...]], float] | None = session.info.get(_COUNTS)
    if counts is None:
        counts = session.info[_COUNTS] = defaultdict(float)
    counts[(counter, labels)] += amount


@event.listens_for(Session, "after_commit")
def _count(session: Session) -> None:
    pending: list[Sample] = session.info.pop(_PENDING, [])
    counts: dict[tuple[str, tuple[str, ...]], float] = session.info.pop(_COUNTS, {})
    if pending or counts:
        found = metrics()
        for sample in pending:
            sample(found)
        for (counter, labels), amount in counts.items():
            getattr(found, counter).labels(*labels).inc(amount)


@event.listens_for(Session, "after_rollback")
def _drop(session: Session) -> None:
    session.info.pop(_PENDING, None)
    session.info.pop(_COUNTS, None)


def verdict(session: Session, verdict: Verdict) -> None:
    """A verdict stored on an item (computed, or from the cache)."""
    if not enabled():
        return
    tier, status, cached = verdict.tier, str(verdict.status.value), verdict.cached
    _add(session, "verdicts", (tier, status, "true" if cached else "false"))
    if cached:
        return
    # Charged as the cost ledger keeps it: a tier's units for a computed verdict, nothing for
    # one the cache (or an identical item of the same batch) answered.
    units = charged_units(_cost_class(tier), verdict.components)
    if units:
        _add(session, "cost_units", (tier,), units)
    wall_s = verdict.cost.wall_s
    _defer(session, lambda m: m.tier_duration.labels(tier).observe(wall_s))


def reward(session: Session, policy: str, status: str) -> None:
    """A reward finished (an item's or a trajectory's)."""
    if enabled():
        _add(session, "rewards", (policy, status))


def cache_lookups(session: Session, lookups: Iterable[tuple[str, bool]]) -> None:
    """Climbs looked up in the verdict cache: (tier, hit) each."""
    if not enabled():
        return
    for (tier, hit), n in Tally(lookups).items():
        _add(session, "cache_hits" if hit else "cache_misses", (tier,), n)


def gate_decision(session: Session, policy: str, step: int, at: Any, decision: Any) -> None:
    """A decision at ladder step `at` (climb, audit or stop; waiting is not counted)."""
    name = str(getattr(decision, "value", decision))
    tier = str(at.tier)
    if enabled() and name != "wait":
        _add(session, "gate_decisions", (policy, str(step), tier, name))


def _cost_class(tier: str) -> float:
    try:
        return float(get_tier(tier).cost_class)
    except UnknownTierError:  # a verdict of a tier this process does not know: no units to charge
        return 0.0
