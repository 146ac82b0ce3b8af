"""TRL, verl and OpenRLHF adapter shapes, against the live service where it can show them.

`pending` comes from the real service (a reward not ready within the trainer's timeout);
`infra_error` cannot be provoked from a healthy service on demand, so those cases are shape tests
over httpx.MockTransport answering with a body shaped like the service's.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from support import free_port, fresh_molecules, wait_ready

from verifier_service.client import VerifierClient
from verifier_service.client.mappings import SmilesMapping
from verifier_service.client.trl import AsyncTRLReward, TRLReward
from verifier_service.client.verl import compute_score, compute_score_batch

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


def infra_error_transport() -> httpx.MockTransport:
    """Answers every POST /v1/rewards with a completed job whose second item is infra_error."""

    def handler(request: httpx.Request) -> httpx.Response:
        n = len(json.loads(request.content)["items"])
        items = []
        for index in range(n):
            ok = index != 1
            items.append(
                {
                    "index": index,
                    "kind": "molecule",
                    "state": "done",
                    "reward": {
                        "value": 0.7 if ok else None,
                        "status": "scored" if ok else "infra_error",
                        "reason": None if ok else "chem.fast: worker lost",
                        "components": {"qed": 0.7} if ok else {},
                    },
                }
            )
        now = datetime.now(UTC).isoformat()
        return httpx.Response(
            200,
            json={
                "id": "job1",
                "status": "completed",
                "policy": "default",
                "policy_version": 1,
                "created_at": now,
                "finished_at": now,
                "n_items": n,
                "n_done": n,
                "items": items,
            },
        )

    return httpx.MockTransport(handler)


class Logs:
    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.extra: dict[str, list[Any]] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.metrics[name] = value

    def log_extra(self, column: str, values: list[Any]) -> None:
        self.extra[column] = values


# -- TRL -----------------------------------------------------------------------------------


def test_trl_reward_scores_completions_and_logs_components(live_service: Any) -> None:
    reward = TRLReward(
        SmilesMapping(), base_url=live_service.base_url, api_key=live_service.api_key, timeout_s=60
    )
    logs = Logs()
    values = reward(
        prompts=["Write a drug:"] * 3,
        completions=[f"Sure: {ASPIRIN}", "C1CC", [{"role": "assistant", "content": "CCO"}]],
        target=["x", "y", "z"],
        log_metric=logs.log_metric,
        log_extra=logs.log_extra,
    )
    assert reward.__name__ == "verifier"
    assert values[0] is not None
    assert values[0] > 0.4
    assert values[1] == 0.0
    assert values[2] is not None
    assert logs.metrics["verifier/scored_frac"] == 1.0
    assert 0 < logs.metrics["verifier/qed"] < 1
    assert logs.extra["verifier_status"] == ["scored"] * 3


def test_trl_reward_gives_none_for_pending(live_service: Any) -> None:
    reward = TRLReward(
        SmilesMapping(), base_url=live_service.base_url, api_key=live_service.api_key, timeout_s=0
    )
    logs = Logs()
    values = reward(prompts=["p"], completions=fresh_molecules(1), log_metric=logs.log_metric)
    assert values == [None]
    assert logs.metrics["verifier/pending_frac"] == 1.0


def test_trl_reward_gives_none_for_infra_error() -> None:
    client = VerifierClient("http://svc", transport=infra_error_transport())
    values = TRLReward(SmilesMapping(), client=client)(["p", "p"], ["CCO", "CCN"])
    assert values == [0.7, None]


def test_async_trl_reward_matches_the_sync_one(live_service: Any) -> None:
    import asyncio

    reward = AsyncTRLReward(
        SmilesMapping(), base_url=live_service.base_url, api_key=live_service.api_key, name="chem"
    )
    values = asyncio.run(reward(prompts=["p", "p"], completions=[ASPIRIN, "C1CC"]))
    assert values[0] is not None
    assert values[0] > 0.4
    assert values[1] == 0.0


# -- verl ----------------------------------------------------------------------------------


def test_verl_compute_score_returns_score_and_flags(live_service: Any) -> None:
    out = compute_score(
        "chem",
        f"My answer: {ASPIRIN}",
        None,
        base_url=live_service.base_url,
        api_key=live_service.api_key,
    )
    assert out["score"] > 0.4
    assert (out["scored"], out["pending"], out["infra_error"]) == (1.0, 0.0, 0.0)
    invalid = compute_score(
        "chem", "C1CC", None, base_url=live_service.base_url, api_key=live_service.api_key
    )
    assert invalid["score"] == 0.0
    assert invalid["scored"] == 1.0
    assert set(out) == set(invalid), "verl tabulates extras by key: every sample has the same"


def test_verl_batch_form_has_the_same_keys_for_every_sample(live_service: Any) -> None:
    outs = compute_score_batch(
        ["chem"] * 3,
        [ASPIRIN, "C1CC", "CCO"],
        [None] * 3,
        base_url=live_service.base_url,
        api_key=live_service.api_key,
    )
    assert [set(o) for o in outs] == [set(outs[0])] * 3
    assert "qed" in outs[0]
    assert math.isnan(outs[1]["qed"])


def test_verl_pending_scores_missing_score_and_says_so(live_service: Any) -> None:
    (out,) = compute_score_batch(
        ["chem"], fresh_molecules(1), [None], base_url=live_service.base_url,
        api_key=live_service.api_key, timeout_s=0,
        missing_score=-1.0,
    )  # fmt: skip
    assert out["score"] == -1.0
    assert (out["scored"], out["pending"], out["infra_error"]) == (0.0, 1.0, 0.0)


def test_verl_infra_error_is_flagged() -> None:
    client = VerifierClient("http://svc", transport=infra_error_transport())
    outs = compute_score_batch(["a", "b"], ["CCO", "CCN"], [None, None], client=client)
    assert outs[1]["score"] == 0.0
    assert outs[1]["infra_error"] == 1.0
    assert outs[0]["infra_error"] == 0.0


# -- OpenRLHF ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def openrlhf_url(live_service: Any) -> Iterator[str]:
    """The live API when it mounts /v1/compat/openrlhf; else an API process that does. The
    URL carries a trainer key in its path (`/k/KEY`): OpenRLHF sends no Authorization header."""
    key = live_service.create_key("openrlhf-trainer", "trainer")
    probe = httpx.post(f"{live_service.base_url}/v1/compat/openrlhf", json={"query": ["C"]})
    if probe.status_code != 404:
        yield f"{live_service.base_url}/k/{key}"
        return
    port = free_port()
    code = (
        "import uvicorn\n"
        "from verifier_service.app import create_app\n"
        "from verifier_service.compat.openrlhf import router\n"
        "app = create_app()\napp.include_router(router)\n"
        f"uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], env=live_service.env)
    try:
        wait_ready(f"http://127.0.0.1:{port}", process=process)
        yield f"http://127.0.0.1:{port}/k/{key}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_openrlhf_scores_the_response_after_the_prompt(openrlhf_url: str) -> None:
    prompt = "Propose a drug-like molecule. C"  # the prompt itself ends in a SMILES-like token
    body = {
        "query": [prompt + " " + ASPIRIN, prompt + " C1CC", prompt + " CCO"],
        "prompts": [prompt] * 3,
        "labels": [None, None, None],
    }
    response = httpx.post(
        f"{openrlhf_url}/v1/compat/openrlhf?policy=default", json=body, timeout=60
    )
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["rewards"][0] > 0.4
    assert out["rewards"][1] == 0.0
    assert out["scores"] == out["rewards"]
    assert out["extra_logs"]["scored"] == [1.0, 1.0, 1.0]
    assert out["extra_logs"]["qed"][1] == 0.0
    assert len(out["extra_logs"]["qed"]) == 3


def test_openrlhf_pending_gets_missing_reward_and_a_flag(openrlhf_url: str) -> None:
    response = httpx.post(
        f"{openrlhf_url}/v1/compat/openrlhf?policy=default&wait_s=0&missing_reward=-1",
        json={"query": fresh_molecules(1)},
        timeout=30,
    )
    out = response.json()
    assert out["rewards"] == [-1.0]
    assert out["extra_logs"]["pending"] == [1.0]


def test_openrlhf_rejects_mismatched_prompts_with_a_hint(openrlhf_url: str) -> None:
    response = httpx.post(
        f"{openrlhf_url}/v1/compat/openrlhf", json={"query": ["CCO", "CCN"], "prompts": ["p"]}
    )
    assert response.status_code == 422
    assert response.json()["message"] == "prompts has 1 entries for 2 queries"
    assert "hint" in response.json()


def test_openrlhf_unknown_policy_is_404(openrlhf_url: str) -> None:
    response = httpx.post(
        f"{openrlhf_url}/v1/compat/openrlhf?policy=nope", json={"query": ["CCO"]}, timeout=30
    )
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
