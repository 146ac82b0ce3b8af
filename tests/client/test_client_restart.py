"""The client rides out an API restart: killed, down for a while, started again on its port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import Service, start_service, wait_ready

from verifier_service.client import (
    RetryPolicy,
    RewardStatus,
    ServiceConnectionError,
    VerifierClient,
)

DOWN_S = 12.0  # longer than the old retry budget (4 retries, about 4 s in all)


@pytest.fixture
def service(tmp_path: Path, own_pg_url: str, redis_url: str) -> Iterator[Service]:
    svc = start_service(
        tmp_path,
        "ladder,tier.fast,callbacks",
        VERIFIER_DATABASE__URL=own_pg_url,
        VERIFIER_BROKER__URL=redis_url,
    )
    yield svc
    svc.stop_all()


def restart_api_after(service: Service, down_s: float) -> threading.Thread:
    port = service.base_url.rsplit(":", 1)[1]
    service.stop("api", sig=9)

    def bring_back() -> None:
        time.sleep(down_s)
        api = service.start("api", "api", "--port", port)
        wait_ready(service.base_url, process=api)

    thread = threading.Thread(target=bring_back, daemon=True)
    thread.start()
    return thread


def test_default_client_rides_out_a_restart_with_one_job(service: Service) -> None:
    items: list[dict[str, Any]] = [
        {"kind": "molecule", "payload": {"smiles": s}} for s in ("CCO", "c1ccccc1O", "C1CC")
    ]
    with VerifierClient(service.base_url, api_key=service.api_key) as client:
        client.score(items[:1], timeout_s=60)  # the API answers before the restart
        thread = restart_api_after(service, DOWN_S)
        started = time.monotonic()
        (job,) = client.score_jobs(items, timeout_s=120, idempotency_key="restart-1")
        took = time.monotonic() - started
        thread.join()
        # The same key again names the same job: every retry carried it.
        again = client.submit(items, idempotency_key="restart-1")
    assert took >= DOWN_S - 1, "the request should have waited for the API to come back"
    rewards = [item.reward for item in job.items]
    assert [r.status if r else None for r in rewards] == [RewardStatus.scored] * 3
    assert again.id == job.id


def test_the_ride_out_is_bounded_and_configurable(service: Service) -> None:
    port = service.base_url.rsplit(":", 1)[1]
    service.stop("api", sig=9)
    retry = RetryPolicy(retries=1, backoff_s=0.1, max_backoff_s=0.5, ride_out_s=3.0)
    with VerifierClient(service.base_url, api_key=service.api_key, retry=retry) as client:
        started = time.monotonic()
        with pytest.raises(ServiceConnectionError, match="attempts in"):
            client.submit([{"kind": "molecule", "payload": {"smiles": "CCO"}}])
        took = time.monotonic() - started
    assert 3.0 <= took < 10.0
    service.start("api", "api", "--port", port)
