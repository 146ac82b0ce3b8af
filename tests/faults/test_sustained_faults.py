"""Faults under sustained load: trainers keep sending GRPO-shaped batches while a worker of each
queue family is SIGKILLed and started again. Every item ends with exactly one final reward, one
verdict per tier it climbed to and one cost-ledger charge per verdict; no job stays running.

This is the short form CI runs (about ten seconds of load, the fast and sim families);
`bench/bench_faults.py` runs the long form with more trainers, longer load, every family and the
broker and database restarts, and prints the counts.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import RedisServer, Service, free_port, poll_job, start_service
from test_faults import molecules, nci_smiles, post_until_accepted

POLICY = {
    "name": "sustained-faults",
    "ladders": {
        "molecule": [
            {"tier": "chem.fast"},
            {
                "tier": "chem.surrogate",
                # About one molecule in six climbs: enough tier.sim work to be in flight when
                # its worker is killed, little enough for two slow cores.
                "gate": "verdicts['chem.fast'].status == 'passed'"
                " && verdicts['chem.fast'].components.qed > 0.7",
                "config": {"xtb": False},
            },
        ],
        "json": [{"tier": "schema"}],
    },
    "reward": {
        "molecule": {
            "components": [{"name": "qed", "tier": "chem.fast", "component": "qed"}],
            "hard_gates": [
                {"when": "verdicts['chem.fast'].status == 'passed'", "reason": "invalid molecule"}
            ],
        },
    },
}
TOOL_SCHEMA = {"type": "object", "required": ["tool", "args"]}


@pytest.fixture
def two_families(tmp_path: Path, own_pg_url: str) -> Iterator[Service]:
    broker = RedisServer(free_port(), tmp_path)
    broker.start()
    service = start_service(
        tmp_path,
        "ladder,tier.fast,callbacks",
        VERIFIER_DATABASE__URL=own_pg_url,
        VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0",
        VERIFIER_WORKER__SWEEP_S="1",
    )
    service.start_worker("sim", "tier.sim")
    yield service
    service.stop_all()
    broker.stop()


class Trainers:
    """Threads that post batches (with Idempotency-Keys, riding out 503s) until stopped."""

    def __init__(self, service: Service, n: int) -> None:
        self.service = service
        self.locations: list[str] = []
        self.items = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pool = nci_smiles(1200, offset=3500)
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]

    def _batch(self, rng: random.Random) -> dict[str, Any]:
        size = rng.randint(8, 24)
        smiles = rng.sample(self._pool, size)
        items = molecules(smiles)
        items += [
            {
                "kind": "json",
                "payload": {"tool": "search", "args": {"q": uuid.uuid4().hex}},
                "reference": {"schema": TOOL_SCHEMA},
            }
            for _ in range(rng.randint(0, 3))
        ]
        return {"policy": POLICY["name"], "items": items}

    def _run(self, index: int) -> None:
        rng = random.Random(index)
        with self.service.client(timeout=60) as client:
            while not self._stop.is_set():
                body = self._batch(rng)
                response = post_until_accepted(client, body, uuid.uuid4().hex)
                with self._lock:
                    self.locations.append(response.headers["location"])
                    self.items += len(body["items"])
                time.sleep(0.5)

    def __enter__(self) -> Trainers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)


def final_counts(client: httpx.Client, locations: list[str]) -> Counter[str]:
    """Poll every job to the end and count what a trainer would check; assert nothing doubled."""
    counts: Counter[str] = Counter()
    for location in locations:
        job = poll_job(client, location, timeout=180)
        stuck = [(i["state"], [v["tier"] for v in i["verdicts"]]) for i in job["items"]]
        stuck = [s for s in stuck if s[0] != "done"]
        assert job["status"] == "completed", f"{location} left {job['status']}: {stuck}"
        verdicts = 0
        for item in job["items"]:
            tiers = [v["tier"] for v in item["verdicts"]]
            assert len(tiers) == len(set(tiers)), f"duplicate verdicts: {item}"
            counts[item["reward"]["status"]] += 1
            if item["reward"]["status"] != "scored":
                counts[f"{item['reward']['status']}: {item['reward'].get('reason')} {tiers}"] += 1
            verdicts += len(tiers)
        cost = client.get(f"{location}/cost").json()
        charged = sum(t["calls"] + t["cache_hits"] for t in cost["tiers"].values())
        assert charged == verdicts, (location, cost)
        counts["verdicts"] += verdicts
        counts["jobs"] += 1
    return counts


def test_workers_of_each_family_killed_under_load_lose_and_double_nothing(
    two_families: Service,
) -> None:
    service = two_families
    with service.client() as client:
        assert client.post("/v1/policies", json={"document": POLICY}).status_code == 201
    with Trainers(service, n=2) as trainers:
        # Each worker is killed while it holds work (a task received, not yet acknowledged).
        service.wait_for_log("worker", "received")
        service.stop("worker", sig=9)  # the fast family: ladder, tier.fast, callbacks
        service.start_worker("worker", "ladder,tier.fast,callbacks")
        service.wait_for_log("sim", "received")
        service.stop("sim", sig=9)
        service.start_worker("sim", "tier.sim")
        time.sleep(2)
    with service.client(timeout=60) as client:
        counts = final_counts(client, trainers.locations)
    # Every item has exactly one final reward and it is a score: a kill is our fault, and the
    # work it interrupted ran again instead of ending as an error.
    assert counts["jobs"] == len(trainers.locations) >= 6
    assert counts["scored"] == trainers.items, counts
    assert counts["verdicts"] > trainers.items  # some molecules climbed to chem.surrogate
    assert "Internal Server Error" not in service.log_tail("api", 1_000_000)
