"""Bad input gets a clear 4xx or a scored verdict with feedback, never a 500."""

from __future__ import annotations

import pytest
from conftest import Service

MOLECULE = {"kind": "molecule", "payload": {"smiles": "CCO"}}


def _post(service: Service, body: object = None, content: bytes | None = None) -> tuple[int, dict]:
    with service.client() as client:
        if content is not None:
            response = client.post(
                "/v1/rewards", content=content, headers={"content-type": "application/json"}
            )
        else:
            response = client.post("/v1/rewards", json=body)
    return response.status_code, response.json()


def test_malformed_json(live_service: Service) -> None:
    status, body = _post(live_service, content=b'{"items": [')
    assert status == 422
    assert body["error"] == "invalid_request"
    assert "JSON" in body["message"]


def test_unknown_kind_names_the_field(live_service: Service) -> None:
    status, body = _post(live_service, {"items": [{"kind": "protein", "payload": {}}]})
    assert status == 422
    assert body["errors"][0]["loc"] == "body.items[0]"
    assert "protein" in body["message"]


def test_empty_items(live_service: Service) -> None:
    status, body = _post(live_service, {"items": []})
    assert status == 422
    assert "items" in body["message"]


def test_oversized_body_is_413(live_service: Service) -> None:
    smiles = "C" * 2000
    items = [{"kind": "molecule", "payload": {"smiles": smiles}}] * 600  # ~1.3 MB > 1 MB limit
    status, body = _post(live_service, {"items": items})
    assert status == 413
    assert "1000000 bytes" in body["message"]


def test_too_many_items_is_413(live_service: Service) -> None:
    items = [{"kind": "molecule", "payload": {"smiles": "C"}}] * 2001
    status, body = _post(live_service, {"items": items})
    assert status == 413
    assert "2001 items" in body["message"]
    assert "limit is 2000" in body["message"]


def test_invalid_json_schema_is_rejected_with_its_path(live_service: Service) -> None:
    item = {"kind": "json", "payload": {"a": 1}, "reference": {"schema": {"type": "objekt"}}}
    status, body = _post(live_service, {"items": [item]})
    assert status == 422
    assert body["errors"][0]["loc"].startswith("body.items[0]")
    assert "invalid JSON Schema" in body["message"]


def test_unknown_policy_is_404_with_the_available_ones(live_service: Service) -> None:
    item = {"kind": "molecule", "payload": {"smiles": "C"}}
    status, body = _post(live_service, {"policy": "nope", "items": [item]})
    assert status == 404
    assert "default" in body["hint"]


def test_kind_without_a_ladder_is_rejected(live_service: Service) -> None:
    status, body = _post(live_service, {"items": [{"kind": "text", "payload": {"text": "hi"}}]})
    assert status == 422
    assert "no ladder for kind 'text'" in body["message"]


@pytest.mark.parametrize(
    ("smiles", "reason_part"),
    [
        ("", "empty"),
        ("this is not a molecule", "parse"),
        ("c1ccccc1C(", "parse"),
        ("CN(C)(C)(C)C", "valence"),  # pentavalent N: sanitization message from RDKit
    ],
)
def test_garbage_smiles_is_a_scored_zero_with_feedback(
    live_service: Service, smiles: str, reason_part: str
) -> None:
    body = {"items": [{"kind": "molecule", "payload": {"smiles": smiles}}], "wait_s": 20}
    status, job = _post(live_service, body)
    assert status == 200
    item = job["items"][0]
    assert item["reward"]["status"] == "scored"
    assert item["reward"]["value"] == 0.0
    verdict = item["verdicts"][0]
    assert verdict["status"] == "failed"
    assert verdict["feedback"]
    assert reason_part in (verdict["feedback"] + (verdict["reason"] or "")).lower()


def test_schema_violation_feedback_names_the_path(live_service: Service) -> None:
    item = {
        "kind": "json",
        "payload": {"tool": "search", "args": {"q": 3}},
        "reference": {
            "schema": {
                "type": "object",
                "properties": {"args": {"properties": {"q": {"type": "string"}}}},
            }
        },
    }
    status, job = _post(live_service, {"items": [item], "wait_s": 20})
    assert status == 200
    verdict = job["items"][0]["verdicts"][0]
    assert verdict["status"] == "failed"
    assert "$.args.q" in verdict["feedback"]
    assert job["items"][0]["reward"]["value"] == 0.0


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"deadline_s": 1e300}, "body.deadline_s"),
        ({"policy": "default\u0000"}, "body.policy"),
        ({"policy": "Not A Slug"}, "body.policy"),
        ({"items": [{**MOLECULE, "metadata": {"group": "g" * 300}}]}, "body.items[0].molecule"),
        ({"items": [{**MOLECULE, "metadata": {"group": {"a": 1}}}]}, "body.items[0].molecule"),
    ],
)
def test_values_the_service_cannot_store_are_422(
    live_service: Service, change: dict[str, object], where: str
) -> None:
    # Found by fuzzing (tests/e2e/test_api_fuzz.py): each of these used to be a 500.
    status, body = _post(live_service, {"items": [MOLECULE], **change})
    assert status == 422, body
    assert body["errors"][0]["loc"].startswith(where)


def test_policy_paths_reject_what_no_policy_can_be_named(live_service: Service) -> None:
    with live_service.client() as client:
        bad_name = client.get("/v1/policies/a%00b")
        bad_version = client.get(f"/v1/policies/default/versions/{2**40}")
    assert bad_name.status_code == 422
    assert bad_version.status_code == 422
