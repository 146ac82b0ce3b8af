"""Oracles through a live service (API, a Celery worker, its own PostgreSQL database and Redis)
and a simulated lab that is a real HTTP service: pushed batches come back measured (the lab's
hidden property becomes the reward), a lab that is down gets its batch once it is back with
every attempt recorded, results posted twice count once, results for unknown or foreign items
and a forged push are refused, a pull client that dies holding a lease gives its batch back,
more items than capacity leave the lowest valued with their fallback, and a result after the
job's deadline revises the fallback reward (revision 2)."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from lab_sim import Lab, hidden_logp, market_pnl, pnl_of, results_for
from support import (
    REPO,
    Service,
    free_port,
    fresh_molecules,
    poll_job,
    private_backends,
    start_service,
    until,
)

from verifier_service.events.webhooks import signature


def signed_headers(
    secret: str, msg_id: str, body: bytes, timestamp: int | None = None
) -> dict[str, str]:
    """A push's webhook-id, -timestamp and -signature headers, signed as the service signs."""
    at = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(at),
        "webhook-signature": signature(secret, msg_id, at, body),
    }


SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
SCHEMA = {"logp": {"unit": "log units", "min": -30, "max": 30}}
SCORE = {"field": "logp", "low": -10.0, "high": 10.0}


ACTION = {
    "type": "object",
    "required": ["side", "qty", "at", "window"],
    "properties": {"side": {"enum": ["buy", "sell"]}, "qty": {"type": "integer", "minimum": 1},
                   "at": {"type": "integer"}, "window": {"type": "integer", "minimum": 1}},
}  # fmt: skip


def _definitions(lab_url: str, market_url: str) -> dict[str, Any]:
    common = {"result_schema": SCHEMA, "score": SCORE, "turnaround_s": 60, "price_per_item": 40}
    return {
        "lab": {
            **common,
            "mode": "push",
            "url": lab_url,
            "secret": SECRET,
            "capacity": 1000,
            "batch_size": 8,
            "retry_first_s": 0.5,
            "retry_max_s": 1,
            "retry_for_s": 60,
        },
        "plate": {**common, "mode": "pull", "capacity": 1000, "lease_s": 2},
        "scarce": {**common, "mode": "pull", "capacity": 2, "period_s": 864000, "gather_s": 1.5},
        "market": {
            "mode": "push",
            "url": market_url,
            "secret": SECRET,
            "capacity": 1000,
            "result_schema": {"pnl": {"unit": "USD"}},
            "turnaround_s": 60,
            "score": {"field": "pnl", "low": -100.0, "high": 100.0},
        },
        # A partner that never answers (nothing listens on its port).
        "gone": {
            **common,
            "mode": "push",
            "url": f"http://127.0.0.1:{free_port()}/batches",
            "secret": SECRET,
            "retry_first_s": 0.3,
            "retry_max_s": 0.5,
            "retry_for_s": 2,
        },
    }


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab(SECRET, port=free_port())
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def market() -> Iterator[Lab]:
    market = Lab(SECRET, port=free_port(), delay_s=1.0, measure=pnl_of)  # the window closes
    yield market
    market.close()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, lab: Lab, market: Lab) -> Iterator[Service]:
    with private_backends("oracle") as (pg_url, broker_url):
        service = start_service(
            tmp_path_factory.mktemp("oracle"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=broker_url,
            VERIFIER_ORACLES__DEFINITIONS=json.dumps(_definitions(lab.url, market.url)),
            VERIFIER_API__OUTBOX_SWEEP_S="0.5",
            VERIFIER_API__OUTBOX_GRACE_S="0.5",
        )
        try:
            lab.api_base = service.base_url
            lab.api_key = service.create_key("lab", "oracle")
            market.api_base = service.base_url
            market.api_key = service.create_key("market", "oracle")
            operator = service.client()
            for oracle in ("lab", "plate", "scarce", "gone"):
                ladder = [{"tier": "chem.fast"}, {"tier": "oracle", "config": {"oracle": oracle}}]
                document = {"name": f"with-{oracle}", "ladders": {"molecule": ladder}}
                made = operator.post("/v1/policies", json={"document": document})
                assert made.status_code == 201, made.text
            ladder = [{"tier": "schema"}, {"tier": "oracle", "config": {"oracle": "market"}}]
            document = {"name": "with-market", "ladders": {"json": ladder}}
            assert operator.post("/v1/policies", json={"document": document}).status_code == 201
            document = {"name": "fast-only", "ladders": {"molecule": [{"tier": "chem.fast"}]}}
            assert operator.post("/v1/policies", json={"document": document}).status_code == 201
            yield service
        finally:
            service.stop_all()


def _submit(client: httpx.Client, policy: str, smiles: list[str], **extra: Any) -> str:
    items = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    posted = client.post("/v1/rewards", json={"policy": policy, "items": items, **extra})
    assert posted.status_code == 202, posted.text
    return str(posted.json()["id"])


def _rewards(client: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    """The job's items' rewards so far (an item not yet passed up its ladder has none)."""
    items = client.get(f"/v1/jobs/{job_id}").json()["items"]
    return [i["reward"] or {"status": None} for i in items]


def _expected(smiles: str) -> float:
    return min(1.0, max(0.0, (hidden_logp(smiles) + 10.0) / 20.0))


def test_a_pushed_batch_comes_back_measured(service: Service, lab: Lab) -> None:
    molecules = fresh_molecules(3)
    lab.delay_s = 2.0  # long enough to see the pending rewards
    with service.client() as client:
        job_id = _submit(client, "with-lab", molecules, deadline_s=120)
        pending = until(
            lambda: [r for r in _rewards(client, job_id) if r["status"] == "pending"],
            what="pending rewards",
        )
        assert "waiting for oracle lab" in pending[0]["reason"]
        lab.delay_s = 0.3
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=60)
        assert job["status"] == "completed", job
        for smiles, item in zip(molecules, job["items"], strict=True):
            reward = item["reward"]
            assert (reward["status"], reward["fidelity"], reward["revision"]) == (
                "scored",
                "oracle",
                1,
            )
            assert reward["value"] == pytest.approx(_expected(smiles), abs=1e-6)
        batch = next(b for b in lab.batches if b["items"][0]["payload"]["smiles"] in molecules)
        status = client.get(f"/v1/oracles/lab/batches/{batch['batch_id']}").json()
        assert status["state"] == "done"
        assert [a["status_code"] for a in status["attempts"]] == [202]
        assert set(status["items"].values()) == {"answered"}


def test_a_lab_that_is_down_gets_its_batch_when_it_is_back(service: Service, lab: Lab) -> None:
    molecules = fresh_molecules(2)
    lab.down = True
    try:
        with service.client() as client:
            job_id = _submit(client, "with-lab", molecules, deadline_s=120)
            until(lambda: len(lab.refused) >= 3, what="three refused pushes")
    finally:
        lab.down = False
    with service.client() as client:
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=60)
        assert job["status"] == "completed", job
        assert [i["reward"]["fidelity"] for i in job["items"]] == ["oracle", "oracle"]
        batch = next(b for b in lab.batches if b["items"][0]["payload"]["smiles"] in molecules)
        attempts = client.get(f"/v1/oracles/lab/batches/{batch['batch_id']}").json()["attempts"]
        codes = [a["status_code"] for a in attempts]
        assert codes[-1] == 202, codes
        assert len(codes) >= 4, codes
        assert set(codes[:-1]) == {503}
        assert all("HTTP 503" in a["error"] for a in attempts[:-1])


def test_results_posted_twice_count_once(service: Service, lab: Lab) -> None:
    molecules = fresh_molecules(2)
    with service.client() as client:
        job_id = _submit(client, "with-lab", molecules, deadline_s=120)
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=60)
        assert job["status"] == "completed", job
        batch = next(b for b in lab.batches if b["items"][0]["payload"]["smiles"] in molecules)
        with service.client(api_key=lab.api_key) as partner:
            again = partner.post("/v1/oracles/lab/results", json={"results": results_for(batch)})
            assert again.status_code == 200, again.text
            assert again.json() == {"accepted": 0, "duplicates": 2}
            other = results_for(batch)[:1]
            other[0]["values"]["logp"] += 1.0
            conflict = partner.post("/v1/oracles/lab/results", json={"results": other})
            assert conflict.status_code == 409, conflict.text
            assert conflict.json()["error"] == "result_conflict"
        assert [r["revision"] for r in _rewards(client, job_id)] == [1, 1]


def test_unknown_foreign_and_malformed_results_are_refused(service: Service, lab: Lab) -> None:
    molecules = fresh_molecules(1)
    plate_key = _plate_key(service)
    trainer_key = service.create_key(f"tr-{uuid.uuid4().hex[:6]}", "trainer")
    with service.client() as client:
        job_id = _submit(client, "with-lab", molecules, deadline_s=120)
        poll_job(client, f"/v1/jobs/{job_id}", timeout=60)
    batch = next(b for b in lab.batches if b["items"][0]["payload"]["smiles"] in molecules)
    item_id = batch["items"][0]["item_id"]
    with service.client(api_key=lab.api_key) as partner:
        unknown = partner.post(
            "/v1/oracles/lab/results",
            json={
                "results": [
                    {"item_id": item_id, "values": {"logp": 1.0}},
                    {"item_id": "oi_nosuchitem", "values": {"logp": 1.0}},
                ]
            },
        )
        assert unknown.status_code == 404, unknown.text
        assert (unknown.json()["error"], unknown.json()["field"]) == (
            "unknown_item",
            "results[1].item_id",
        )
        missing = partner.post(
            "/v1/oracles/lab/results",
            json={"results": [{"item_id": item_id, "values": {"pIC50": 3}}]},
        )
        assert missing.status_code == 422, missing.text
        locs = {e["loc"] for e in missing.json()["errors"]}
        assert locs == {"results[0].values.logp", "results[0].values.pIC50"}
        out_of_range = partner.post(
            "/v1/oracles/lab/results",
            json={"results": [{"item_id": item_id, "values": {"logp": 99}}]},
        )
        assert out_of_range.status_code == 422
        assert "above the schema's max" in out_of_range.json()["message"]
        # A pull oracle's key is not the lab's: it cannot claim or post the lab's work.
    with service.client(api_key=plate_key) as foreign:
        posted = foreign.post(
            "/v1/oracles/lab/results",
            json={"results": [{"item_id": item_id, "values": {"logp": 1.0}}]},
        )
        assert posted.status_code == 403, posted.text
        assert (
            foreign.post(
                "/v1/oracles/plate/results",
                json={"results": [{"item_id": item_id, "values": {"logp": 1.0}}]},
            ).status_code
            == 404
        )
        assert foreign.get("/v1/oracles").status_code == 403  # operators only
        assert (
            foreign.post(
                "/v1/rewards", json={"items": [{"kind": "molecule", "payload": {"smiles": "C"}}]}
            ).status_code
            == 403
        )
    with service.client(api_key=trainer_key) as trainer:
        assert trainer.post("/v1/oracles/plate/claim").status_code == 403
    with service.client() as client:  # nothing changed the reward
        assert [r["revision"] for r in _rewards(client, job_id)] == [1]


def test_a_forged_push_is_refused_by_the_partner(lab: Lab) -> None:
    body = json.dumps({"type": "oracle.batch", "batch_id": "ob_forged", "items": []}).encode()
    forged = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    taken = len(lab.batches)
    for headers in (
        signed_headers(forged, "ob_forged", body),
        {**signed_headers(SECRET, "ob_forged", body), "webhook-id": "ob_other"},
        signed_headers(SECRET, "ob_forged", body, timestamp=int(time.time()) - 3600),
    ):
        answer = httpx.post(lab.url, content=body, headers=headers)
        assert answer.status_code == 401, answer.text
    good = httpx.post(lab.url, content=body, headers=signed_headers(SECRET, "ob_forged", body))
    assert good.status_code == 202
    assert len(lab.batches) == taken + 1


def test_a_pull_client_that_dies_holding_a_lease_gives_the_batch_back(service: Service) -> None:
    molecules = fresh_molecules(2)
    plate_key = _plate_key(service)
    with service.client() as client:
        job_id = _submit(client, "with-plate", molecules, deadline_s=120)
    with service.client(api_key=plate_key) as first, service.client(api_key=plate_key) as second:
        claim = until(lambda: _claim(first, "plate"), what="a batch to claim")
        smiles = sorted(i["payload"]["smiles"] for i in claim["batch"]["items"])
        assert smiles == sorted(molecules)
        batch_id = claim["batch"]["batch_id"]
        # The first client dies here (no heartbeat): nothing is given out while its lease holds.
        assert second.post("/v1/oracles/plate/claim").status_code == 204
        again = until(lambda: _claim(second, "plate"), timeout=10, what="the lease to expire")
        assert again["batch"]["batch_id"] == batch_id
        assert sorted(i["payload"]["smiles"] for i in again["batch"]["items"]) == smiles
        late = first.post(
            f"/v1/oracles/plate/batches/{batch_id}/heartbeat", json={"lease_id": claim["lease_id"]}
        )
        assert late.status_code == 409, late.text
        assert late.json()["error"] == "lease_lost"
        beat = second.post(
            f"/v1/oracles/plate/batches/{batch_id}/heartbeat", json={"lease_id": again["lease_id"]}
        )
        assert beat.status_code == 200, beat.text
        posted = second.post(
            "/v1/oracles/plate/results", json={"results": results_for(again["batch"])}
        )
        assert posted.json() == {"accepted": 2, "duplicates": 0}
    with service.client() as client:
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
        assert [i["reward"]["fidelity"] for i in job["items"]] == ["oracle", "oracle"]
        status = client.get(f"/v1/oracles/plate/batches/{batch_id}").json()
        assert (status["state"], status["claims"]) == ("done", 2)


_keys: dict[str, str] = {}


def _plate_key(service: Service) -> str:
    if "plate" not in _keys:
        _keys["plate"] = service.create_key("plate", "oracle")
    return _keys["plate"]


def _claim(client: httpx.Client, oracle: str) -> dict[str, Any] | None:
    answer = client.post(f"/v1/oracles/{oracle}/claim")
    assert answer.status_code in (200, 204), answer.text
    return answer.json() if answer.status_code == 200 else None


def test_more_items_than_capacity_leave_the_lowest_valued_with_their_fallback(
    service: Service,
) -> None:
    molecules = fresh_molecules(5)
    scarce_key = service.create_key("scarce", "oracle")
    with service.client() as client:
        fast = poll_job(client, f"/v1/jobs/{_submit(client, 'fast-only', molecules)}", 30)
        scores = {s: i["reward"]["value"] for s, i in zip(molecules, fast["items"], strict=True)}
        job_id = _submit(client, "with-scarce", molecules, deadline_s=120)
        left_out = until(
            lambda: [r for r in _rewards(client, job_id) if r["status"] == "scored"],
            what="rewards of items capacity left out",
        )
        assert len(left_out) == 3
        for reward in left_out:
            assert "not selected: scarce capacity" in reward["reason"]
            assert reward["fidelity"] == "chem.fast"
    with service.client(api_key=scarce_key) as partner:
        claim = until(lambda: _claim(partner, "scarce"), what="the selected batch")
        chosen = [i["payload"]["smiles"] for i in claim["batch"]["items"]]
        assert len(chosen) == 2
        others = [s for s in molecules if s not in chosen]
        assert min(scores[s] for s in chosen) >= max(scores[s] for s in others)
        posted = partner.post(
            "/v1/oracles/scarce/results", json={"results": results_for(claim["batch"])}
        )
        assert posted.status_code == 200, posted.text
    with service.client() as client:
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
        fidelity = {
            i["reward"]["fidelity"]
            for i, s in zip(job["items"], molecules, strict=True)
            if s in chosen
        }
        assert fidelity == {"oracle"}
        used = {o["name"]: o for o in client.get("/v1/oracles").json()}["scarce"]
        assert used["used_this_period"] == 2
        assert used["items"]["not_selected"] == 3


def test_a_result_after_the_deadline_revises_the_fallback(service: Service) -> None:
    molecules = fresh_molecules(1)
    plate_key = _plate_key(service)
    with service.client() as client:
        job_id = _submit(client, "with-plate", molecules, deadline_s=3)
        with service.client(api_key=plate_key) as partner:
            claim = until(lambda: _claim(partner, "plate"), what="a batch to claim")
            job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
            fallback = job["items"][0]["reward"]
            assert (fallback["status"], fallback["fidelity"], fallback["revision"]) == (
                "scored",
                "chem.fast",
                1,
            )
            assert (
                "oracle had not answered; its answer will revise this reward" in fallback["reason"]
            )
            posted = partner.post(
                "/v1/oracles/plate/results", json={"results": results_for(claim["batch"])}
            )
            assert posted.status_code == 200, posted.text
        revised = client.get(f"/v1/jobs/{job_id}").json()["items"][0]["reward"]
        assert (revised["status"], revised["fidelity"], revised["revision"]) == (
            "scored",
            "oracle",
            2,
        )
        assert revised["value"] == pytest.approx(_expected(molecules[0]), abs=1e-6)
        changes = client.get("/v1/rewards/changes", params={"since": "0", "limit": 1000}).json()
        mine = [(c["type"], c["revision"]) for c in changes["changes"] if c["job_id"] == job_id]
        assert mine == [("item.finished", 1), ("item.revised", 2)], mine


def test_the_trainers_revision_log_reports_the_late_results(service: Service) -> None:
    # What the GRPO trainer logs per step (trainer/revisions.py, docs/grpo-lab-run.md): rewards
    # finished, then the lab's late results revising them, read from the changes feed.
    from trainer.revisions import RevisionLog
    from verifier_service.client import VerifierClient

    molecules = fresh_molecules(2)
    key = service.create_key("grpo-revisions", "trainer")
    with VerifierClient(service.base_url, api_key=key) as trainer_client:
        log = RevisionLog(trainer_client)
        assert log.poll()["revisions/finished"] == 0
        items = [{"kind": "molecule", "payload": {"smiles": s}} for s in molecules]
        (job,) = trainer_client.score_jobs(items, policy="with-plate", deadline_s=3, timeout_s=30)
        fallbacks = [item.reward.value for item in job.items if item.reward is not None]
        assert len(fallbacks) == 2
        first = log.poll()
        assert (first["revisions/finished"], first["revisions/revised"]) == (2, 0)
        with service.client(api_key=_plate_key(service)) as partner:
            claim = until(lambda: _claim(partner, "plate"), what="a batch to claim")
            assert sorted(i["payload"]["smiles"] for i in claim["batch"]["items"]) == sorted(
                molecules
            )
            posted = partner.post(
                "/v1/oracles/plate/results", json={"results": results_for(claim["batch"])}
            )
            assert posted.status_code == 200, posted.text
        later = until(lambda: (row := log.poll())["revisions/revised"] and row, what="revisions")
    assert (later["revisions/revised"], later["revisions/revised_total"]) == (2, 2)
    revised = [_expected(s) for s in molecules]
    expected = sum(revised) / 2 - sum(v for v in fallbacks if v is not None) / 2
    assert later["revisions/delta_mean"] == pytest.approx(expected, abs=1e-6)


def test_a_failed_measurement_is_tried_once_more_then_is_an_error(service: Service) -> None:
    molecules = fresh_molecules(1)
    with service.client() as client, service.client(api_key=_plate_key(service)) as partner:
        job_id = _submit(client, "with-plate", molecules, deadline_s=120)
        failed: list[str] = []
        for attempt in (1, 2):
            claim = until(lambda: _claim(partner, "plate"), what=f"claim {attempt}")
            [item] = claim["batch"]["items"]
            assert item["payload"]["smiles"] == molecules[0]
            failed.append(item["item_id"])
            posted = partner.post(
                "/v1/oracles/plate/results",
                json={
                    "results": [
                        {"item_id": item["item_id"], "error": f"precipitated in well A{attempt}"}
                    ]
                },
            )
            assert posted.json() == {"accepted": 1, "duplicates": 0}, posted.text
            if attempt == 1:  # tried once more: still pending, in a new batch
                assert _rewards(client, job_id)[0]["status"] == "pending"
        assert failed[0] != failed[1]
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
        reward = job["items"][0]["reward"]
        assert (reward["status"], reward["value"]) == ("infra_error", None)
        assert "oracle could not judge the item: measurement_failed" in reward["reason"]
        assert "precipitated in well A2" in reward["reason"]


def test_a_partner_never_reached_ends_its_items_with_an_error(service: Service) -> None:
    molecules = fresh_molecules(2)
    with service.client() as client:
        job_id = _submit(client, "with-gone", molecules, deadline_s=120)
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=60)
        assert job["status"] == "completed", job
        for item in job["items"]:
            reward = item["reward"]
            assert reward["status"] == "infra_error"
            assert "oracle could not judge the item: oracle_unreachable" in reward["reason"]
            assert "ConnectError" in reward["reason"]
        gone = {o["name"]: o for o in client.get("/v1/oracles").json()}["gone"]
        assert gone["items"] == {"failed": 2}


def test_a_market_scores_trading_actions_once_their_window_closes(
    service: Service, market: Lab
) -> None:
    actions = [
        {"side": "buy", "qty": 5, "at": 0, "window": 4},  # 100 -> 104: +20 USD
        {"side": "sell", "qty": 5, "at": 4, "window": 3},  # 104 -> 97, short: +35 USD
        {"side": "buy", "qty": 5, "at": 5, "window": 1},  # 103.5 -> 98.75: -23.75 USD
    ]
    items = [{"kind": "json", "payload": a, "reference": {"schema": ACTION}} for a in actions]
    with service.client() as client:
        posted = client.post("/v1/rewards", json={"policy": "with-market", "items": items})
        assert posted.status_code == 202, posted.text
        job = poll_job(client, f"/v1/jobs/{posted.json()['id']}", timeout=60)
        assert job["status"] == "completed", job
        for action, item in zip(actions, job["items"], strict=True):
            expected = min(1.0, max(0.0, (market_pnl(action) + 100.0) / 200.0))
            reward = item["reward"]
            assert (reward["status"], reward["fidelity"]) == ("scored", "oracle")
            assert reward["value"] == pytest.approx(expected)
        values = [i["reward"]["value"] for i in job["items"]]
        assert values == pytest.approx([0.6, 0.675, 0.38125])  # +20, +35, -23.75 USD


PARTNER_SCRIPT = REPO / "docs" / "examples" / "oracle_partner.py"


def test_the_example_partner_script_serves_a_pull_oracle(service: Service) -> None:
    molecules = fresh_molecules(3)
    with service.client() as client:
        job_id = _submit(client, "with-plate", molecules, deadline_s=120)
        env = {**os.environ, "VERIFIER_ORACLE_KEY": _plate_key(service),
               "PYTHONPATH": str(REPO / "tests" / "oracle")}  # fmt: skip
        done = subprocess.run(
            [sys.executable, str(PARTNER_SCRIPT), "--url", service.base_url, "--oracle", "plate",
             "--measure", "lab_sim:logp_of", "--once"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
        for smiles, item in zip(molecules, job["items"], strict=True):
            assert item["reward"]["fidelity"] == "oracle"
            assert item["reward"]["value"] == pytest.approx(_expected(smiles), abs=1e-6)


def test_the_example_partner_verifies_our_signature() -> None:
    spec = importlib.util.spec_from_file_location("oracle_partner", PARTNER_SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    partner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(partner)
    body = b'{"type": "oracle.batch"}'
    assert partner.verify_push(SECRET, signed_headers(SECRET, "ob_1", body), body)
    forged = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    assert not partner.verify_push(SECRET, signed_headers(forged, "ob_1", body), body)
    assert not partner.verify_push(SECRET, signed_headers(SECRET, "ob_1", body), body + b" ")
    old = signed_headers(SECRET, "ob_1", body, timestamp=int(time.time()) - 3600)
    assert not partner.verify_push(SECRET, old, body)


def test_an_operator_resends_a_batch_the_partner_lost(service: Service, lab: Lab) -> None:
    molecules = fresh_molecules(1)
    lab.delay_s = 5.0  # the lab holds the batch a while before its results
    try:
        with service.client() as client:
            job_id = _submit(client, "with-lab", molecules, deadline_s=120)

            def pushed() -> dict[str, Any] | None:
                mine = [b for b in lab.batches if b["items"]]
                return next(
                    (b for b in mine if b["items"][0]["payload"]["smiles"] in molecules), None
                )

            batch = until(pushed, what="the pushed batch")
            path = f"/v1/oracles/lab/batches/{batch['batch_id']}"
            until(lambda: client.get(path).json()["state"] == "sent", what="the batch sent")
            resent = client.post(f"{path}/resend")
            assert resent.status_code == 200, resent.text
            assert resent.json() == {"state": "sending"}

            def again() -> list[dict[str, Any]]:
                return [a for a in client.get(path).json()["attempts"] if a["status_code"] == 200]

            attempts = until(again, what="the second push")
            assert len(attempts) == 1  # the lab already had it: it says so, and keeps one copy
            job = poll_job(client, f"/v1/jobs/{job_id}", timeout=30)
            assert job["items"][0]["reward"]["fidelity"] == "oracle"
            done = client.post(f"{path}/resend")
            assert done.status_code == 409, done.text
            assert done.json()["error"] == "not_resendable"
    finally:
        lab.delay_s = 0.3
