"""The console's logic: the overview of a window, put together from the repository's aggregates
(the database, so history survives restarts) and the broker's queues (now)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy.orm import Session

from tiers.registry import get_tier, tier_names
from verifier_service.auth import service as audit
from verifier_service.console.overview import histogram, repository, rollup_reads, rollups
from verifier_service.console.overview.schemas import (
    ItemPath,
    JobPaths,
    JobQuery,
    JobRow,
    KindRate,
    LadderStep,
    Overview,
    QueueStats,
    Rung,
    TierStats,
    Window,
)
from verifier_service.core.db import utcnow
from verifier_service.core.errors import ConflictError, NotFoundError
from verifier_service.core.notify import sync_client
from verifier_service.core.presence import drain_key, presence_key
from verifier_service.jobs.schemas import StoredVerdict
from verifier_service.jobs.service import job_out
from verifier_service.ladder.dispatch import Outgoing, stage
from verifier_service.ladder.models import JOB_FINISHED, Job
from verifier_service.ladder.operations import cancel_job

#: The tier whose verdicts people give: its times are review times (see `overview`).
HUMAN_TIER = "human"

SPAN = {
    Window.hour: timedelta(hours=1),
    Window.day: timedelta(hours=24),
    Window.week: timedelta(days=7),
}
#: The width of the items series' bins: a week of minutes would be 10,080 points a kind.
BIN = {
    Window.hour: timedelta(minutes=1),
    Window.day: timedelta(minutes=5),
    Window.week: timedelta(hours=1),
}


def _ladder(totals: _Totals) -> list[LadderStep]:
    """Per policy and item kind, its tiers ordered by how many items climbed to them (the cheap
    ones first), each with the share of the step below that climbed to it."""
    by_ladder: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for (policy, kind, tier), n in totals.reached.items():
        by_ladder.setdefault((policy, kind), []).append((tier, n))
    out: list[LadderStep] = []
    for (policy, kind), reached in sorted(by_ladder.items()):
        below = totals.entered.get((policy, kind), 0)
        for tier, n in sorted(reached, key=lambda t: (-t[1], t[0])):
            rate = min(1.0, n / below) if below else 0.0
            out.append(
                LadderStep(policy=policy, kind=kind, tier=tier, items=n, escalation_rate=rate)
            )
            below = n
    return out


def queues(broker_url: str) -> list[QueueStats]:
    """Each tier queue's depth and live workers (not counting those an operator drains: they
    take no new work), from the broker (null where it is down)."""
    names = sorted({get_tier(n).queue for n in tier_names()})
    client = sync_client(broker_url)
    workers: dict[str, int] = {}
    try:
        pipe = client.pipeline(transaction=False)
        now = time.time()
        for queue in names:
            pipe.zrangebyscore(presence_key(queue), now, "+inf")
        live = {q: {_text(n) for n in ns} for q, ns in zip(names, pipe.execute(), strict=True)}
        nodes = sorted(set().union(*live.values()))
        pipe = client.pipeline(transaction=False)
        for node in nodes:
            pipe.exists(drain_key(node))
        drained = {node for node, found in zip(nodes, pipe.execute(), strict=True) if found}
        workers = {q: len(ns - drained) for q, ns in live.items()}
    except RedisError:
        pass
    out = []
    for queue in names:
        try:
            depth: int | None = int(client.llen(queue))
        except RedisError:
            depth = None
        out.append(QueueStats(queue=queue, depth=depth, workers=workers.get(queue)))
    return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class _Totals:
    """The overview's sums over a window, added up from raw ranges and rollup rows."""

    bin_width: timedelta
    series: Counter[tuple[datetime, str]] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    cached: Counter[str] = field(default_factory=Counter)
    reached: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    entered: Counter[tuple[str, str]] = field(default_factory=Counter)
    cost_tier: dict[str, float] = field(default_factory=dict)
    cost_principal: dict[str, float] = field(default_factory=dict)

    def add_raw(self, session: Session, ranges: list[repository.Range]) -> None:
        """Add the ladder's own rows stamped in `ranges` (three statements a range: one range
        a statement, since SQLite scans the whole table for ranges joined by OR)."""
        for one in ranges:
            for created, policy, kind, status, n in repository.items_by_job(session, [one]):
                self.series[(rollups.floor_to(created, self.bin_width), kind)] += n
                self.entered[(policy, kind)] += n
                self.statuses[status] += n
            for tier, n, cached in repository.verdict_stats(session, [one]):
                self.verdicts[tier] += n
                self.cached[tier] += cached
            for policy, kind, tier, principal, n, units in repository.costs(session, [one]):
                self.reached[(policy, kind, tier)] += n
                _add(self.cost_tier, {tier: units})
                _add(self.cost_principal, {principal: units})

    def add_rolled(self, rolled: rollup_reads.Rolled) -> None:
        """Add the rollup rows of whole closed minutes (and hours)."""
        for at, kind, n in rolled.series:
            self.series[(rollups.floor_to(at, self.bin_width), kind)] += n
        self.entered.update(rolled.per_policy)
        self.statuses.update(rolled.rewards)
        for tier, n, cached in rolled.verdicts:
            self.verdicts[tier] += n
            self.cached[tier] += cached
        for tier, principal, policy, kind, n, units in rolled.cost:
            self.reached[(policy, kind, tier)] += n
            _add(self.cost_tier, {tier: units})
            _add(self.cost_principal, {principal: units})


def _add(into: dict[str, float], more: dict[str, float]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, 0.0) + value


def refresh_rollups(session: Session) -> bool:
    """Roll up what closed since the last overview (the caller commits)."""
    return rollups.refresh(session, utcnow())


def overview(
    session: Session, window: Window, broker_url: str, *, use_rollups: bool = True
) -> Overview:
    """The overview of the last `window`: from the rollups where they reach (whole closed
    minutes, whole settled hours) and the raw rows around them; from raw rows only without
    `use_rollups` (the same numbers, durations exact rather than within 2.5 %)."""
    now = utcnow()
    since = now - SPAN[window]
    bin_width = BIN[window]
    totals = _Totals(bin_width)
    rolled_state = rollups.state(session) if use_rollups else None
    percentiles: dict[str, tuple[float, float]]
    if rolled_state is None:
        totals.add_raw(session, [(since, None)])
        percentiles = repository.duration_percentiles(session, [(since, None)])
    else:
        first = rollups.ceil_to(since, rollups.MINUTE)
        last = max(first, rolled_state.closed_until)
        first_hour = rollups.ceil_to(since, rollups.HOUR)
        last_hour = max(first_hour, rolled_state.walls_until)
        rolled = rollup_reads.read(session, first, last, first_hour, last_hour, bin_width)
        totals.add_rolled(rolled)
        # Unfinished items are not rolled up (their state changes): counted from their rows.
        totals.statuses.update(repository.unfinished_by_state(session, first, last))
        totals.add_raw(session, [(since, first), (last, None)])  # the window's open edges
        percentiles = _percentiles(session, rolled.walls, [(since, first_hour), (last_hour, None)])
    tiers = []
    for tier in sorted(totals.verdicts):
        p50, p95 = percentiles.get(tier, (0.0, 0.0))
        tiers.append(
            TierStats(
                tier=tier,
                verdicts=totals.verdicts[tier],
                cached=totals.cached[tier],
                p50_s=p50,
                p95_s=p95,
                cost_units=totals.cost_tier.get(tier, 0.0),
            )
        )
    n_verdicts = sum(t.verdicts for t in tiers)
    statuses = {s: n for s, n in totals.statuses.items() if n}
    on_queue, for_people = repository.oldest_waiting(session)
    oldest = min((t for t in (on_queue, for_people) if t is not None), default=None)
    reviews = repository.review_times(session, since)
    if reviews:  # people's time: from the task's opening to its answer, not the verdict's wall
        for stats in tiers:
            if stats.tier == HUMAN_TIER:
                stats.review_p50_s = repository.percentile(reviews, 0.5)
                stats.review_p95_s = repository.percentile(reviews, 0.95)
    return Overview(
        window=window,
        since=since,
        now=now,
        items=sum(statuses.values()),
        bin_minutes=bin_width // rollups.MINUTE,
        items_per_minute=[
            KindRate(minute=at, kind=kind, items=n)
            for (at, kind), n in sorted(totals.series.items())
        ],
        rewards_by_status=dict(sorted(statuses.items())),
        tiers=tiers,
        cache_hit_rate=(sum(t.cached for t in tiers) / n_verdicts) if n_verdicts else None,
        ladder=_ladder(totals),
        cost_by_principal=dict(sorted(totals.cost_principal.items())),
        total_cost_units=sum(totals.cost_tier.values()),
        queues=queues(broker_url),
        oldest_waiting_s=(now - oldest).total_seconds() if oldest is not None else None,
        oldest_waiting_for=(
            None if oldest is None else "people" if oldest == for_people else "tier queue"
        ),
    )


def _percentiles(
    session: Session,
    buckets: dict[str, list[tuple[int, int]]],
    raw_ranges: list[repository.Range],
) -> dict[str, tuple[float, float]]:
    """Tier -> (p50, p95) of live verdict walls: histogram buckets of whole rolled hours merged
    with the walls of the ranges around them, counted per bucket by the database (the result
    is within half a bucket anyway); exact where no hour is rolled."""
    ranges = [(start, end) for start, end in raw_ranges if end is None or start < end]
    if not buckets:
        return repository.duration_percentiles(session, ranges)
    values: dict[str, Counter[float]] = {}
    for tier, rows in buckets.items():
        counts = values.setdefault(tier, Counter())
        for bucket, n in rows:
            counts[histogram.value_of(bucket)] += n
    for tier, bucket, n in repository.live_wall_buckets(session, ranges):
        values.setdefault(tier, Counter())[histogram.value_of(bucket)] += n
    return {
        tier: (
            histogram.percentile(counts.items(), 0.5),
            histogram.percentile(counts.items(), 0.95),
        )
        for tier, counts in values.items()
    }


def search_jobs(session: Session, query: JobQuery) -> list[JobRow]:
    """Jobs matching the operator's filters, newest first."""
    found = repository.search_jobs(
        session,
        principal=query.principal,
        policy=query.policy,
        status=query.status,
        since=query.since,
        until=query.until,
        limit=query.limit,
    )
    return [_row(job, cost, errors) for job, cost, errors in found]


def _row(job: Job, cost: float, errors: int) -> JobRow:
    return JobRow(
        id=job.id,
        created_at=job.created_at,
        finished_at=job.finished_at,
        principal=job.principal,
        policy=job.policy_name,
        policy_version=job.policy_version,
        status=job.status,
        n_items=job.n_items,
        n_done=job.n_done,
        cost_units=cost,
        infra_errors=errors,
    )


def job_paths(session: Session, job_id: str) -> JobPaths:
    """Each item of a job with its path up the ladder (verdicts in order) and its costs; a
    trajectory's path is its steps' and outcome's verdicts, each marked with its part, and its
    cost is theirs."""
    out = job_out(session, job_id)  # NotFoundError when there is no such job
    job = session.get(Job, job_id)
    assert job is not None
    ids = repository.item_ids_of(session, job_id)
    parts = repository.parts_of(session, job_id)
    costs = repository.job_costs(session, job_id)
    per_item: dict[str, float] = defaultdict(float)
    for (cost_item, _), units in costs.items():
        per_item[cost_item] += units

    def rungs(item_id: str, verdicts: Sequence[StoredVerdict], part: str | None) -> list[Rung]:
        return [
            Rung(
                tier=v.tier,
                status=v.status,
                score=v.score,
                wall_s=v.cost.wall_s,
                cached=v.cached,
                cost_units=costs.get((item_id, v.tier), 0.0),
                reason=v.reason,
                part=part,
            )
            for v in verdicts
        ]

    items: list[ItemPath] = []
    for item in out.items:
        item_id = ids.get(item.index, "")
        path = rungs(item_id, item.verdicts, None)
        cost = per_item.get(item_id, 0.0)
        steps = {s.index: s for s in item.steps or []}
        for part_id, role, index in parts.get(item_id, []):
            step = steps.get(index)
            label = f"step {index}" if role == "step" else role
            if step is not None:
                path += rungs(part_id, step.verdicts, label)
            cost += per_item.get(part_id, 0.0)
        reward = item.reward
        items.append(
            ItemPath(
                index=item.index,
                kind=item.kind,
                state=item.state,
                reward_status=reward.status.value if reward else None,
                reward_value=reward.value if reward else None,
                reason=reward.reason if reward else None,
                fidelity=reward.fidelity if reward else None,
                cost_units=cost,
                path=path,
                step_rewards=reward.step_rewards if reward and item.steps is not None else None,
                outcome_reward=reward.outcome_reward if reward else None,
            )
        )
    total = sum(costs.values())
    errors = sum(1 for i in items if i.reward_status == "infra_error")
    return JobPaths(job=_row(job, total, errors), warnings=out.warnings, items=items)


def cancel(session: Session, job_id: str, actor: str) -> Outgoing:
    """Cancel a running job for operator `actor` (audited): its unfinished items end as
    infra_error "cancelled". The caller commits, then delivers what this returns (the
    trainer's events, waiters woken)."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"no job with id {job_id!r}")
    if job.status in JOB_FINISHED:
        raise ConflictError(
            f"job {job_id} has already finished: there is nothing to cancel",
            hint="only running jobs can be cancelled",
        )
    result = cancel_job(session, job_id, f"by operator {actor}")
    audit.record_event(session, actor, "job.cancel", job_id, items=job.n_items - job.n_done)
    return stage(session, result)
