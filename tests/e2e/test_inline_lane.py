"""The inline lane: a small waiting request runs its fast tiers in the API process.

What a trainer must not be able to tell apart: the answer of the inline lane and the job as
GET /v1/jobs/{id} stores it, the cost ledger, and the cache. Work of slower tiers still goes
through its Celery queue.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from support import RedisServer, Service, free_port, start_service

SCHEMA = {"type": "object", "required": ["tool", "args"]}


def _call(payload: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "json", "payload": payload, "reference": {"schema": SCHEMA}}


TRAJECTORY = {
    "kind": "trajectory",
    "steps": [{"action": _call({"tool": "a", "args": {}})}, {"action": _call({"tool": "b"})}],
    "final_answer": _call({"tool": "c", "args": {}}),
}


@pytest.fixture(scope="module")
def sim_worker(live_service: Service) -> Iterator[Service]:
    live_service.start_worker("inline-sim", "tier.sim", concurrency=1)
    yield live_service
    live_service.stop("inline-sim")


def _post(service: Service, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """POST a request, then GET its job: status code, the answer, and the stored job."""
    with service.client(timeout=120) as client:
        response = client.post("/v1/rewards", json=body)
        stored = client.get(response.headers["location"]).json()
    return response.status_code, response.json(), stored


def test_inline_answer_is_the_stored_job(live_service: Service) -> None:
    body = {"policy": "tool-call", "items": [TRAJECTORY, _call({"x": 1})], "wait_s": 10}
    status, answer, stored = _post(live_service, body)
    assert status == 200
    assert answer == stored  # timestamps included: both UTC with their zone
    assert answer["created_at"].endswith("Z")
    assert answer["finished_at"].endswith("Z")
    trajectory, flat = answer["items"]
    assert trajectory["reward"]["step_rewards"] == [1.0, 0.0]
    assert trajectory["reward"]["outcome_reward"] == 1.0
    assert flat["reward"]["value"] == 0.0
    assert "required property" in flat["verdicts"][0]["feedback"]


def test_inline_work_is_charged_and_cached(live_service: Service) -> None:
    smiles = "CC(C)(C)c1ccc(O)cc1CCN"
    body = {"items": [{"kind": "molecule", "payload": {"smiles": smiles}}], "wait_s": 10}
    status, first, _ = _post(live_service, body)
    assert status == 200
    verdict = first["items"][0]["verdicts"][0]
    assert verdict["cached"] is False
    assert verdict["cost"]["cpu_s"] > 0
    with live_service.client() as client:
        cost = client.get(f"/v1/jobs/{first['id']}/cost").json()
    assert list(cost["tiers"]) == ["chem.fast"]
    assert cost["tiers"]["chem.fast"]["calls"] == 1
    assert cost["tiers"]["chem.fast"]["cpu_s"] > 0

    _, second, _ = _post(live_service, body)
    assert second["items"][0]["verdicts"][0]["cached"] is True
    assert second["items"][0]["reward"] == {
        **first["items"][0]["reward"],
        "provenance": second["items"][0]["reward"]["provenance"],
        "cost": {"cpu_s": 0.0, "wall_s": 0.0, "cost_units": 0.0},
    }


def test_slow_tiers_still_go_through_their_queue(sim_worker: Service) -> None:
    # chem.fast inline, then chem.surrogate (tier.sim) for molecules with QED above 0.5: only
    # the worker on tier.sim can finish this job.
    policy = {
        "name": f"inline-then-queue-{uuid.uuid4().hex[:6]}",
        "ladders": {
            "molecule": [
                {"tier": "chem.fast"},
                {
                    "tier": "chem.surrogate",
                    "gate": "verdicts['chem.fast'].components.qed > 0.5",
                    "config": {"xtb": False},
                },
            ]
        },
        "reward": {
            "molecule": {"components": [{"name": "qed", "tier": "chem.fast", "component": "qed"}]}
        },
    }
    with sim_worker.client() as client:
        response = client.post("/v1/policies", json={"document": policy})
        assert response.status_code == 201, response.text
    ibuprofen, ethanol = "CC(C)Cc1ccc(cc1)C(C)C(=O)O", "CCO"
    body = {
        "policy": policy["name"],
        "items": [{"kind": "molecule", "payload": {"smiles": s}} for s in (ibuprofen, ethanol)],
        "wait_s": 60,
    }
    status, answer, stored = _post(sim_worker, body)
    assert status == 200, answer
    assert answer == stored
    climbed, stopped = answer["items"]
    assert [v["tier"] for v in climbed["verdicts"]][:2] == ["chem.fast", "chem.surrogate"]
    assert [v["tier"] for v in stopped["verdicts"]] == ["chem.fast"]
    assert climbed["reward"]["status"] == stopped["reward"]["status"] == "scored"


@pytest.fixture(scope="module")
def no_fast_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, int]]:
    """The API on the embedded default (SQLite) with a broker of its own whose only worker
    consumes tier.sim: nothing could run tier.fast work except the API itself."""
    data_dir = tmp_path_factory.mktemp("no-fast")
    broker = RedisServer(free_port(), data_dir)
    broker.start()
    service = start_service(
        data_dir, "tier.sim", VERIFIER_BROKER__URL=f"redis://127.0.0.1:{broker.port}/0"
    )
    yield service, broker.port
    service.stop_all()
    broker.stop()


def test_inline_work_skips_the_broker(no_fast_worker: tuple[Service, int]) -> None:
    service, port = no_fast_worker
    body = {
        "items": [
            {"kind": "molecule", "payload": {"smiles": "CC(=O)Oc1ccccc1C(=O)O"}},
            {"kind": "molecule", "payload": {"smiles": "C1CC"}},
        ],
        "wait_s": 10,
    }
    with service.client() as client:
        response = client.post("/v1/rewards", json=body)
    assert response.status_code == 200, response.text
    rewards = [item["reward"] for item in response.json()["items"]]
    assert [r["status"] for r in rewards] == ["scored", "scored"]
    assert rewards[0]["value"] > 0.5
    assert rewards[1]["reason"] == "hard gate: invalid molecule"
    # Nothing was sent to the broker for tier.fast, and nothing waits there.
    assert redis.Redis(port=port).llen("tier.fast") == 0
    assert "tier.chem_fast.verify[" not in service.log_tail("worker", 100_000)  # never received


def _less_verdicts(node: dict[str, Any]) -> dict[str, Any]:
    steps = node["steps"]
    return {k: v for k, v in node.items() if k != "verdicts"} | {
        "steps": None if steps is None else [_less_verdicts(s) for s in steps]
    }


def test_rewards_only_answers_leave_every_items_verdicts_out(live_service: Service) -> None:
    """?verdicts=false, on the answer the request's own transaction wrote, on an idempotent
    replay (read back from the database) and on GET: the same job less its verdicts."""
    key = uuid.uuid4().hex
    body = {"policy": "tool-call", "items": [TRAJECTORY, _call({"x": 1})], "wait_s": 10}
    with live_service.client(timeout=120) as client:
        headers = {"Idempotency-Key": key}
        slim = client.post("/v1/rewards?verdicts=false", json=body, headers=headers)
        assert slim.status_code == 200, slim.text
        job = slim.json()
        replay = client.post("/v1/rewards?verdicts=false", json=body, headers=headers).json()
        full = client.get(f"/v1/jobs/{job['id']}").json()
        got = client.get(f"/v1/jobs/{job['id']}?verdicts=false").json()
        wrong = client.get(f"/v1/jobs/{job['id']}?verdicts=maybe")
    assert full["items"][0]["steps"][0]["verdicts"]  # the full job has them
    expected = full | {"items": [_less_verdicts(i) for i in full["items"]]}
    assert job == replay == got == expected
    assert b'"verdicts"' not in slim.content
    assert job["items"][0]["reward"]["step_rewards"] == [1.0, 0.0]
    assert wrong.status_code == 422
    assert "verdicts" in wrong.text
