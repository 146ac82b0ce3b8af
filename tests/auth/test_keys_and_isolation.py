"""API keys on the live service: who sees which job, bad keys, on-behalf-of, the audit log."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
from support import Service

ITEM = {"kind": "json", "payload": {"tool": "t", "args": {}}, "reference": {"schema": {}}}


def _job(client: httpx.Client) -> str:
    response = client.post("/v1/rewards", json={"policy": "default", "items": [ITEM], "wait_s": 5})
    assert response.status_code in (200, 202), response.text
    return str(response.json()["id"])


@pytest.fixture(scope="module")
def trainers(live_service: Service) -> dict[str, str]:
    tag = uuid.uuid4().hex[:6]
    return {
        "a": live_service.create_key(f"team-a-{tag}", "trainer"),
        "b": live_service.create_key(f"team-b-{tag}", "trainer"),
        "ops": live_service.create_key(f"ops-{tag}", "operator", "trainer"),
    }


def test_a_trainer_sees_only_its_own_jobs(live_service: Service, trainers: dict[str, str]) -> None:
    with (
        live_service.client(api_key=trainers["a"]) as a,
        live_service.client(api_key=trainers["b"]) as b,
        live_service.client(api_key=trainers["ops"]) as ops,
    ):
        job = _job(a)
        assert a.get(f"/v1/jobs/{job}").status_code == 200
        assert a.get(f"/v1/jobs/{job}/cost").status_code == 200
        # Someone else's job is a 404 that reads exactly like a job that does not exist.
        theirs = b.get(f"/v1/jobs/{job}")
        missing = b.get(f"/v1/jobs/{uuid.uuid4().hex}")
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json()["error"] == missing.json()["error"] == "not_found"
        assert b.get(f"/v1/jobs/{job}/cost").status_code == 404
        # Operators see every job.
        assert ops.get(f"/v1/jobs/{job}").status_code == 200


def test_the_job_is_recorded_under_the_key_not_a_claimed_name(
    live_service: Service, trainers: dict[str, str]
) -> None:
    with (
        live_service.client(api_key=trainers["a"]) as a,
        live_service.client(api_key=trainers["b"]) as b,
    ):
        me_b = b.get("/v1/me").json()["name"]
        # A trainer naming someone else in X-Principal does not become them.
        a.headers["X-Principal"] = me_b
        job = _job(a)
        assert b.get(f"/v1/jobs/{job}").status_code == 404
        assert a.get(f"/v1/jobs/{job}").status_code == 200
        assert a.get("/v1/me").json()["on_behalf_of"] is None


def test_an_operator_submits_on_behalf_and_it_is_audited(
    live_service: Service, trainers: dict[str, str]
) -> None:
    with (
        live_service.client(api_key=trainers["ops"]) as ops,
        live_service.client(api_key=trainers["b"]) as b,
        live_service.client() as admin,
    ):
        me_b = b.get("/v1/me").json()["name"]
        ops.headers["X-Principal"] = me_b
        job = _job(ops)
        # The job is the other principal's: its trainer sees it.
        assert b.get(f"/v1/jobs/{job}").status_code == 200
        events = admin.get("/v1/audit", params={"action": "job.create_on_behalf"}).json()
        event = next(e for e in events if e["target"] == job)
        assert event["actor"] == ops.get("/v1/me").json()["name"]
        assert event["detail"] == {"on_behalf_of": me_b}


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("Bearer not-a-key", "malformed"),
        ("Basic dXNlcjpwYXNz", "malformed"),
        ("Bearer vsk_0123456789ab_" + "A" * 43, "unknown"),
    ],
)
def test_bad_keys_get_401_saying_why(live_service: Service, header: str, reason: str) -> None:
    response = httpx.get(
        f"{live_service.base_url}/v1/me", headers={"Authorization": header}, timeout=10
    )
    assert response.status_code == 401
    assert response.json()["reason"] == reason
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_tampered_key_is_unknown(live_service: Service) -> None:
    key = live_service.create_key(f"tamper-{uuid.uuid4().hex[:6]}", "trainer")
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    response = live_service.client(api_key=tampered).get("/v1/me")
    assert response.status_code == 401
    assert response.json()["reason"] == "unknown"


def test_expired_and_revoked_keys_get_401_saying_which(live_service: Service) -> None:
    tag = uuid.uuid4().hex[:6]
    short = live_service.create_key(f"short-{tag}", "trainer", expires="1s")
    revoked = live_service.create_key(f"gone-{tag}", "trainer")
    assert live_service.client(api_key=revoked).get("/v1/me").status_code == 200
    prefix = revoked[: len("vsk_") + 12]
    done = live_service.cli("keys", "revoke", prefix)
    assert done.returncode == 0, done.stderr
    time.sleep(1.1)
    for key, reason in ((short, "expired"), (revoked, "revoked")):
        response = live_service.client(api_key=key).get("/v1/me")
        assert response.status_code == 401
        body: dict[str, Any] = response.json()
        assert body["reason"] == reason
        assert key[: len("vsk_") + 12] in body["message"]  # the prefix, to tell keys apart
        assert key not in response.text


def test_keys_never_reach_the_logs(live_service: Service) -> None:
    key = live_service.create_key(f"log-{uuid.uuid4().hex[:6]}", "trainer")
    with live_service.client(api_key=key) as client:
        assert client.get("/v1/me").status_code == 200
    # The compat form carries the key in the path, which access logs print.
    httpx.post(f"{live_service.base_url}/k/{key}/run_code", json={}, timeout=10)
    httpx.post(f"{live_service.base_url}/k/{key}/v1/compat/openrlhf", json={}, timeout=10)
    time.sleep(0.5)
    log = live_service.logs["api"].read_text(errors="replace")
    assert "/k/***/run_code" in log
    secret = key.split("_", 2)[2]
    assert secret not in log


def test_admins_manage_keys_over_http_and_it_is_audited(live_service: Service) -> None:
    name = f"http-{uuid.uuid4().hex[:6]}"
    with live_service.client() as admin:
        created = admin.post("/v1/keys", json={"name": name, "roles": ["trainer"]})
        assert created.status_code == 201, created.text
        key = created.json()["key"]
        assert live_service.client(api_key=key).get("/v1/me").json()["name"] == name
        listed = {k["prefix"]: k for k in admin.get("/v1/keys").json()}
        assert listed[created.json()["prefix"]]["state"] == "active"
        assert all("key" not in k for k in listed.values())
        revoked = admin.post(f"/v1/keys/{created.json()['id']}/revoke")
        assert revoked.json()["state"] == "revoked"
        assert live_service.client(api_key=key).get("/v1/me").status_code == 401
        actions = [
            (e["action"], e["target"]) for e in admin.get("/v1/audit", params={"limit": 50}).json()
        ]
        assert ("key.create", created.json()["prefix"]) in actions
        assert ("key.revoke", created.json()["prefix"]) in actions


def test_policy_changes_are_audited(live_service: Service) -> None:
    with live_service.client() as admin:
        versions = admin.get("/v1/policies/default").json()["versions"]
        active = admin.post(f"/v1/policies/default/versions/{versions[-1]}/activate")
        assert active.status_code == 200
        events = admin.get("/v1/audit", params={"action": "policy.activate"}).json()
        assert events[0]["target"] == f"default@{versions[-1]}"
        assert events[0]["actor"] == "test-root"


def test_cost_budgets_are_charged_to_the_keys_principal(live_service: Service) -> None:
    tag = uuid.uuid4().hex[:6]
    qed = {"name": "qed", "tier": "chem.fast", "component": "qed"}
    policy = {
        "name": f"budget-{tag}",
        "ladders": {"molecule": [{"tier": "chem.fast"}]},
        "reward": {"molecule": {"components": [qed]}},
        "budgets": {"per_principal_hour": {"chem.fast": 0.0025}},
    }
    with live_service.client() as root:
        assert root.post("/v1/policies", json={"document": policy}).status_code == 201
    spender = live_service.create_key(f"spender-{tag}", "trainer")
    other = live_service.create_key(f"other-{tag}", "trainer")

    chains = iter(range(3, 60))  # a new molecule for every item: a cached verdict costs nothing

    def score(key: str, n: int) -> list[dict[str, Any]]:
        lengths = [next(chains) for _ in range(n)]
        tail = "C" * (int(tag, 16) % 20 + 1) + "F"
        items = [{"kind": "molecule", "payload": {"smiles": "C" * k + "N" + tail}} for k in lengths]
        with live_service.client(api_key=key) as client:
            body = {"policy": policy["name"], "items": items, "wait_s": 20}
            response = client.post("/v1/rewards", json=body)
        assert response.status_code == 200, response.text
        return [item["reward"] for item in response.json()["items"]]

    # chem.fast costs 0.001 units an item: two fit in the principal's hourly 0.0025.
    spent = score(spender, 4)
    assert [r["status"] for r in spent].count("scored") == 2, spent
    assert score(spender, 1)[0]["status"] != "scored"
    # Another key's principal has its own budget.
    assert score(other, 1)[0]["status"] == "scored"
