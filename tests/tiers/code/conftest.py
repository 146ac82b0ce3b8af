"""Fixtures for the sandbox tests: the real Docker engine and the real sandbox image.

These tests never skip. Without an engine or the image they fail and say how to get them
(`bash .ci/install-docker.sh`, `verifier-service sandbox build-image`), as CI provides both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from tiers import registry
from tiers.base import Candidate, Verdict
from tiers.code import pool as pool_module
from tiers.code.engine import OWNER_LABEL, SandboxUnavailableError, check_engine, make_client
from tiers.code.pool import SandboxPool
from tiers.code.sandbox import SandboxTier
from tiers.code.settings import SandboxSettings

# Short limits keep the hostile suite quick on a shared 2-core machine.
TEST_SANDBOX = {
    "pool_size": 2,
    "concurrency": 4,
    "default_timeout_s": 3.0,
    "default_memory_mb": 128,
    "pids_limit": 48,
    "tmpfs_mb": 32,
    "output_cap_bytes": 8 * 1024,
    "output_limit_bytes": 1024 * 1024,
}


@pytest.fixture(scope="session")
def sandbox_settings() -> Iterator[SandboxSettings]:
    """Sandbox settings with test limits, handed to the code tiers as a service would."""
    settings = SandboxSettings(**TEST_SANDBOX)
    try:
        check_engine(settings)
    except SandboxUnavailableError as exc:
        pytest.fail(
            f"the sandbox tests need a real Docker engine and image: {exc}\n"
            "Set them up with `bash .ci/install-docker.sh && "
            "verifier-service sandbox build-image --if-missing`.",
            pytrace=False,
        )
    # What the service does at start-up: POST /run_code and get_pool() take these.
    registry.configure({"code": settings})
    yield settings
    pool_module.shutdown_pool()
    registry.configure({})


@pytest.fixture(scope="session")
def docker_client(sandbox_settings: SandboxSettings) -> Any:
    return make_client(sandbox_settings)


@pytest.fixture(scope="session")
def sandbox_pool(sandbox_settings: SandboxSettings, docker_client: Any) -> Iterator[SandboxPool]:
    """The process-wide pool the tier uses; at the end every container it made must be gone."""
    pool = pool_module.get_pool(sandbox_settings)
    yield pool
    pool_module.shutdown_pool()
    left = docker_client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={pool.owner}"})
    assert not left, f"containers left behind after pool shutdown: {[c['Id'][:12] for c in left]}"


class RunSpy:
    """Records the containers the pool used, so tests can check each one was removed."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.container_ids: list[str] = []
        self._run = pool.run

    def __call__(self, spec: dict[str, Any], timeout_s: float, memory_mb: int) -> Any:
        outcome = self._run(spec, timeout_s, memory_mb)
        self.container_ids.append(outcome.container_id)
        return outcome


@pytest.fixture
def used_containers(
    sandbox_pool: SandboxPool, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[str]]:
    """Ids of containers the test's candidates ran in; after the test none may exist."""
    spy = RunSpy(sandbox_pool)
    monkeypatch.setattr(sandbox_pool, "run", spy)
    yield spy.container_ids
    assert sandbox_pool.wait_removed(15), "used sandbox containers were not removed in 15 s"
    existing = {c["Id"] for c in docker_client.api.containers(all=True)}
    left = [cid[:12] for cid in spy.container_ids if cid in existing]
    assert not left, f"containers left behind: {left}"


@pytest.fixture(scope="session")
def tier(sandbox_settings: SandboxSettings) -> SandboxTier:
    return SandboxTier(sandbox_settings)


@pytest.fixture
def judge(
    tier: SandboxTier, sandbox_pool: SandboxPool, used_containers: list[str]
) -> Callable[..., Verdict]:
    """Judge one code candidate through the tier (and so through the real pool)."""

    def run(code: str, tests: str, config: dict[str, Any] | None = None, **extra: Any) -> Verdict:
        item = Candidate(kind="code", payload={"code": code, "tests": tests, **extra})
        (verdict,) = tier.verify_batch([item], config or {})
        return verdict

    return run


@pytest.fixture
def container_events(docker_client: Any) -> Callable[[str, float, float], list[str]]:
    """Engine events (create, start, destroy, ...) of one pool's containers between two
    time.time() instants, from the engine's own record."""

    def events(owner: str, since: float, until: float) -> list[str]:
        while time.time() < int(until) + 1:  # the events API takes whole seconds
            time.sleep(0.05)
        found = docker_client.api.events(
            since=datetime.fromtimestamp(int(since)),
            until=datetime.fromtimestamp(int(until) + 1),
            filters={"type": "container", "label": f"{OWNER_LABEL}={owner}"},
            decode=True,
        )
        return [e["Action"] for e in found if since * 1e9 <= e["timeNano"] <= until * 1e9]

    return events
