"""Fixtures of the judge tests: the fault-injection stub and a tier aimed at it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from judge_stub import JudgeStub

from tiers.judge.client import reset_state
from tiers.judge.llm import JudgeLlmTier
from tiers.judge.settings import JudgeEndpoint, JudgeSettings


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    reset_state()
    yield
    reset_state()


@pytest.fixture
def stub() -> Iterator[JudgeStub]:
    with JudgeStub() as server:
        yield server


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there now


def make_tier(url: str, **endpoint: object) -> JudgeLlmTier:
    settings = JudgeSettings(
        endpoints={"local": JudgeEndpoint(url=url, model="stub-model", **endpoint)},
        max_retries=2,
        backoff_s=0.01,
        backoff_max_s=5,
        breaker_failures=3,
        breaker_reset_s=0.5,
    )
    return JudgeLlmTier(settings)
