"""The overview read from rollups says exactly what it says from the raw rows: on PostgreSQL
and SQLite, over a week of jobs stored at their own times, after items finish and rewards
change behind rolled-up minutes."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session
from support import fresh_database

from verifier_service.console.overview import rollups, service
from verifier_service.console.overview.schemas import Overview, Window
from verifier_service.core.db import make_engine, utcnow
from verifier_service.core.migrate import upgrade
from verifier_service.events.models import JobEvent
from verifier_service.ladder.models import CostLedgerEntry, Item, Job, VerdictRecord

TIERS = [("chem.fast", 0.001), ("chem.surrogate", 0.1), ("human", 1.0)]


def make_job(
    session: Session, at: datetime, rng: random.Random, *, state: str = "done"
) -> list[Item]:
    """A job stored at `at` whose items climbed one to three tiers, each verdict and ledger
    entry stamped a little later; its items `state`."""
    principal = rng.choice(["trainer-a", "trainer-b", "trainer-c"])
    policy = rng.choice(["default", "drug-likeness"])
    n = rng.randint(1, 4)
    job = Job(created_at=at, principal=principal, request_hash="h", policy_name=policy,
              policy_version=1, n_items=n, n_done=n if state == "done" else 0,
              status="completed" if state == "done" else "running")  # fmt: skip
    session.add(job)
    session.flush()
    items = []
    for index in range(n):
        kind = rng.choice(["molecule", "json"])
        status = rng.choice(["scored", "scored", "scored", "infra_error", "pending"])
        reward = {"status": status, "value": 0.5} if state == "done" else None
        item = Item(job_id=job.id, index=index, kind=kind, candidate={}, role="item",
                    content_hash=uuid.uuid4().hex, state=state, step=0, reward=reward)  # fmt: skip
        session.add(item)
        session.flush()
        items.append(item)
        stamp = at
        for step, (tier, cost) in enumerate(TIERS[: rng.randint(1, 3)]):
            stamp = stamp + timedelta(seconds=rng.uniform(0.01, 90))
            cached = rng.random() < 0.2
            session.add(
                VerdictRecord(item_id=item.id, step=step, tier=tier, tier_version="1",
                              status="passed", score=rng.random(), components={},
                              wall_s=rng.lognormvariate(-3, 1.5), cached=cached,
                              created_at=stamp)
            )  # fmt: skip
            session.add(
                CostLedgerEntry(job_id=job.id, item_id=item.id, step=step, tier=tier,
                                principal=principal, policy_name=policy, policy_version=1,
                                cost_units=0.0 if cached else cost, cached=cached,
                                created_at=stamp)
            )  # fmt: skip
    return items


def _week(session: Session, now: datetime, jobs: int, seed: int) -> list[Item]:
    """Jobs spread over the last week (away from the windows' edges), some unfinished."""
    rng = random.Random(seed)
    items = []
    for _ in range(jobs):
        at = now - timedelta(seconds=rng.uniform(15, 7 * 86400 - 900))
        items += make_job(session, at, rng, state="done" if rng.random() < 0.9 else "running")
    session.commit()
    return items


@pytest.fixture(params=["postgresql", "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    """A migrated database of either kind, and a session on it."""
    if request.param == "postgresql":
        with fresh_database() as url:
            yield from _session(url)
    else:
        yield from _session(f"sqlite:///{tmp_path / 'rollups.db'}")


def _session(url: str) -> Iterator[Session]:
    upgrade(url)
    engine = make_engine(url)
    try:
        with Session(engine, expire_on_commit=False) as session:
            yield session
    finally:
        engine.dispose()


def _numbers(overview: Overview) -> dict[str, Any]:
    """The overview's numbers that must not move at all, and the durations apart."""
    body = overview.model_dump(exclude={"since", "now", "queues", "oldest_waiting_s"})
    for tier in body["tiers"]:
        tier["cost_units"] = round(tier["cost_units"], 9)  # float sums in another order
        del tier["p50_s"], tier["p95_s"]
    body["total_cost_units"] = round(body["total_cost_units"], 9)
    body["cost_by_principal"] = {k: round(v, 9) for k, v in body["cost_by_principal"].items()}
    return body


def _both(session: Session, window: Window, redis_url: str) -> tuple[Overview, Overview]:
    rolled = service.overview(session, window, redis_url, use_rollups=True)
    raw = service.overview(session, window, redis_url, use_rollups=False)
    session.rollback()
    return rolled, raw


def _refresh(session: Session) -> None:
    assert rollups.refresh(session, utcnow())
    session.commit()


def test_rollups_give_the_raw_numbers(db: Session, redis_url: str) -> None:
    now = utcnow()
    items = _week(db, now, jobs=400, seed=7)
    _refresh(db)
    state = rollups.state(db)
    assert state is not None
    assert state.closed_until >= now - timedelta(minutes=2)  # everything but the open tail
    for window in Window:
        rolled, raw = _both(db, window, redis_url)
        assert raw.items > 0
        assert _numbers(rolled) == _numbers(raw), window
        # Whole bins: a minute over an hour, 5 minutes over a day, an hour over a week.
        assert {r.minute.minute % rolled.bin_minutes for r in rolled.items_per_minute} == {0}
        assert rolled.bin_minutes == {"1h": 1, "24h": 5, "7d": 60}[window.value]
        for a, b in zip(rolled.tiers, raw.tiers, strict=True):
            # Durations from histogram buckets: each within half a bucket (about 2.5 %).
            assert a.p50_s == pytest.approx(b.p50_s, rel=0.03), (window, a.tier)
            assert a.p95_s == pytest.approx(b.p95_s, rel=0.03), (window, a.tier)

    # Behind the watermark: a running item finishes, a finished one's reward is revised (a
    # late human answer). Both write their job events, as the ladder does; the rollups follow.
    running = next(i for i in items if i.state == "running")
    revised = next(i for i in items if i.state == "done" and i.reward["status"] == "pending")
    for item, status in ((running, "scored"), (revised, "infra_error")):
        db.execute(
            update(Item).where(Item.id == item.id)
            .values(state="done", reward={"status": status, "value": 0.0})
        )  # fmt: skip
        db.add(JobEvent(job_id=item.job_id, principal="p", kind="item.revised", item_index=0,
                        revision=2, data={}, created_at=utcnow()))  # fmt: skip
    db.commit()
    before, _ = _both(db, Window.week, redis_url)
    _refresh(db)
    rolled, raw = _both(db, Window.week, redis_url)
    assert _numbers(rolled) == _numbers(raw)
    assert rolled.rewards_by_status["infra_error"] == before.rewards_by_status["infra_error"] + 1


def test_the_open_tail_is_read_raw(db: Session, redis_url: str) -> None:
    """Rows of the last minute are not rolled up yet, and an overview counts them anyway."""
    now = utcnow()
    _week(db, now, jobs=50, seed=3)
    _refresh(db)
    make_job(db, utcnow(), random.Random(1))
    db.commit()
    rolled, raw = _both(db, Window.hour, redis_url)
    assert _numbers(rolled) == _numbers(raw)
    # Exact durations where every verdict is raw: the last hour is never rolled up whole.
    assert [(t.p50_s, t.p95_s) for t in rolled.tiers] == [(t.p50_s, t.p95_s) for t in raw.tiers]


def test_a_late_commit_is_counted(db: Session, redis_url: str) -> None:
    """A job (its items, verdicts and costs) committed minutes after its rows' timestamps (a
    long transaction, a worker whose clock is behind) lands in minutes a refresh already rolled
    up: the next refresh that closes a minute counts it."""
    now = utcnow()
    _week(db, now, jobs=60, seed=5)
    assert rollups.refresh(db, now - timedelta(minutes=3))  # the last refresh, 3 minutes ago
    db.commit()
    state = rollups.state(db)
    assert state is not None
    late_at = now - timedelta(minutes=6)
    assert late_at < state.closed_until - rollups.MINUTE  # behind the watermark
    late = make_job(db, late_at, random.Random(11))
    db.commit()
    _refresh(db)
    for window in Window:
        rolled, raw = _both(db, window, redis_url)
        assert _numbers(rolled) == _numbers(raw), window
    rolled, _ = _both(db, Window.hour, redis_url)
    kinds = [item.kind for item in late]
    late_bin = rollups.floor_to(late_at, rollups.MINUTE)
    shown = {r.kind: r.items for r in rolled.items_per_minute if r.minute == late_bin}
    assert sum(shown.values()) >= len(kinds)
