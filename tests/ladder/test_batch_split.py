"""A trainer's large batch is split into several tier tasks (worker processes share it) and
joined again in one job; repeated molecules stay in one task, so each is computed once."""

from __future__ import annotations

import re
from pathlib import Path

from rdkit import RDConfig
from support import Service, poll_job

from tiers.base import Candidate
from tiers.registry import get_tier
from verifier_service.settings import WorkerSettings


def _nci(start: int, n: int) -> list[str]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    lines = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    return lines[start : start + n]


def test_large_batch_runs_as_several_tasks_and_repeats_are_computed_once(
    live_service: Service,
) -> None:
    unique = _nci(4200, 100)  # molecules no other test sends: nothing cached yet
    # Each molecule twice, the copies far apart: 200 items, more than three tasks' worth.
    smiles = unique + unique
    assert len(smiles) > 3 * WorkerSettings().task_items  # the service runs with the default
    body = {"items": [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]}
    log = live_service.logs["worker"]
    offset = len(log.read_text(errors="replace"))
    with live_service.client() as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 202, response.text
        job = poll_job(client, response.headers["location"], timeout=120)
    assert job["status"] == "completed"
    assert job["n_done"] == len(smiles)
    assert all(item["reward"]["status"] == "scored" for item in job["items"])
    # One verdict per item, and one computed verdict per distinct molecule: the copy rode on
    # the first's work in the same task (marked cached), never computed a second time.
    verdicts = [v for item in job["items"] for v in item["verdicts"]]
    assert len(verdicts) == len(smiles)
    tier = get_tier("chem.fast")
    distinct = {
        tier.canonical_payload(Candidate(kind="molecule", payload={"smiles": s})) for s in unique
    }  # NCI lists a few molecules twice under different SMILES
    # At most one computed verdict per distinct molecule (fewer if another test of the shared
    # service computed one already): of each molecule and its copy, one rode on the other's work.
    assert 0 < sum(not v["cached"] for v in verdicts) <= len(distinct)
    for first, copy in zip(job["items"][:100], job["items"][100:], strict=True):
        assert first["reward"]["value"] == copy["reward"]["value"]
        assert sum(not v["cached"] for v in first["verdicts"] + copy["verdicts"]) <= 1, copy
    # The chem.fast work went out as several tasks, not one.
    received = re.findall(
        r"Task tier\.chem_fast\.verify\[[0-9a-f-]+\] received",
        log.read_text(errors="replace")[offset:],
    )
    assert len(received) >= 3, received
