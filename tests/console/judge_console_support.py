"""What the console's judge and calibration tests share: a service whose judge endpoint is the
FAULT-INJECTION STUB of the OpenAI protocol (tests/tiers/judge/judge_stub.py, run as a process,
answering as the test planned), people answering its review queues over the review API, the
calibration JSON, and the signed-in page with its screenshots.

(Named apart from tests/tiers/judge/judge_support.py: both folders are on sys.path in one
pytest run, and one module name would shadow the other.)"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import OPERATOR_PASSWORD, operator_tab
from support import Service, judge_stub_process, private_backends, start_service

#: The workers a judge service runs: the ladder, the answer tier, the judge, people's queues.
QUEUES = "ladder,tier.fast,tier.judge,callbacks,review"


def reply(label: str, confidence: float) -> str:
    """A judge's reply naming a label, as the stub sends it."""
    return json.dumps({"label": label, "confidence": confidence, "reasoning": "as planned"})


@contextmanager
def judge_service(
    tmp_path_factory: pytest.TempPathFactory,
    owner: str,
    rules: list[dict[str, Any]],
    **endpoint: Any,
) -> Iterator[tuple[Service, str]]:
    """A service with its own database and Redis whose judge endpoint `judge` is the stub,
    answering by `rules` (else sure: "correct", confidence 0.95); (service, database URL)."""
    with judge_stub_process() as base:
        plan = {"plan": [], "rules": rules, "default": {"content": reply("correct", 0.95)}}
        httpx.post(f"{base}/stub/plan", json=plan, timeout=5).raise_for_status()
        endpoints = {"judge": {"url": f"{base}/v1", "model": "stub-judge-7b", **endpoint}}
        with private_backends(owner) as (pg_url, redis_url):
            service = start_service(
                tmp_path_factory.mktemp(owner), QUEUES,
                VERIFIER_DATABASE__URL=pg_url, VERIFIER_BROKER__URL=redis_url,
                VERIFIER_JUDGE__ENDPOINTS=json.dumps(endpoints),
            )  # fmt: skip
            try:
                yield service, pg_url
            finally:
                service.stop_all()


def make_operator(service: Service, tag: str) -> str:
    """A new operator (a person with OPERATOR_PASSWORD); their name."""
    operator = f"op-{tag}"
    made = service.cli(
        "users", "create", "--role", "operator", operator, stdin=OPERATOR_PASSWORD + "\n"
    )
    assert made.returncode == 0, made.stderr
    return operator


def answer_reviews(
    reviewer: httpx.Client,
    queues: list[str],
    people: Mapping[str, float],
    deadline: float,
    explain: Any = None,
) -> None:
    """People answer every task of `queues` until each text of `people` has its score (the
    rubric's dimension `correct`); `explain()` says what went wrong if time runs out."""
    answered = 0
    while answered < len(people):
        assert time.monotonic() < deadline, explain() if explain else "reviews timed out"
        leased = 0
        for queue in queues:
            lease = reviewer.post(f"/v1/review/queues/{queue}/next")
            if lease.status_code in (204, 404):  # no task (or no queue) yet
                continue
            assert lease.status_code == 200, lease.text
            view = lease.json()
            submitted = reviewer.post(
                f"/v1/review/leases/{view['lease_id']}/submit",
                json={"values": {"correct": people[view["task"]["payload"]["text"]]}},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            assert submitted.status_code == 204, submitted.text
            answered += 1
            leased += 1
        if not leased:  # the judge is at it
            time.sleep(0.3)


def completed(trainer: httpx.Client, location: str, deadline: float) -> dict[str, Any]:
    """The job at `location` once it completed."""
    job: dict[str, Any] = trainer.get(location).json()
    while job["status"] != "completed" and time.monotonic() < deadline:
        time.sleep(0.2)
        job = trainer.get(location).json()
    assert job["status"] == "completed", job
    return job


def calibration(service: Service, window: str = "24h", **params: Any) -> dict[str, Any]:
    """The calibration JSON, as an operator's client reads it."""
    with service.client() as client:
        answer = client.get("/v1/console/calibration", params={"window": window, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@contextmanager
def signed_in(
    browser: Any, service: Service, operator: str, path: str = "/console/calibration"
) -> Iterator[Any]:
    """A 1280 px tab signed in as `operator` on `path`, loaded again with the console watched:
    on leaving, no script error and no off-site request."""
    with operator_tab(browser, service.base_url, path, operator, viewport=(1280, 1000)) as tab:
        errors: list[str] = []
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.reload()
        yield tab
    assert errors == []


def shot(page: Any, name: str, tmp_path: Path) -> None:
    """A full-page screenshot: copied to docs/img/ by hand when the page changes
    (VERIFIER_SCREENSHOTS=docs/img)."""
    folder = Path(os.environ.get("VERIFIER_SCREENSHOTS") or tmp_path)
    page.screenshot(path=str(folder / name), full_page=True)
