"""Through a live service on PostgreSQL and a real browser: a reviewer signs in with a cookie
session, takes a task, answers it on the pages without JavaScript and signs out, while the
service's database connections are dropped before each step (a restart, a failover). Every
lookup and write of those requests is tried again on a new connection, as the JSON API's are:
the reviewer sees each page, not an error."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from review_page_support import PASSWORD, new_reviewer
from support import Service, poll_job, start_service

RUBRIC = {"dimensions": [{"name": "helpful", "type": "score", "min": 1, "max": 5}]}


@pytest.fixture
def service(tmp_path: Path, own_pg_url: str, redis_url: str) -> Iterator[Service]:
    started = start_service(
        tmp_path,
        "ladder,tier.fast,callbacks,review",
        VERIFIER_DATABASE__URL=own_pg_url,
        VERIFIER_BROKER__URL=redis_url,
        # Never test a pooled connection before use: each step gets a broken one.
        VERIFIER_DATABASE__PING_AFTER_IDLE_S="3600",
    )
    yield started
    started.stop_all()


def _drop_the_services_connections(pg_url: str) -> int:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as admin:
        dropped = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    time.sleep(0.1)  # the backends are gone before the next request
    return int(dropped[0]) if dropped else 0


def _waiting(client: httpx.Client, queue: str) -> int:
    queues = {q["name"]: q for q in client.get("/v1/review/queues").json()}
    return int(queues[queue]["waiting"]) if queue in queues else 0


def test_a_reviewer_signs_in_answers_and_signs_out_though_the_connections_drop_each_time(
    service: Service, own_pg_url: str, browser: Any
) -> None:
    reviewer = new_reviewer(service)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    step = {"tier": "human", "config": {"queue": queue, "rubric": RUBRIC}}
    policy = {"name": f"people-{queue}", "ladders": {"text": [step]}}
    with service.client() as client:
        assert client.post("/v1/policies", json={"document": policy}).status_code == 201
        body = {"policy": policy["name"], "items": [{"kind": "text", "payload": {"text": "hi"}}]}
        created = client.post("/v1/rewards", json=body)
        assert created.status_code == 202, created.text
        deadline = time.monotonic() + 30
        while _waiting(client, queue) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _waiting(client, queue) == 1

    context = browser.new_context(java_script_enabled=False)
    try:
        tab = context.new_page()
        tab.goto(f"{service.base_url}/review")
        tab.wait_for_url("**/signin?next=/review")
        tab.get_by_label("Username").fill(reviewer)
        tab.get_by_label("Password").fill(PASSWORD)
        assert _drop_the_services_connections(own_pg_url) >= 1
        tab.get_by_role("button", name="Sign in").click()  # the password check, the session
        tab.wait_for_url("**/review")

        assert _drop_the_services_connections(own_pg_url) >= 1
        shown = tab.goto(f"{service.base_url}/review/{queue}")  # session, claim, task page
        assert shown is not None
        assert shown.status == 200, tab.content()[:500]
        assert tab.locator("#answer").count() == 1

        tab.get_by_role("radio", name="4", exact=True).check()
        assert _drop_the_services_connections(own_pg_url) >= 1
        with tab.expect_response(lambda r: r.request.method == "POST") as posted:
            tab.get_by_role("button", name="Submit").click()
        assert posted.value.status == 303  # recorded, then on to the queue's next task
        tab.wait_for_selector("text=No more tasks")

        tab.goto(f"{service.base_url}/account")
        assert _drop_the_services_connections(own_pg_url) >= 1
        tab.get_by_role("button", name="Sign out").click()  # the session's row deleted
        tab.wait_for_url("**/signin")
        tab.goto(f"{service.base_url}/review")
        tab.wait_for_url("**/signin?next=/review")  # signed out indeed
    finally:
        context.close()

    with service.client() as client:
        job = poll_job(client, created.headers["Location"], timeout=30)
    reward = job["items"][0]["reward"]
    assert reward["status"] == "scored", reward
    assert reward["value"] == pytest.approx(0.75)  # 4 on 1..5
