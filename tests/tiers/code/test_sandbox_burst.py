"""Bursts of candidates, as one RL training step sends them, against the real engine."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tiers.base import Candidate, VerdictStatus
from tiers.code import sandbox as sandbox_module
from tiers.code.attach import RunOutcome
from tiers.code.engine import OWNER_LABEL
from tiers.code.pool import SandboxPool
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings

Events = Callable[[str, float, float], list[str]]


def batch(size: int) -> tuple[list[Candidate], list[VerdictStatus]]:
    """`size` small candidates with tests; every third one is wrong."""
    items, expected = [], []
    for i in range(size):
        wrong = i % 3 == 2
        code = f"def f(x):\n    return x * {i + 1 if wrong else i}\n"
        items.append(
            Candidate(kind="code", payload={"code": code, "tests": f"assert f(2) == {2 * i}"})
        )
        expected.append(VerdictStatus.failed if wrong else VerdictStatus.passed)
    return items, expected


class TierPool:
    """A pool of its own size behind the tier, recording the container each candidate ran in."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.used: list[str] = []
        self._run = pool.run

    def run(self, spec: dict[str, Any], timeout_s: float, memory_mb: int) -> RunOutcome:
        outcome = self._run(spec, timeout_s, memory_mb)
        self.used.append(outcome.container_id)
        return outcome


@pytest.fixture
def sized_pool(
    sandbox_settings: SandboxSettings, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], TierPool]]:
    """make(size): a pool of `size` behind the tier, full and settled; shut down afterwards."""
    made: list[SandboxPool] = []

    def make(size: int) -> TierPool:
        pool = SandboxPool(sandbox_settings.model_copy(update={"pool_size": size}))
        made.append(pool)
        assert pool.wait_full(60), f"the pool did not fill to {size} warm containers"
        spy = TierPool(pool)
        monkeypatch.setattr(pool, "run", spy.run)
        monkeypatch.setattr(sandbox_module, "get_pool", lambda _settings: pool)
        return spy

    yield make
    for pool in made:
        pool.shutdown()
        left = docker_client.api.containers(
            all=True, filters={"label": f"{OWNER_LABEL}={pool.owner}"}
        )
        assert not left, f"containers left behind after pool shutdown: {len(left)}"


def test_burst_within_the_pool_runs_on_warm_containers_only(
    tier: SandboxTier,
    sized_pool: Callable[[int], TierPool],
    docker_client: Any,
    container_events: Events,
) -> None:
    spy = sized_pool(6)
    items, expected = batch(6)
    since = time.time()
    verdicts = tier.verify_batch(items, {"isolation": "container"})  # the pool's burst
    until = time.time()
    assert [v.status for v in verdicts] == expected
    assert len(set(spy.used)) == 6  # one container per candidate
    # The engine neither started nor removed a container while the burst ran ...
    during = container_events(spy.pool.owner, since, until)
    assert not {"create", "start", "destroy"} & set(during), during
    # ... and afterwards it removes every used one and refills.
    assert spy.pool.wait_full(30), "the pool did not refill after the burst"
    existing = {c["Id"] for c in docker_client.api.containers(all=True)}
    assert not existing & set(spy.used)


def test_burst_larger_than_the_pool_gets_containers_started_for_it(
    tier: SandboxTier,
    sized_pool: Callable[[int], TierPool],
    docker_client: Any,
    container_events: Events,
) -> None:
    spy = sized_pool(3)
    items, expected = batch(12)
    since = time.time()
    verdicts = tier.verify_batch(items, {"isolation": "container"})  # the pool's burst
    until = time.time()
    assert [v.status for v in verdicts] == expected
    assert len(set(spy.used)) == 12  # still one fresh container per candidate
    # Nine started on demand, not after acquire_timeout_s: the burst did not stall.
    assert until - since < 15
    assert container_events(spy.pool.owner, since, until).count("create") >= 9
    assert spy.pool.wait_removed(15)
    existing = {c["Id"] for c in docker_client.api.containers(all=True)}
    assert not existing & set(spy.used)
