"""judge.prm and judge.rank through the live service: the API, a Celery worker on ladder,
tier.judge and review, PostgreSQL and Redis of its own, and the judge endpoint `judge` being
the FAULT-INJECTION STUB (judge_stub.py) run as a process. The shipped agent-prm and grpo-rank
policies load at migrate (the endpoint is configured); a trajectory's steps are judged in the
worker with the steps before them, and a GRPO group is ranked as a whole."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import (
    Service,
    judge_stub_process,
    poll_job,
    private_backends,
    start_service,
)

GOOD = {"content": '{"label": "good", "confidence": 0.9, "reasoning": "fine"}'}
BAD = {"content": '{"label": "bad", "confidence": 0.9, "reasoning": "wrong"}'}


@pytest.fixture(scope="module")
def stub_url() -> Iterator[str]:
    with judge_stub_process() as url:
        yield url


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, stub_url: str) -> Iterator[Service]:
    endpoints = {"judge": {"url": f"{stub_url}/v1", "model": "stub-judge"}}
    with private_backends("judges-live") as (pg_url, redis_url):
        running = start_service(
            tmp_path_factory.mktemp("judges-live"),
            "ladder,tier.judge,review",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=redis_url,
            VERIFIER_JUDGE__ENDPOINTS=json.dumps(endpoints),
        )
        try:
            yield running
        finally:
            running.stop_all()


def _plan(stub_url: str, default: dict[str, Any], rules: list[dict[str, Any]]) -> None:
    body = {"plan": [], "default": default, "rules": rules}
    httpx.post(f"{stub_url}/stub/plan", json=body, timeout=5).raise_for_status()


def _requests(stub_url: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{stub_url}/stub/log", timeout=5).json()["requests"])


def _score(service: Service, body: dict[str, Any]) -> list[dict[str, Any]]:
    with service.client(timeout=120) as client:
        response = client.post("/v1/rewards", json={**body, "wait_s": 60})
        assert response.status_code in (200, 202), response.text
        if response.status_code == 202:
            return list(poll_job(client, response.headers["location"], timeout=90)["items"])
        return list(response.json()["items"])


def test_agent_prm_scores_a_trajectory_step_by_step(service: Service, stub_url: str) -> None:
    tag = uuid.uuid4().hex[:6]
    rule = {"match": rf'step to grade:\n<candidate-\w+>\n{{"tool":"pay-{tag}"}}', **BAD}
    _plan(stub_url, GOOD, [rule])
    steps = [
        {
            "action": {"kind": "json", "payload": {"tool": f"{name}-{tag}"}},
            "observation": f"ok {name}",
        }
        for name in ("search", "pay", "confirm")
    ]
    trajectory = {"kind": "trajectory", "steps": steps, "metadata": {"question": "Buy a ticket"}}
    (item,) = _score(service, {"policy": "agent-prm", "items": [trajectory]})
    reward = item["reward"]
    assert reward["status"] == "scored", reward
    assert reward["step_rewards"] == [1.0, 0.0, 1.0]
    assert reward["value"] == pytest.approx(2 / 3)
    asked = [r for r in _requests(stub_url) if tag in str(r["messages"])]
    assert len(asked) == 3
    last = next(
        r
        for r in asked
        if f"confirm-{tag}" in r["messages"][1]["content"].split("step to grade")[1]
    )
    user = last["messages"][1]["content"]
    assert "Task:\nBuy a ticket" in user
    assert f'{{"tool":"search-{tag}"}}' in user
    assert "ok pay" in user
    assert last["logprobs"] is True  # asked; the stub sends none: the reply's label scores


def ranking(*labels: str) -> dict[str, str]:
    return {"content": json.dumps({"ranking": list(labels), "reasoning": "r"})}


def test_grpo_rank_ranks_a_group_and_each_sample_gets_its_place(
    service: Service, stub_url: str
) -> None:
    tag = uuid.uuid4().hex[:6]
    rules = [  # the judge prefers "best", then "middle", then "worst", in either order
        {"match": rf"Response A:\n<candidate-\w+>\nworst {tag}", **ranking("C", "B", "A")},
        {"match": rf"Response A:\n<candidate-\w+>\nbest {tag}", **ranking("A", "B", "C")},
    ]
    _plan(stub_url, ranking("A", "B", "C"), rules)
    items = [
        {"kind": "text", "payload": {"text": f"{t} {tag}"}, "metadata": {"group": f"p-{tag}"}}
        for t in ("worst", "middle", "best")
    ]
    lone = {"kind": "text", "payload": {"text": f"alone {tag}"}}
    rewards = [
        i["reward"] for i in _score(service, {"policy": "grpo-rank", "items": [*items, lone]})
    ]
    assert [r["value"] for r in rewards[:3]] == [0.0, 0.5, 1.0]
    assert rewards[3]["status"] == "infra_error"
    assert "no_group" in rewards[3]["reason"]
    assert rewards[3]["value"] is None
    assert len([r for r in _requests(stub_url) if tag in str(r["messages"])]) == 2
