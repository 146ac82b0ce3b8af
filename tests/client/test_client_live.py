"""The Python client against the live service (real API, Celery worker, PostgreSQL, Redis)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from support import fresh_molecules

from verifier_service.client import (
    AsyncVerifierClient,
    ConflictError,
    InvalidRequestError,
    JobTimeoutError,
    NotFoundError,
    RetryPolicy,
    RewardStatus,
    ServerError,
    ServiceConnectionError,
    VerifierClient,
)

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
FAST_RETRY = RetryPolicy(retries=2, backoff_s=0.01, max_backoff_s=0.02, ride_out_s=0)


def mol(smiles: str) -> dict[str, Any]:
    return {"kind": "molecule", "payload": {"smiles": smiles}}


def unique_mol() -> dict[str, Any]:
    # A fresh molecule each time, so no verdict cache answers for it. (A chain of random length
    # gave only 280 molecules, and two tests of one live service drew the same one.)
    return mol(fresh_molecules(1)[0])


@pytest.fixture
def client(live_service: Any) -> Any:
    with VerifierClient(
        live_service.base_url,
        api_key=live_service.api_key,
        principal="client-tests",
        retry=FAST_RETRY,
    ) as c:
        yield c


def test_score_returns_rewards_in_order_with_invalid_scored_low(client: VerifierClient) -> None:
    rewards = client.score([mol(ASPIRIN), mol("C1CC"), mol("CCO")], timeout_s=60)
    assert [r.status for r in rewards] == [RewardStatus.scored] * 3
    assert rewards[0].value is not None
    assert rewards[0].value > 0.4
    assert rewards[1].value == 0.0
    assert rewards[1].reason is not None
    assert "invalid molecule" in rewards[1].reason
    assert rewards[0].fidelity == "chem.fast"


def test_large_requests_are_batched_and_keep_order(live_service: Any) -> None:
    smiles = ["C" * n for n in range(1, 8)]
    with VerifierClient(
        live_service.base_url, api_key=live_service.api_key, batch_size=3
    ) as client:
        jobs = client.score_jobs([mol(s) for s in smiles], timeout_s=60)
        rewards = client.score([mol(s) for s in smiles], timeout_s=60)
    assert [job.n_items for job in jobs] == [3, 3, 1]
    assert len({job.id for job in jobs}) == 3
    assert [r.status for r in rewards] == [RewardStatus.scored] * 7
    assert rewards[0].components["qed"] < rewards[4].components["qed"]


class RecordingTransport(httpx.HTTPTransport):
    """The real transport, keeping every request it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return super().handle_request(request)


def test_score_asks_for_rewards_only_and_jobs_keep_their_verdicts(live_service: Any) -> None:
    transport = RecordingTransport()
    with VerifierClient(
        live_service.base_url, api_key=live_service.api_key, transport=transport
    ) as client:
        molecules = [mol(ASPIRIN), unique_mol()]
        rewards = client.score(molecules, timeout_s=60)
        sent = [str(r.url.query, "ascii") for r in transport.sent]
        assert sent
        assert sent == ["verdicts=false"] * len(sent)
        slim = client.submit(molecules, wait_s=30, verdicts=False)
        full = client.get_job(slim.id)
        assert client.get_job(slim.id, verdicts=False) == slim
    assert [r.value for r in rewards] == [i.reward.value for i in full.items if i.reward]
    assert [i.verdicts for i in slim.items] == [[], []]
    assert [v.tier for i in full.items for v in i.verdicts] == ["chem.fast", "chem.fast"]
    assert [i.reward for i in slim.items] == [i.reward for i in full.items]


def test_idempotency_key_returns_the_same_job_and_rejects_a_different_body(
    client: VerifierClient,
) -> None:
    key = uuid.uuid4().hex
    first = client.submit([mol("CCN")], idempotency_key=key)
    again = client.submit([mol("CCN")], idempotency_key=key, wait_s=10)
    assert again.id == first.id
    assert again.status == "completed"
    with pytest.raises(ConflictError, match="different request") as info:
        client.submit([mol("CCC")], idempotency_key=key)
    assert info.value.hint


def test_not_ready_within_timeout_comes_back_pending(client: VerifierClient) -> None:
    rewards = client.score([unique_mol()], timeout_s=0)
    assert rewards[0].status == RewardStatus.pending
    assert rewards[0].value is None
    assert rewards[0].reason is not None
    assert "GET /v1/jobs/" in rewards[0].reason


def test_wait_and_stream_deliver_every_item(client: VerifierClient) -> None:
    job = client.submit([unique_mol(), unique_mol(), mol("c1ccccc1")])
    streamed = dict(client.stream(job.id, timeout_s=60))
    assert sorted(streamed) == [0, 1, 2]
    assert all(r.status == RewardStatus.scored for r in streamed.values())
    done = client.wait(job.id, timeout_s=10)
    assert done.status == "completed"
    assert done.n_done == 3


def test_errors_are_typed_and_carry_the_hint(client: VerifierClient) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.score([mol("CCO")], policy="no-such-policy")
    assert missing.value.hint
    assert "policies available" in missing.value.hint
    with pytest.raises(InvalidRequestError) as invalid:
        client.submit([{"kind": "molecule", "payload": {}}])
    assert invalid.value.errors
    assert "smiles" in invalid.value.errors[0]["loc"]
    with pytest.raises(NotFoundError):
        client.get_job("nope")


def test_unreachable_service_raises_after_retries() -> None:
    with VerifierClient("http://127.0.0.1:9", retry=FAST_RETRY) as client:
        with pytest.raises(ServiceConnectionError, match="after 3 attempts"):
            client.get_job("x")


def test_5xx_and_429_are_retried_then_raised() -> None:
    # Shape test: a mock transport plays the service failing twice, then answering.
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers.get("Idempotency-Key", ""))
        if len(calls) == 1:
            return httpx.Response(503, json={"error": "unavailable", "message": "restarting"})
        if len(calls) == 2:
            return httpx.Response(429, json={"error": "rate_limited", "message": "slow down"})
        return httpx.Response(500, json={"error": "internal_error", "message": "boom"})

    transport = httpx.MockTransport(handler)
    with VerifierClient("http://svc", retry=FAST_RETRY, transport=transport) as client:
        with pytest.raises(ServerError, match="500 internal_error: boom"):
            client.submit([mol("CCO")])
    assert len(calls) == 3
    assert calls[0], "every POST carries an Idempotency-Key"
    assert len(set(calls)) == 1, "every retry of a POST carries the same key"


def test_async_client_scores_batches_concurrently(live_service: Any) -> None:
    async def main() -> list[Any]:
        async with AsyncVerifierClient(
            live_service.base_url,
            api_key=live_service.api_key,
            batch_size=2,
        ) as client:
            job = await client.submit([mol("CCO")], wait_s=10)
            streamed = [pair async for pair in client.stream(job.id, timeout_s=10)]
            assert streamed[0][0] == 0
            return await client.score([mol(ASPIRIN), mol("C1CC"), mol("CCO")], timeout_s=60)

    rewards = asyncio.run(main())
    assert [r.value == 0.0 for r in rewards] == [False, True, False]


def test_wait_timeout_says_which_queue_has_no_worker(client: VerifierClient) -> None:
    # No worker consumes tier.hifi in this test session's live service.
    name = f"client-dft-{uuid.uuid4().hex[:6]}"
    client.create_policy(
        f"name: {name}\n"
        "ladders: {molecule: [{tier: chem.fast}, {tier: chem.dft}]}\n"
        "reward: {molecule: {components: [{name: qed, tier: chem.fast, component: qed}]}}\n"
    )
    job = client.submit([unique_mol()], policy=name, deadline_s=5)
    with pytest.raises(JobTimeoutError, match=r"no live worker consumes its queue 'tier\.hifi'"):
        client.wait(job.id, timeout_s=1)


def test_job_cost_reports_calls_then_cache_hits(client: VerifierClient, live_service: Any) -> None:
    item = unique_mol()
    first = client.wait(client.submit([item]).id, timeout_s=60)
    fresh = client.job_cost(first.id)
    assert fresh["items"] == 1
    assert fresh["tiers"]["chem.fast"]["calls"] == 1
    assert fresh["tiers"]["chem.fast"]["cache_hits"] == 0
    assert fresh["cost_units"] > 0

    async def again() -> dict[str, Any]:
        async with AsyncVerifierClient(
            live_service.base_url, api_key=live_service.api_key, principal="client-tests"
        ) as aclient:
            job = await aclient.wait((await aclient.submit([item])).id, timeout_s=60)
            return await aclient.job_cost(job.id)

    cached = asyncio.run(again())
    assert cached["tiers"]["chem.fast"]["calls"] == 0
    assert cached["tiers"]["chem.fast"]["cache_hits"] == 1
