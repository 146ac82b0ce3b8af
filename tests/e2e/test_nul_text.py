"""A NUL character in what a policy wrote is bad output like any other (issue 36, item 3).

PostgreSQL refuses NUL in a text column: a SMILES holding one made the verdict's feedback
unwritable, so the request answered 500 (with wait_s) or every item of its batch ended
infra_error. Now it is a scored 0 with its reason, on both databases, and the other items of
the batch keep their own rewards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import Service, poll_job, private_backends, private_redis_db, start_service

GOOD = "CCO"
NUL_SMILES = "CC\x00O"


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """The API and a fast-queue worker on PostgreSQL or on the embedded default's SQLite."""
    data_dir = tmp_path_factory.mktemp(f"nul-{request.param}")
    if request.param == "postgresql":
        with private_backends("nul-text") as (db_url, broker_url):
            service = start_service(
                data_dir, "ladder,tier.fast",
                VERIFIER_DATABASE__URL=db_url, VERIFIER_BROKER__URL=broker_url,
            )  # fmt: skip
            yield service
            service.stop_all()
    else:
        with private_redis_db("nul-text") as broker_url:
            service = start_service(data_dir, "ladder,tier.fast", VERIFIER_BROKER__URL=broker_url)
            yield service
            service.stop_all()


def _molecule(smiles: str) -> dict[str, object]:
    return {"kind": "molecule", "payload": {"smiles": smiles}}


def _assert_scored_zero_with_reason(item: dict[str, object]) -> None:
    reward = item["reward"]
    assert isinstance(reward, dict)
    assert reward["status"] == "scored", reward
    assert reward["value"] == 0.0
    verdicts = item["verdicts"]
    assert isinstance(verdicts, list)
    assert verdicts[0]["status"] == "failed"
    assert verdicts[0]["reason"]
    assert verdicts[0]["feedback"]
    assert "\x00" not in verdicts[0]["feedback"]


def test_a_nul_in_a_smiles_is_a_scored_zero_inline(service: Service) -> None:
    body = {"items": [_molecule(NUL_SMILES)], "wait_s": 20}
    with service.client() as client:
        response = client.post("/v1/rewards", json=body)
    assert response.status_code == 200, response.text
    _assert_scored_zero_with_reason(response.json()["items"][0])


def test_a_nul_in_one_smiles_does_not_spoil_its_batch(service: Service) -> None:
    # 20 items, one of them with the NUL: the queued lane (no wait_s), one tier task for all.
    smiles = [GOOD, "c1ccccc1", "CC(=O)O", "CCN", "CCCl"] * 4
    smiles[7] = NUL_SMILES
    body = {"items": [_molecule(s) for s in smiles]}
    with service.client() as client:
        response = client.post("/v1/rewards", json=body)
        assert response.status_code == 202, response.text
        job = poll_job(client, response.headers["location"], timeout=60)
    items = job["items"]
    _assert_scored_zero_with_reason(items[7])
    for index, item in enumerate(items):
        if index != 7:
            assert item["reward"]["status"] == "scored", (index, item["reward"])
            assert item["reward"]["value"] > 0, (index, item["reward"])


def test_a_nul_in_a_json_payload_and_schema_is_scored(service: Service) -> None:
    # The schema tier's feedback echoes the payload and the pattern: both hold a NUL.
    item = {
        "kind": "json",
        "payload": {"q": "a\x00b"},
        "reference": {"schema": {"properties": {"q": {"pattern": "^x\x00$"}}}},
    }
    with service.client() as client:
        response = client.post("/v1/rewards", json={"items": [item], "wait_s": 20})
    assert response.status_code == 200, response.text
    _assert_scored_zero_with_reason(response.json()["items"][0])
