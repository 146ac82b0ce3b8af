"""A trajectory as long as the step limit allows, scored and cancelled while another trainer
waits: the other trainer's batch is scored in a few seconds and the operator's cancel answers
promptly (real API, real Celery workers, PostgreSQL and Redis).

Before: every finished step read all its trajectory's steps under the job's lock, so the long
job's tier tasks took seconds to minutes each, the fast queue's worker processes queued on the
lock behind them, another trainer's 47 items waited behind that, and the cancel (a query per
step, each reading every step) never returned.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import Service, private_backends, start_service

from verifier_service.settings import ApiSettings

SCHEMA = {"type": "object", "required": ["tool", "args"]}


def _call(tool: str, marker: str) -> dict[str, Any]:
    payload = {"tool": tool, "args": {"marker": marker}}
    return {"kind": "json", "payload": payload, "reference": {"schema": SCHEMA}}


def _trajectory(steps: int) -> dict[str, Any]:
    marker = uuid.uuid4().hex  # nothing of it cached
    return {
        "kind": "trajectory",
        "steps": [{"action": _call(f"tool{i}", marker), "observation": "ok"} for i in range(steps)],
        "final_answer": _call("answer", marker),
    }


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """The API and one worker of two processes for the fast queues, with the default limits."""
    with private_backends("long-trajectory") as (pg_url, redis_url):
        live = start_service(
            tmp_path, "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url, VERIFIER_BROKER__URL=redis_url,
        )  # fmt: skip
        try:
            yield live
        finally:
            live.stop_all()


def _wait_done(client: httpx.Client, location: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = client.get(location, params={"verdicts": "false"}).json()
    while job["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        job = client.get(location, params={"verdicts": "false"}).json()
    return job


def test_a_long_trajectory_neither_stalls_another_trainer_nor_its_cancel(service: Service) -> None:
    most = ApiSettings().max_steps
    other_key = service.create_key("other-trainer", "trainer")
    with service.client(timeout=60) as operator, service.client(60, other_key) as other:
        too_long = operator.post(
            "/v1/rewards", json={"policy": "tool-call", "items": [_trajectory(most + 1)]}
        )
        assert too_long.status_code == 422, too_long.text
        assert f"the limit is {most}" in too_long.json()["message"]
        assert "items[0].steps" in too_long.json()["message"]

        # Another trainer's batch, sent while a trajectory at the limit is being scored.
        first = operator.post(
            "/v1/rewards", json={"policy": "tool-call", "items": [_trajectory(most)]}
        )
        assert first.status_code == 202, first.text
        marker = uuid.uuid4().hex
        batch = {"policy": "tool-call", "items": [_call(f"t{i}", marker) for i in range(47)]}
        started = time.monotonic()
        small = other.post("/v1/rewards", json=batch)
        assert small.status_code == 202, small.text
        job = _wait_done(other, small.headers["location"], timeout=180)
        other_s = time.monotonic() - started
        assert job["status"] == "completed", job["status"]
        assert job["n_done"] == 47
        assert all(i["reward"]["status"] == "scored" for i in job["items"])
        first_job = _wait_done(operator, first.headers["location"], timeout=180)
        first_s = time.monotonic() - started
        assert first_job["status"] == "completed"
        assert first_job["items"][0]["reward"]["status"] == "scored"

        # A second one, cancelled by an operator while its steps are being scored.
        second = operator.post(
            "/v1/rewards", json={"policy": "tool-call", "items": [_trajectory(most)]}
        )
        assert second.status_code == 202, second.text
        started = time.monotonic()
        cancelled = operator.post(f"/v1/console/jobs/{second.json()['id']}/cancel")
        cancel_s = time.monotonic() - started
        assert cancelled.status_code == 200, cancelled.text
        second_job = _wait_done(operator, second.headers["location"], timeout=60)

    print(f"\nother trainer's 47 items: {other_s:.1f} s; the first trajectory: {first_s:.1f} s; "
          f"cancel: {cancel_s:.2f} s")  # fmt: skip
    assert other_s < 30, other_s
    assert cancel_s < 10, cancel_s
    assert second_job["status"] != "running"
    (trajectory,) = second_job["items"]
    reward = trajectory["reward"]
    assert reward["status"] == "infra_error"
    assert len(reward["step_rewards"]) == most
    assert "cancelled" in reward["reason"]
    assert len(reward["reason"]) < 2000  # the first steps named, the rest counted
