"""What the ladder reports, counted when its transaction commits.

The ladder calls these from inside a transaction that may still roll back (and be retried): a
sample is kept on the session and counted by the `after_commit` hook, so that a retried
transaction counts once and a rolled-back one not at all.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from tiers.base import Verdict
from tiers.registry import UnknownTierError, get_tier
from verifier_service.metrics.registry import Metrics, enabled, metrics

_PENDING = "metrics.pending"

Sample = Callable[[Metrics], None]


def _defer(session: Session, sample: Sample) -> None:
    session.info.setdefault(_PENDING, []).append(sample)


@event.listens_for(Session, "after_commit")
def _count(session: Session) -> None:
    pending: list[Sample] = session.info.pop(_PENDING, [])
    if pending:
        found = metrics()
        for sample in pending:
            sample(found)


@event.listens_for(Session, "after_rollback")
def _drop(session: Session) -> None:
    session.info.pop(_PENDING, None)


def verdict(session: Session, verdict: Verdict) -> None:
    """A verdict stored on an item (computed, or from the cache)."""
    if not enabled():
        return
    tier, status, cached = verdict.tier, str(verdict.status.value), verdict.cached
    wall_s = verdict.cost.wall_s
    # Charged as the cost ledger keeps it: a tier's units for a computed verdict, nothing for
    # one the cache (or an identical item of the same batch) answered.
    units = 0.0 if cached else _cost_class(tier)

    def sample(m: Metrics) -> None:
        m.verdicts.labels(tier, status, "true" if cached else "false").inc()
        if not cached:
            m.tier_duration.labels(tier).observe(wall_s)
            if units:
                m.cost_units.labels(tier).inc(units)

    _defer(session, sample)


def reward(session: Session, policy: str, status: str) -> None:
    """A reward finished (an item's or a trajectory's)."""
    if enabled():
        _defer(session, lambda m: m.rewards.labels(policy, status).inc())


def cache_lookups(session: Session, lookups: Iterable[tuple[str, bool]]) -> None:
    """Climbs looked up in the verdict cache: (tier, hit) each."""
    if not enabled():
        return
    tally: Tally[tuple[str, bool]] = Tally(lookups)

    def sample(m: Metrics) -> None:
        for (tier, hit), n in tally.items():
            (m.cache_hits if hit else m.cache_misses).labels(tier).inc(n)

    if tally:
        _defer(session, sample)


def gate_decision(session: Session, policy: str, step: int, at: Any, decision: Any) -> None:
    """A decision at ladder step `at` (climb, audit or stop; waiting is not counted)."""
    name = str(getattr(decision, "value", decision))
    tier = str(at.tier)
    if enabled() and name != "wait":
        _defer(session, lambda m: m.gate_decisions.labels(policy, str(step), tier, name).inc())


def _cost_class(tier: str) -> float:
    try:
        return float(get_tier(tier).cost_class)
    except UnknownTierError:  # a verdict of a tier this process does not know: no units to charge
        return 0.0
