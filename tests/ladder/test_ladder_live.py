"""The escalation ladder through real processes: group top-k, budgets, deadlines, cache,
trajectories. Policies are created over the operators' API."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from support import Service

# QED of these differs clearly: ranking by QED is stable.
MOLECULES = [
    "CC(=O)Oc1ccccc1C(=O)O",  # aspirin 0.55
    "CC(C)Cc1ccc(cc1)C(C)C(=O)O",  # ibuprofen 0.82
    "CN1C=NC2=C1C(=O)N(C(=O)N2C)C",  # caffeine 0.54
    "CCO",  # ethanol 0.41
    "c1ccccc1",  # benzene 0.44
    "CC(=O)Nc1ccc(O)cc1",  # paracetamol 0.60
]


@pytest.fixture(scope="module")
def sim_worker(live_service: Service) -> Service:
    live_service.start_worker("sim", "tier.sim", concurrency=1)
    yield live_service
    if "sim" in live_service.processes:
        live_service.stop("sim")


def _policy(service: Service, document: dict[str, Any]) -> str:
    name = f"{document['name']}-{uuid.uuid4().hex[:6]}"
    with service.client() as client:
        response = client.post("/v1/policies", json={"document": {**document, "name": name}})
    assert response.status_code == 201, response.text
    return name


def _score(service: Service, policy: str, items: list[dict[str, Any]], **extra: Any) -> dict:
    with service.client(timeout=120) as client:
        response = client.post(
            "/v1/rewards", json={"policy": policy, "items": items, "wait_s": 90, **extra}
        )
    assert response.status_code == 200, response.text
    return response.json()


def _fresh_smiles() -> str:
    """A molecule no earlier test has verified (so no cached verdict answers for it)."""
    bits = uuid.uuid4().int
    return "OC" + "".join("N" if bits >> i & 1 else "C" for i in range(18)) + "C"


def _mol(smiles: str, group: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": "molecule", "payload": {"smiles": smiles}}
    if group:
        item["metadata"] = {"group": group}
    return item


SURROGATE_LADDER = {
    "molecule": [
        {"tier": "chem.fast"},
        {
            "tier": "chem.surrogate",
            "gate": "verdicts['chem.fast'].status == 'passed'",
            "config": {"xtb": False},
        },
    ]
}


def test_only_the_top_k_of_a_group_climb(sim_worker: Service) -> None:
    ladder = {"molecule": [dict(step) for step in SURROGATE_LADDER["molecule"]]}
    ladder["molecule"][1]["group"] = {"top_k": 2, "by": "verdicts['chem.fast'].components.qed"}
    policy = _policy(sim_worker, {"name": "topk", "ladders": ladder})
    job = _score(sim_worker, policy, [_mol(s, "g1") for s in MOLECULES])
    fidelity = {MOLECULES[i["index"]]: i["reward"]["fidelity"] for i in job["items"]}
    climbed = {s for s, f in fidelity.items() if f == "chem.surrogate"}
    # ibuprofen (0.82) and paracetamol (0.60) have the highest QED of the group.
    assert climbed == {MOLECULES[1], MOLECULES[5]}
    assert all(i["reward"]["status"] == "scored" for i in job["items"])


def test_job_budget_stops_climbing_and_says_so(sim_worker: Service) -> None:
    policy = _policy(
        sim_worker,
        {"name": "budget", "ladders": SURROGATE_LADDER,
         "budgets": {"per_job": {"chem.surrogate": 0.2}}},  # 2 calls at 0.1 units each
    )  # fmt: skip
    job = _score(sim_worker, policy, [_mol(s) for s in MOLECULES[:5]])
    rewards = [i["reward"] for i in job["items"]]
    # Surrogate verdicts cached by an earlier job cost nothing and do not count on the budget.
    paid = [i for i in job["items"] if len(i["verdicts"]) == 2 and not i["verdicts"][1]["cached"]]
    free = [i for i in job["items"] if len(i["verdicts"]) == 2 and i["verdicts"][1]["cached"]]
    stopped = [r for r in rewards if r["fidelity"] == "chem.fast"]
    assert len(paid) == 2
    assert len(stopped) == 5 - 2 - len(free)
    assert stopped
    for reward in stopped:
        assert reward["status"] == "scored"
        assert "budget_exhausted: chem.surrogate" in reward["reason"]
        assert reward["value"] is not None


def test_deadline_gives_best_available_reward(live_service: Service) -> None:
    # No worker consumes tier.sim in this test's module scope before sim_worker starts, so the
    # surrogate never answers: at the deadline the chem.fast reward is used, marked as such.
    live_service.processes.get("sim") and live_service.stop("sim")
    policy = _policy(live_service, {"name": "deadline", "ladders": SURROGATE_LADDER})
    job = _score(live_service, policy, [_mol(_fresh_smiles())], deadline_s=2)
    reward = job["items"][0]["reward"]
    assert reward["status"] == "scored"
    assert reward["fidelity"] == "chem.fast"
    assert "deadline" in reward["reason"]
    assert reward["value"] == job["items"][0]["verdicts"][0]["components"]["qed"]


def test_deadline_can_be_an_infra_error(live_service: Service) -> None:
    live_service.processes.get("sim") and live_service.stop("sim")
    policy = _policy(
        live_service,
        {
            "name": "deadline-strict",
            "ladders": SURROGATE_LADDER,
            "deadline_fallback": "infra_error",
        },
    )
    job = _score(live_service, policy, [_mol(_fresh_smiles())], deadline_s=2)
    reward = job["items"][0]["reward"]
    assert reward["status"] == "infra_error"
    assert reward["value"] is None
    assert "deadline" in reward["reason"]


def test_duplicates_are_verified_once_within_and_across_jobs(live_service: Service) -> None:
    smiles = _fresh_smiles()
    first = _score(live_service, "default", [_mol(smiles), _mol(smiles), _mol(MOLECULES[3])])
    cached = [i["verdicts"][0]["cached"] for i in first["items"][:2]]
    assert sorted(cached) == [False, True]
    values = {i["reward"]["value"] for i in first["items"][:2]}
    assert len(values) == 1
    costs = sorted(i["reward"]["cost"]["cost_units"] for i in first["items"][:2])
    assert costs[0] == 0.0
    assert costs[1] > 0
    second = _score(live_service, "default", [_mol(smiles)])
    assert second["items"][0]["verdicts"][0]["cached"] is True
    assert second["items"][0]["reward"]["value"] == first["items"][0]["reward"]["value"]


def test_cache_is_invalidated_by_tier_config(live_service: Service) -> None:
    smiles = _fresh_smiles()
    _score(live_service, "default", [_mol(smiles)])
    policy = _policy(
        live_service,
        {"name": "other-config",
         "ladders": {"molecule": [{"tier": "chem.fast", "config": {"max_smiles_length": 3000}}]}},
    )  # fmt: skip
    job = _score(live_service, policy, [_mol(smiles)])
    assert job["items"][0]["verdicts"][0]["cached"] is False


def test_trajectory_gets_step_and_outcome_rewards(live_service: Service) -> None:
    schema = {"type": "object", "required": ["tool", "args"]}
    good = {
        "kind": "json",
        "payload": {"tool": "search", "args": {}},
        "reference": {"schema": schema},
    }
    bad = {"kind": "json", "payload": {"tool": "search"}, "reference": {"schema": schema}}
    trajectory = {
        "kind": "trajectory",
        "steps": [{"action": good, "observation": "3 results"}, {"action": bad}],
        "final_answer": good,
    }
    job = _score(live_service, "tool-call", [trajectory])
    item = job["items"][0]
    reward = item["reward"]
    assert reward["status"] == "scored"
    assert reward["step_rewards"] == [1.0, 0.0]
    assert reward["outcome_reward"] == 1.0
    # tool-call.yaml: 0.3 x discounted step mean (discount 0.9) + 0.7 x outcome
    step_mean = (1.0 * 1 + 0.0 * 0.9) / 1.9
    assert reward["value"] == pytest.approx(0.3 * step_mean + 0.7 * 1.0)
    assert [s["reward"]["value"] for s in item["steps"]] == [1.0, 0.0, 1.0]


def test_policy_validation_errors_point_at_the_field(live_service: Service) -> None:
    document = {
        "name": "broken",
        "ladders": {
            "molecule": [
                {"tier": "chem.fast"},
                {"tier": "chem.surrogate", "gate": "verdict['chem.fast'].score > 0.5"},
            ]
        },
    }
    with live_service.client() as client:
        response = client.post("/v1/policies/validate", json={"document": document})
        versions = client.get("/v1/policies/default").json()
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert errors[0]["loc"] == "ladders.molecule[1].gate"
    assert "verdicts" in errors[0]["msg"]  # did you mean 'verdicts'
    assert versions["active_version"] in versions["versions"]


def test_tiers_endpoint_lists_queues(live_service: Service) -> None:
    with live_service.client() as client:
        tiers = {t["name"]: t for t in client.get("/v1/tiers").json()}
    assert tiers["chem.fast"]["queue"] == "tier.fast"
    assert tiers["code.sandbox"]["queue"] == "tier.sandbox"
    assert isinstance(tiers["chem.dft"]["queue_depth"], int)
    assert tiers["chem.fast"]["workers"] >= 1


def _hifi_workers(service: Service) -> int:
    with service.client() as client:
        tiers = {t["name"]: t for t in client.get("/v1/tiers").json()}
    return int(tiers["chem.dft"]["workers"])


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_tiers_endpoint_counts_live_workers_per_queue(live_service: Service) -> None:
    before = _hifi_workers(live_service)
    live_service.start_worker("presence-hifi", "tier.hifi", concurrency=1)
    try:
        assert _wait_for(lambda: _hifi_workers(live_service) == before + 1)
    finally:
        live_service.stop("presence-hifi")
    assert _wait_for(lambda: _hifi_workers(live_service) == before)


def test_half_duplicate_job_costs_half_and_reports_it(live_service: Service) -> None:
    fresh = [_fresh_smiles() for _ in range(3)]
    job = _score(live_service, "default", [_mol(s) for s in fresh + fresh])
    with live_service.client() as client:
        cost = client.get(f"/v1/jobs/{job['id']}/cost").json()
    fast = cost["tiers"]["chem.fast"]
    assert fast["calls"] == 3
    assert fast["cache_hits"] == 3
    assert cost["cost_units"] == pytest.approx(3 * 0.001)
    assert cost["every_tier_cost_units"] == pytest.approx(6 * 0.001)
    assert cost["saved_cost_units"] == pytest.approx(3 * 0.001)
    # the tier's time, filled in by the worker after the call (one UPDATE for all the rows)
    assert fast["cpu_s"] > 0
    assert fast["wall_s"] > 0


def test_each_item_of_a_worker_batch_gets_its_own_tier_time(live_service: Service) -> None:
    fresh = [_fresh_smiles() for _ in range(5)]
    job = _score(live_service, "default", [_mol(s) for s in [*fresh, fresh[0], fresh[1]]])
    database = live_service.env["VERIFIER_DATABASE__URL"].replace(
        "postgresql+psycopg", "postgresql"
    )
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT i.index, c.cpu_s, c.wall_s, c.cached FROM cost_ledger c "
            "JOIN items i ON i.id = c.item_id WHERE i.job_id = %s ORDER BY i.index",
            (job["id"],),
        ).fetchall()
    assert [r[0] for r in rows] == list(range(7))  # one row per item (more than inline takes)
    first_calls = [r for r in rows if not r[3]]
    riders = [r for r in rows if r[3]]
    assert len(first_calls) == 5
    assert len(riders) == 2
    assert all(cpu > 0 and wall > 0 for _, cpu, wall, _ in first_calls)
    assert all(cpu == 0 and wall == 0 for _, cpu, wall, _ in riders)
    # each row has its own item's time, not one value for all
    assert len({wall for _, _, wall, _ in first_calls}) == 5


def test_replay_compares_a_draft_with_the_active_version(live_service: Service) -> None:
    base = {
        "name": "replay",
        "ladders": {"molecule": [{"tier": "chem.fast"}]},
        "reward": {
            "molecule": {"components": [{"name": "qed", "tier": "chem.fast", "component": "qed"}]}
        },
    }
    name = _policy(live_service, base)
    job = _score(live_service, name, [_mol(s) for s in MOLECULES])
    active_values = [i["reward"]["value"] for i in job["items"]]
    inverted = {"type": "linear", "low": 1.0, "high": 0.0}
    draft = {
        **base,
        "name": name,
        "reward": {"molecule": {"components": [
            {"name": "qed", "tier": "chem.fast", "component": "qed", "transform": inverted}
        ]}},
    }  # fmt: skip
    with live_service.client() as client:
        response = client.post(
            f"/v1/policies/{name}/replay", json={"document": draft, "job_ids": [job["id"]]}
        )
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["items"] == len(MOLECULES)
    assert report["active"]["mean_reward"] == pytest.approx(sum(active_values) / len(MOLECULES))
    assert report["draft"]["mean_reward"] == pytest.approx(1 - report["active"]["mean_reward"])
    assert report["draft"]["escalations"] == {"chem.fast": len(MOLECULES)}
    assert report["draft"]["unavailable"] == 0  # every verdict came from the store, none computed
    assert report["rank_correlation"] == pytest.approx(-1.0)
    top = report["most_changed"][0]
    assert top["delta"] == pytest.approx(top["draft"] - top["active"])
    assert abs(top["delta"]) == max(abs(1 - 2 * v) for v in active_values)


def test_replay_reports_verdicts_it_would_need(live_service: Service) -> None:
    name = _policy(
        live_service, {"name": "replay-missing", "ladders": {"molecule": [{"tier": "chem.fast"}]}}
    )
    job = _score(live_service, name, [_mol(_fresh_smiles())])
    draft = {"name": name, "ladders": SURROGATE_LADDER}
    with live_service.client() as client:
        report = client.post(
            f"/v1/policies/{name}/replay", json={"document": draft, "job_ids": [job["id"]]}
        ).json()
        computed = client.post(
            f"/v1/policies/{name}/replay",
            json={"document": draft, "job_ids": [job["id"]], "compute_missing": True},
        ).json()
    assert report["draft"]["unavailable"] == 1
    assert computed["draft"]["unavailable"] == 0
    assert computed["draft"]["escalations"] == {"chem.fast": 1, "chem.surrogate": 1}
