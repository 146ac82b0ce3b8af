"""Fixtures of the judge tests: the fault-injection stub, and fresh breakers for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from judge_stub import JudgeStub

from tiers.judge.client import reset_state


@pytest.fixture(autouse=True)
def _fresh_breakers() -> Iterator[None]:
    reset_state()
    yield
    reset_state()


@pytest.fixture
def stub() -> Iterator[JudgeStub]:
    with JudgeStub() as server:
        yield server
