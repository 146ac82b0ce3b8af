"""Trainers sending overlapping cached molecules at once count hits on the same cache entries:
on PostgreSQL no transaction may fail on a deadlock (a 503 for its request), and no hit may be
lost."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.orm import Session

from verifier_service.core.db import make_engine, utcnow
from verifier_service.ladder.models import VerdictCacheEntry
from verifier_service.ladder.repository import count_cache_hits

KEYS = [f"key-{i:03d}" for i in range(40)]


@pytest.fixture
def engine(own_pg_url: str) -> Iterator[Engine]:
    engine = make_engine(own_pg_url)
    VerdictCacheEntry.__table__.create(engine)
    with engine.begin() as conn:
        row = {"tier": "chem.fast", "tier_version": "1", "verdict": {}, "hits": 0}
        conn.execute(
            insert(VerdictCacheEntry.__table__),
            [{**row, "key": key, "created_at": utcnow()} for key in KEYS],
        )
    yield engine
    engine.dispose()


def test_overlapping_hit_counts_neither_deadlock_nor_get_lost(engine: Engine) -> None:
    errors: list[BaseException] = []
    counted = [0, 0]
    start = threading.Barrier(2)

    def trainer(index: int) -> None:
        rng = random.Random(index)
        start.wait()
        for _ in range(150):
            # Keys in different orders, with counts that split them over several statements.
            hits = {key: rng.randint(1, 3) for key in rng.sample(KEYS, 30)}
            try:
                with Session(engine) as session, session.begin():
                    count_cache_hits(session, hits)
                counted[index] += sum(hits.values())
            except Exception as exc:  # a deadlock aborts the transaction
                errors.append(exc)

    threads = [threading.Thread(target=trainer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not errors, f"{len(errors)} transactions failed, e.g. {errors[0]!r}"
    with Session(engine) as session:
        total = session.scalar(select(func.sum(VerdictCacheEntry.hits)))
    assert total == sum(counted)
