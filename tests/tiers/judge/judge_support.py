"""Helpers of the judge tests: a tier aimed at a URL, and a URL where nothing listens."""

from __future__ import annotations

import socket

from tiers.judge.llm import JudgeLlmTier
from tiers.judge.settings import JudgeEndpoint, JudgeSettings


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there now


def make_settings(url: str, **endpoint: object) -> JudgeSettings:
    """Judge settings with one endpoint, `local`, and quick retries and breaker."""
    return JudgeSettings(
        endpoints={"local": JudgeEndpoint(url=url, model="stub-model", **endpoint)},
        max_retries=2,
        backoff_s=0.01,
        backoff_max_s=5,
        breaker_failures=3,
        breaker_reset_s=0.5,
    )


def make_tier(url: str, **endpoint: object) -> JudgeLlmTier:
    """A judge.llm tier with one endpoint, `local`, and quick retries and breaker."""
    return JudgeLlmTier(make_settings(url, **endpoint))
