"""A batch whose every item is cached, through the real API, worker and PostgreSQL: answered in
the request that sent it, with the same rewards, verdicts, events and cost rows a trainer and an
operator see for any batch (the cache path writes its rows in bulk)."""

from __future__ import annotations

from typing import Any

from support import Service, fresh_molecules


def _post(service: Service, items: list[dict[str, Any]]) -> Any:
    with service.client(timeout=120) as client:
        return client.post("/v1/rewards", json={"items": items, "wait_s": 60})


def test_all_cached_batch_matches_the_first_and_keeps_every_record(live_service: Service) -> None:
    # two invalid ones: low rewards, cached too
    smiles = [*fresh_molecules(40), "C1CC", "not a molecule"]
    smiles.append(smiles[0])  # a duplicate inside the batch
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    first = _post(live_service, items)
    assert first.status_code == 200, first.text
    with live_service.client() as client:
        since = client.get("/v1/rewards/changes", params={"since": "now"}).json()["next"]

    again = _post(live_service, items)

    assert again.status_code == 200, again.text  # finished within the request itself
    job, before = again.json(), first.json()
    assert job["status"] == "completed"
    assert job["n_done"] == job["n_items"] == len(items)
    assert [i["index"] for i in job["items"]] == list(range(len(items)))
    for old, new in zip(before["items"], job["items"], strict=True):
        assert new["state"] == "done"
        assert new["reward"]["value"] == old["reward"]["value"]
        assert new["reward"]["status"] == old["reward"]["status"] == "scored"
        assert new["reward"]["components"] == old["reward"]["components"]
        assert new["reward"]["reason"] == old["reward"]["reason"]
        assert new["reward"]["revision"] == 1
        assert new["reward"]["cost"]["cost_units"] == 0.0  # nothing computed
        (verdict,) = new["verdicts"]
        assert verdict["cached"] is True
        assert verdict["step"] == 0
        assert verdict["tier"] == "chem.fast"
        assert verdict["components"] == old["verdicts"][0]["components"]
        assert new["reward"]["provenance"] == [verdict["id"]]
    invalid = job["items"][len(smiles) - 2]
    assert invalid["reward"]["value"] == 0.0
    assert "invalid molecule" in invalid["reward"]["reason"]
    ids = {v["id"] for i in job["items"] for v in i["verdicts"]}
    assert len(ids) == len(items)  # one verdict row per item and step, ids of their own

    with live_service.client() as client:
        cost = client.get(f"/v1/jobs/{job['id']}/cost").json()
        again_read = client.get(f"/v1/jobs/{job['id']}").json()
        changes = client.get("/v1/rewards/changes", params={"since": since, "limit": 1000})
    # The stored job reads back as the request answered it.
    assert again_read["items"] == job["items"]
    # One ledger row per item, each a cache hit that cost nothing.
    assert cost["tiers"]["chem.fast"]["cache_hits"] == len(items)
    assert cost["tiers"]["chem.fast"]["calls"] == 0
    assert cost["cost_units"] == 0.0
    # One item.finished event per item, carrying the reward the job shows, in index order.
    mine = [c for c in changes.json()["changes"] if c["job_id"] == job["id"]]
    assert [c["index"] for c in mine] == list(range(len(items)))
    assert all(c["type"] == "item.finished" and c["revision"] == 1 for c in mine)
    assert [c["reward"] for c in mine] == [i["reward"] for i in job["items"]]
    cursors = [int(c["cursor"]) for c in mine]
    assert cursors == sorted(cursors)
