"""Cached answers only read the verdict cache: a trainer's all-cached batch is answered while
another transaction holds every entry it needs locked (on PostgreSQL, through the real API).

Each cache hit used to add to its entry's hit count (a counter nothing read), which locked the
entries in every request: trainers sending the same molecules queued behind each other, and
before the locks were taken in key order, two of them deadlocked and one got a 503."""

from __future__ import annotations

import psycopg
from support import Service, fresh_molecules


def test_a_cached_batch_does_not_wait_on_locked_cache_entries(live_service: Service) -> None:
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in fresh_molecules(12)]
    body = {"items": items, "wait_s": 30}
    with live_service.client(timeout=60) as client:
        first = client.post("/v1/rewards", json=body)
    assert first.status_code == 200, first.text
    database = live_service.env["VERIFIER_DATABASE__URL"].replace(
        "postgresql+psycopg", "postgresql"
    )

    with psycopg.connect(database) as holder:  # another transaction, open throughout
        locked = holder.execute(
            "SELECT key FROM verdict_cache WHERE key IN "
            "(SELECT cache_key FROM verdicts v JOIN items i ON i.id = v.item_id "
            " WHERE i.job_id = %s) FOR UPDATE",
            (first.json()["id"],),
        ).fetchall()
        assert len(locked) == len(items)
        with live_service.client(timeout=10) as client:
            again = client.post("/v1/rewards", json=body)
        holder.rollback()

    assert again.status_code == 200, again.text
    job = again.json()
    assert job["status"] == "completed"
    assert all(i["verdicts"][0]["cached"] for i in job["items"])
    before = [(i["reward"]["value"], i["reward"]["status"]) for i in first.json()["items"]]
    assert [(i["reward"]["value"], i["reward"]["status"]) for i in job["items"]] == before
