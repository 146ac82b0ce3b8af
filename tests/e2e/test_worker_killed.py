"""A worker killed mid-task (SIGKILL): the job still completes once a worker is back."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from rdkit import RDConfig
from support import Service, poll_job


def _nci_smiles(n: int) -> list[str]:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_5K.smi"
    return [line.split()[0] for line in path.read_text().splitlines()[:n] if line.strip()]


def test_job_completes_after_worker_is_killed_mid_task(live_service: Service) -> None:
    smiles = _nci_smiles(1500)  # one chem.fast batch that takes a few seconds
    body = {"items": [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]}
    log = live_service.logs["worker"]
    offset = len(log.read_text(errors="replace"))
    with live_service.client() as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 202
        job_id = response.json()["id"]

        deadline = time.monotonic() + 30
        while "tier.chem_fast.verify" not in log.read_text(errors="replace")[offset:]:
            assert time.monotonic() < deadline, "the worker never took the task"
            time.sleep(0.05)
        time.sleep(0.5)  # now inside verify_batch
        live_service.stop("worker", sig=signal.SIGKILL)
        assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "running"

        live_service.start_worker("worker", "ladder,tier.fast,callbacks,review")
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=90)
    assert job["status"] == "completed", live_service.log_tail("worker")
    assert job["n_done"] == len(smiles)
    rewards = [item["reward"] for item in job["items"]]
    assert all(r["status"] == "scored" for r in rewards)
    # Each item was verified exactly once in the stored record, despite the redelivery.
    assert all(len(item["verdicts"]) == 1 for item in job["items"])
