"""Waiting for an endpoint that is down, within the items' deadline (tiers.base.batch_deadline,
which the ladder sets from the job's deadline), against the FAULT-INJECTION STUB
(judge_stub.py) as a real HTTP server."""

from __future__ import annotations

import threading
import time

from judge_stub import DEFAULT_REPLY, JudgeStub
from judge_support import closed_port_url, make_settings

from tiers.base import Candidate, VerdictStatus, batch_deadline
from tiers.judge.llm import JudgeLlmTier

SCALE = {"endpoint": "local", "rubric": {"criteria": "c", "scale": {"min": 0, "max": 10}}}
ITEMS = [Candidate(kind="text", payload={"text": f"t{i}"}) for i in range(3)]


def _tier(url: str) -> JudgeLlmTier:
    settings = make_settings(url).model_copy(update={"deadline_margin_s": 0.5, "max_retries": 1})
    return JudgeLlmTier(settings)


def test_an_endpoint_that_comes_back_before_the_deadline_scores_the_items(
    stub: JudgeStub,
) -> None:
    stub.plan(default={"status": 503})  # down: every try fails, the circuit opens

    def recover() -> None:
        time.sleep(1.5)
        stub.plan(default={"content": DEFAULT_REPLY})  # up again

    threading.Thread(target=recover, daemon=True).start()
    token = batch_deadline.set(time.time() + 10)
    try:
        started = time.monotonic()
        verdicts = _tier(stub.url).verify_batch(ITEMS, SCALE)
    finally:
        batch_deadline.reset(token)
    assert [v.status for v in verdicts] == [VerdictStatus.passed] * 3
    assert 1.5 <= time.monotonic() - started < 9


def test_without_a_deadline_a_dead_endpoint_is_one_round_of_retries(stub: JudgeStub) -> None:
    started = time.monotonic()
    (verdict,) = _tier(closed_port_url()).verify_batch(ITEMS[:1], SCALE)
    assert verdict.reason in ("endpoint_failed", "endpoint_unavailable")
    assert time.monotonic() - started < 2


def test_a_dead_endpoint_ends_at_the_deadline_less_the_margin_and_says_so() -> None:
    token = batch_deadline.set(time.time() + 2.5)
    try:
        started = time.monotonic()
        verdicts = _tier(closed_port_url()).verify_batch(ITEMS, SCALE)
        waited = time.monotonic() - started
    finally:
        batch_deadline.reset(token)
    assert {v.reason for v in verdicts} == {"endpoint_down_until_deadline"}
    assert all(v.score is None for v in verdicts)
    assert "until the item's deadline" in verdicts[0].feedback
    assert "judge endpoint 'local'" in verdicts[0].feedback
    assert 1.8 <= waited < 3.5, waited  # 2.5 s less the 0.5 s margin
