"""judge.prm in the ladder, on the real PostgreSQL: a trajectory's steps judged by the process
judge (the FAULT-INJECTION STUB, judge_stub.py, as a real HTTP server) with the steps before
them, their scores the trajectory's step_rewards; the cost ledger charging the judge's tokens at
the endpoint's price; the cache telling the same step after other steps apart; and an endpoint
that is down waited for until the job's deadline, then an infra_error that says so."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from judge_stub import JudgeStub
from sqlalchemy import select

from tiers.judge.client import reset_state
from verifier_service.core.db import reset_engine_cache, transaction
from verifier_service.core.migrate import upgrade
from verifier_service.jobs import service as jobs
from verifier_service.jobs.schemas import RewardRequest
from verifier_service.ladder.execute import execute
from verifier_service.ladder.models import CostLedgerEntry, Item
from verifier_service.ladder.runs import prepare_tier_run, record_tier_run
from verifier_service.policies import service as policies
from verifier_service.settings import get_settings
from verifier_service.wiring import configure_tiers

GOOD = {"content": '{"label": "good", "confidence": 0.9, "reasoning": "fine"}'}
BAD = {"content": '{"label": "bad", "confidence": 0.9, "reasoning": "wrong"}'}
PRICES = {"price_per_1k_prompt": 1.0, "price_per_1k_completion": 4.0}
ONE_CALL = (120 * 1.0 + 30 * 4.0) / 1000  # the stub's usage at those prices


def _use(monkeypatch: pytest.MonkeyPatch, url: str, pg: str, redis_url: str, **judge: str) -> None:
    endpoints = {"local": {"url": url, "model": "stub-model", **PRICES}}
    monkeypatch.setenv("VERIFIER_DATABASE__URL", pg)
    monkeypatch.setenv("VERIFIER_BROKER__URL", redis_url)
    monkeypatch.setenv("VERIFIER_JUDGE__ENDPOINTS", json.dumps(endpoints))
    monkeypatch.setenv("VERIFIER_JUDGE__BACKOFF_S", "0.05")
    for key, value in judge.items():
        monkeypatch.setenv(f"VERIFIER_JUDGE__{key.upper()}", value)
    get_settings.cache_clear()
    reset_engine_cache()
    reset_state()
    upgrade(pg)
    configure_tiers(get_settings())


@pytest.fixture
def ladder(
    monkeypatch: pytest.MonkeyPatch, own_pg_url: str, redis_url: str, stub: JudgeStub
) -> Iterator[JudgeStub]:
    _use(monkeypatch, stub.url, own_pg_url, redis_url)
    yield stub
    reset_engine_cache()
    monkeypatch.undo()
    get_settings.cache_clear()
    configure_tiers(get_settings())


def _policy() -> str:
    name = f"prm-{uuid.uuid4().hex[:8]}"
    step = {"tier": "judge.prm", "config": {"endpoint": "local"}}
    document = {
        "name": name,
        "ladders": {"json": [step], "text": [step]},
        "trajectory": {"step_aggregator": "mean", "step_weight": 1.0, "outcome_weight": 0.0},
    }
    with transaction() as session:
        policies.save(session, document)
    return name


def _run(policy: str, actions: list[str], deadline_s: float | None = None) -> dict[str, Any]:
    """Submit a trajectory of tool calls and run its tier tasks as a worker would."""
    trajectory = {
        "kind": "trajectory",
        "steps": [
            {"action": {"kind": "json", "payload": {"tool": a}}, "observation": f"ok {a}"}
            for a in actions
        ],
        "metadata": {"question": "Plan the trip"},
    }
    body = RewardRequest.model_validate(
        {"policy": policy, "items": [trajectory], "deadline_s": deadline_s}
    )
    with transaction() as session:
        submission = jobs.submit(session, body, principal="trainer", idempotency_key=None)
        job_id, dispatches = submission.job.id, list(submission.ladder.dispatches)
    for work in dispatches:
        with transaction() as session:
            run = prepare_tier_run(session, work.tier, work.kind, work.step, work.item_ids)
        assert run is not None
        verdicts = execute(run)
        with transaction() as session:
            record_tier_run(session, run, verdicts, work.item_ids)
    with transaction() as session:
        parent = session.scalars(
            select(Item).where(Item.job_id == job_id, Item.kind == "trajectory")
        ).one()
        ledger = session.scalars(
            select(CostLedgerEntry).where(CostLedgerEntry.job_id == job_id)
        ).all()
        return {
            "reward": dict(parent.reward or {}),
            "ledger": sorted((e.cost_units, e.cached) for e in ledger),
        }


def test_step_scores_become_step_rewards_and_tokens_are_priced_in_the_ledger(
    ladder: JudgeStub,
) -> None:
    marker = uuid.uuid4().hex[:6]
    rule = {"match": rf'step to grade:\n<candidate-\w+>\n{{"tool":"pay-{marker}"}}', **BAD}
    ladder.plan(default=GOOD, rules=[rule])
    actions = [f"search-{marker}", f"pay-{marker}", f"confirm-{marker}"]
    out = _run(_policy(), actions)
    reward = out["reward"]
    assert reward["status"] == "scored"
    assert reward["step_rewards"] == [1.0, 0.0, 1.0]
    assert reward["value"] == pytest.approx(2 / 3)
    # Each step's ledger row is the judge's tokens at the endpoint's price, not the tier's
    # 0.01 cost class, and the reward's cost adds them up.
    assert out["ledger"] == [(pytest.approx(ONE_CALL), False)] * 3
    assert reward["cost"]["cost_units"] == pytest.approx(3 * ONE_CALL)
    last = next(r for r in ladder.state.requests if f'"confirm-{marker}"' in _graded(r))
    user = last["messages"][1]["content"]
    assert "Task:\nPlan the trip" in user
    for earlier in (f"search-{marker}", f"pay-{marker}"):
        assert f'{{"tool":"{earlier}"}}' in user
        assert f"ok {earlier}" in user


def _graded(request: dict[str, Any]) -> str:
    return str(request["messages"][1]["content"]).split("the step to grade:", 1)[1]


def test_the_same_step_after_other_steps_is_judged_again_not_taken_from_the_cache(
    ladder: JudgeStub,
) -> None:
    ladder.plan(default=GOOD)
    policy, marker = _policy(), uuid.uuid4().hex[:6]
    _run(policy, [f"a-{marker}", f"same-{marker}"])
    assert len(ladder.state.requests) == 2
    other = _run(policy, [f"b-{marker}", f"same-{marker}"])
    assert len(ladder.state.requests) == 4  # "same" after "b" is another question
    assert other["ledger"] == [(pytest.approx(ONE_CALL), False)] * 2
    again = _run(policy, [f"a-{marker}", f"same-{marker}"])
    assert len(ladder.state.requests) == 4  # the whole trajectory again: all cached
    assert again["ledger"] == [(0.0, True)] * 2
    assert again["reward"]["step_rewards"] == [1.0, 1.0]


def test_an_endpoint_that_is_down_is_waited_for_until_the_deadline_then_said(
    monkeypatch: pytest.MonkeyPatch, own_pg_url: str, redis_url: str
) -> None:
    from judge_support import closed_port_url

    _use(
        monkeypatch, closed_port_url(), own_pg_url, redis_url,
        max_retries="1", deadline_margin_s="1", breaker_reset_s="0.3",
    )  # fmt: skip
    try:
        started = time.monotonic()
        out = _run(_policy(), [f"x-{uuid.uuid4().hex[:6]}"], deadline_s=4.0)
        waited = time.monotonic() - started
    finally:
        reset_engine_cache()
        monkeypatch.undo()
        get_settings.cache_clear()
        configure_tiers(get_settings())
    reward = out["reward"]
    assert reward["status"] == "infra_error"
    assert reward["value"] is None  # never a zero
    assert "endpoint_down_until_deadline" in reward["reason"]
    assert "judge endpoint 'local'" in reward["reason"]
    assert "until the item's deadline" in reward["reason"]
    # It kept trying until about the deadline less the margin (4 - 1 s), not one round.
    assert 2.5 <= waited < 6, waited
