"""The partner client (`verifier_service.client.OraclePartner`) against a live service (API, a
Celery worker, its own PostgreSQL database and Redis): it claims a batch under a lease, keeps
the lease with heartbeats while another client finds nothing to claim, posts results (a
duplicate counts once, a different result for the same item is refused), loses a lease it did
not keep, and checks the signature of a batch the service really pushed (a forged one, a
tampered body and a stale timestamp are refused)."""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lab_sim import Lab, hidden_logp
from support import Service, free_port, fresh_molecules, poll_job, private_backends, start_service

from verifier_service.client import (
    BatchItem,
    Claim,
    ConflictError,
    InvalidRequestError,
    LeaseLostError,
    MeasurementFailed,
    NotFoundError,
    OraclePartner,
    WebhookVerificationError,
)

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
SCHEMA = {"logp": {"unit": "log units", "min": -30, "max": 30}}
SCORE = {"field": "logp", "low": -10.0, "high": 10.0}
LEASE_S = 2.0


class Recorder(Lab):
    """A push partner that keeps every push as it came (headers and raw body), measuring
    nothing: the test checks the signatures with the partner client."""

    def __init__(self) -> None:
        self.raw: list[tuple[dict[str, str], bytes]] = []
        super().__init__(SECRET, port=free_port())

    def receive(self, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        self.raw.append((headers, body))
        return 202, "stored"


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.close()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, recorder: Recorder) -> Iterator[Service]:
    common = {"result_schema": SCHEMA, "score": SCORE, "turnaround_s": 60, "gather_s": 0.2}
    definitions = {
        "plate": {**common, "mode": "pull", "capacity": 1000, "lease_s": LEASE_S,
                  "on_failure": "error"},
        "lab": {**common, "mode": "push", "url": recorder.url, "secret": SECRET,
                "capacity": 1000},
    }  # fmt: skip
    with private_backends("partner") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("partner"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
            VERIFIER_ORACLES__DEFINITIONS=json.dumps(definitions),
            VERIFIER_API__OUTBOX_SWEEP_S="0.5",
            VERIFIER_API__OUTBOX_GRACE_S="0.5",
        )
        try:
            with service.client() as operator:
                for oracle in ("plate", "lab"):
                    ladder = [
                        {"tier": "chem.fast"},
                        {"tier": "oracle", "config": {"oracle": oracle}},
                    ]
                    document = {"name": f"with-{oracle}", "ladders": {"molecule": ladder}}
                    made = operator.post("/v1/policies", json={"document": document})
                    assert made.status_code == 201, made.text
            yield service
        finally:
            service.stop_all()


@pytest.fixture(scope="module")
def plate_key(service: Service) -> str:
    return service.create_key("plate", "oracle")


def _submit(service: Service, policy: str, smiles: list[str]) -> str:
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    with service.client() as client:
        posted = client.post("/v1/rewards", json={"policy": policy, "items": items,
                                                   "deadline_s": 120})  # fmt: skip
    assert posted.status_code == 202, posted.text
    job_id: str = posted.json()["id"]
    return job_id


def _claim(partner: OraclePartner, timeout: float = 30) -> Claim:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        claim = partner.claim()
        if claim is not None:
            return claim
        time.sleep(0.2)
    raise AssertionError("no batch to claim")


def _expected(smiles: str) -> float:
    return min(1.0, max(0.0, (hidden_logp(smiles) + 10.0) / 20.0))


def test_claim_heartbeat_post_and_a_duplicate_post(service: Service, plate_key: str) -> None:
    molecules = fresh_molecules(3)
    job_id = _submit(service, "with-plate", molecules)
    with OraclePartner("plate", service.base_url, api_key=plate_key) as partner:
        claim = _claim(partner)
        assert sorted(i.payload["smiles"] for i in claim.batch.items) == sorted(molecules)
        assert claim.batch.result_schema == {"logp": {**SCHEMA["logp"], "required": True}}
        first_expiry = claim.lease_expires_at
        time.sleep(0.3)
        renewed = partner.heartbeat(claim)
        assert renewed > first_expiry
        assert claim.lease_expires_at == renewed
        results: list[dict[str, Any]] = [
            {"item_id": i.item_id, "values": {"logp": hidden_logp(i.payload["smiles"])}}
            for i in claim.batch.items
        ]
        posted = partner.post_results(results)
        assert (posted.accepted, posted.duplicates) == (3, 0)
        again = partner.post_results(results)  # an answer lost on the way: posted again
        assert (again.accepted, again.duplicates) == (0, 3)
        changed = [{**results[0], "values": {"logp": results[0]["values"]["logp"] + 1.0}}]
        with pytest.raises(ConflictError) as refused:
            partner.post_results(changed)
        assert refused.value.error == "result_conflict"
        with pytest.raises(LeaseLostError):  # the batch is done: no lease holds it
            partner.heartbeat(claim)
        assert partner.claim() is None
    with service.client() as client:
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
    assert job["status"] == "completed", job
    for smiles, item in zip(molecules, job["items"], strict=True):  # in the order sent
        reward = item["reward"]
        assert (reward["fidelity"], reward["revision"]) == ("oracle", 1)
        assert reward["value"] == pytest.approx(_expected(smiles), abs=1e-6)


def test_unknown_items_and_values_off_the_schema_are_refused(
    service: Service, plate_key: str
) -> None:
    with OraclePartner("plate", service.base_url, api_key=plate_key) as partner:
        with pytest.raises(NotFoundError) as unknown:
            partner.post_results([{"item_id": "oi_nosuchitem", "values": {"logp": 1.0}}])
        assert unknown.value.error == "unknown_item"
        job_id = _submit(service, "with-plate", fresh_molecules(1))
        claim = _claim(partner)
        [item] = claim.batch.items
        with pytest.raises(InvalidRequestError) as off:
            partner.post_results([{"item_id": item.item_id, "values": {"logp": 99}}])
        assert "results[0].values.logp" in off.value.message
        assert partner.post_results([{"item_id": item.item_id, "error": "spilled"}]).accepted == 1
    with service.client() as client:
        reward = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)["items"][0]["reward"]
    assert reward["status"] == "infra_error"
    assert "measurement_failed" in reward["reason"]
    assert "spilled" in reward["reason"]


def test_a_kept_lease_holds_the_batch_and_a_lease_not_kept_is_lost(
    service: Service, plate_key: str
) -> None:
    _submit(service, "with-plate", fresh_molecules(2))
    with (
        OraclePartner("plate", service.base_url, api_key=plate_key) as first,
        OraclePartner("plate", service.base_url, api_key=plate_key) as second,
    ):
        claim = _claim(first)
        with first.keep_lease(claim) as lost:
            time.sleep(LEASE_S * 2.5)  # measuring, longer than the lease
            assert second.claim() is None  # the heartbeats keep it
        assert not lost.is_set()
        time.sleep(LEASE_S + 0.5)  # the first client stops beating (it died)
        again = _claim(second, timeout=10)
        assert again.batch.batch_id == claim.batch.batch_id
        with pytest.raises(LeaseLostError) as gone:
            first.heartbeat(claim)
        assert gone.value.status_code == 409
        served = second.post_results(
            [{"item_id": i.item_id, "values": {"logp": 0.5}} for i in again.batch.items]
        )
        assert served.accepted == 2


def test_serve_one_measures_a_batch_and_reports_a_failed_measurement(
    service: Service, plate_key: str
) -> None:
    good, bad = fresh_molecules(2)
    job_id = _submit(service, "with-plate", [good, bad])

    def measure(item: BatchItem) -> dict[str, Any]:
        if item.payload["smiles"] == bad:
            raise MeasurementFailed("crystallised in the tube")
        return {"logp": hidden_logp(item.payload["smiles"])}

    with OraclePartner("plate", service.base_url, api_key=plate_key) as partner:
        deadline = time.monotonic() + 30
        posted = partner.serve_one(measure)
        while posted is None and time.monotonic() < deadline:
            time.sleep(0.2)
            posted = partner.serve_one(measure)
        assert posted is not None
        assert (posted.accepted, posted.duplicates) == (2, 0)
        assert partner.serve(measure, once=True) == 0
    with service.client() as client:
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
    ok, failed = (i["reward"] for i in job["items"])
    assert ok["value"] == pytest.approx(_expected(good), abs=1e-6)
    assert failed["status"] == "infra_error"
    assert "crystallised in the tube" in failed["reason"]


def test_verify_signature_takes_a_real_push_and_refuses_a_forged_one(
    service: Service, recorder: Recorder
) -> None:
    molecules = fresh_molecules(2)
    _submit(service, "with-lab", molecules)
    deadline = time.monotonic() + 30
    while not recorder.raw and time.monotonic() < deadline:
        time.sleep(0.2)
    headers, body = recorder.raw[-1]
    partner = OraclePartner("lab", service.base_url, secret=SECRET)
    batch = partner.verify_signature(headers, body)
    assert batch.oracle == "lab"
    assert batch.batch_id == headers["webhook-id"]
    assert sorted(i.payload["smiles"] for i in batch.items) == sorted(molecules)
    forged = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        partner.verify_signature(headers, body, secret=forged)
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        partner.verify_signature(headers, body.replace(b'"lab"', b'"lab2"'))
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        partner.verify_signature({**headers, "webhook-id": "ob_other"}, body)
    with pytest.raises(WebhookVerificationError, match="too far from now"):
        partner.verify_signature(headers, body, tolerance_s=0)  # a replay, much later
