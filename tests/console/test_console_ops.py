"""Console operations against a real service (API, Celery worker, PostgreSQL, Redis of its own):
pausing a queue holds its work (and the jobs say so) until it resumes, a worker started while a
queue is paused honours the pause, resuming releases no more than the workers' prefetch limit,
a drained worker takes nothing, an operator retries a job's infra_error items in place (their
rewards revised), reviewers' numbers; and in a real browser, pause a queue, see the job wait,
resume it and see the job finish."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from console_support import OPERATOR_PASSWORD, operator_tab, unique_smiles
from support import RedisServer, Service, free_port, private_backends, start_service, until

from verifier_service.core.presence import held_key, presence_key, text

FAST = "tier.fast"


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service of this module's own (nothing else pauses its queues), with an operator."""
    with private_backends("cops") as (pg_url, redis_url):
        service = start_service(
            tmp_path_factory.mktemp("cops"),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=redis_url,
            VERIFIER_WORKER__CONTROL_POLL_S="0.3",
        )
        try:
            made = service.cli(
                "users", "create", "--role", "operator", "cops-op", stdin=OPERATOR_PASSWORD + "\n"
            )
            assert made.returncode == 0, made.stderr
            service.env["COPS_TRAINER_KEY"] = service.create_key("cops-trainer", "trainer")
            yield service
        finally:
            service.stop_all()


@pytest.fixture
def api(ops: Service) -> Iterator[httpx.Client]:
    with ops.client() as client:
        yield client


@pytest.fixture(autouse=True)
def _nothing_paused_after(ops: Service) -> Iterator[None]:
    yield
    broker = redis.Redis.from_url(ops.env["VERIFIER_BROKER__URL"])
    broker.delete("verifier:paused-queues")
    for key in broker.scan_iter(match="verifier:drain:*"):
        broker.delete(key)


def _until(check: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """This module's waits: 20 s unless told, asked every 0.1 s."""
    return until(check, timeout, what, every=0.1)


def _broker(ops: Service) -> redis.Redis:
    return redis.Redis.from_url(ops.env["VERIFIER_BROKER__URL"])


def _queue(api: httpx.Client, name: str) -> dict[str, Any]:
    answer = api.get("/v1/console/queues")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = next(q for q in answer.json() if q["queue"] == name)
    return found


def _pause(api: httpx.Client, name: str = FAST) -> None:
    assert api.post(f"/v1/console/queues/{name}/pause").status_code == 204
    # Every worker started for the queue has stopped consuming it.
    _until(lambda: _queue(api, name)["consuming"] == 0, what=f"workers to leave {name}")


def _resume(api: httpx.Client, name: str = FAST) -> None:
    assert api.post(f"/v1/console/queues/{name}/resume").status_code == 204


def _submit(ops: Service, n: int = 3) -> str:
    """A job of `n` new molecules sent without waiting (its chem.fast work goes through the
    tier.fast queue); its id."""
    items = [{"kind": "molecule", "payload": {"smiles": unique_smiles()}} for _ in range(n)]
    with ops.client(api_key=ops.env["COPS_TRAINER_KEY"]) as trainer:
        answer = trainer.post("/v1/rewards", json={"policy": "default", "items": items})
    assert answer.status_code == 202, answer.text
    job_id: str = answer.json()["id"]
    return job_id


def _job(api: httpx.Client, job_id: str) -> dict[str, Any]:
    answer = api.get(f"/v1/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    job: dict[str, Any] = answer.json()
    return job


def _completed(api: httpx.Client, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
    job: dict[str, Any] = _until(
        lambda: (j := _job(api, job_id))["status"] == "completed" and j,
        timeout,
        f"job {job_id} to complete",
    )
    return job


def _audited(api: httpx.Client, action: str) -> list[dict[str, Any]]:
    answer = api.get("/v1/audit", params={"action": action})
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()
    return events


def test_a_paused_queue_holds_its_work_and_the_job_says_so_until_it_resumes(
    ops: Service, api: httpx.Client
) -> None:
    _pause(api)
    job_id = _submit(ops)
    time.sleep(2.0)  # twenty times the workers' poll: the work would have run by now
    job = _job(api, job_id)
    assert job["status"] == "running"
    assert all(item["state"] == "running" for item in job["items"])
    assert any("'tier.fast'" in w and "paused" in w for w in job["warnings"]), job["warnings"]
    queue = _queue(api, FAST)
    assert queue["paused"] is True
    assert queue["paused_by"] == "test-root"
    assert queue["depth"] >= 1  # the task waits in the broker
    _resume(api)
    done = _completed(api, job_id)
    assert [i["reward"]["status"] for i in done["items"]] == ["scored"] * 3
    assert done["warnings"] == []
    assert [e["target"] for e in _audited(api, "queue.pause")][:1] == [FAST]
    assert [e["target"] for e in _audited(api, "queue.resume")][:1] == [FAST]


def test_pausing_twice_or_an_unknown_queue_is_refused(api: httpx.Client) -> None:
    _pause(api)
    again = api.post(f"/v1/console/queues/{FAST}/pause")
    assert again.status_code == 409
    assert "paused already" in again.text
    assert api.post("/v1/console/queues/tier.nowhere/pause").status_code == 404
    _resume(api)
    assert api.post(f"/v1/console/queues/{FAST}/resume").status_code == 409


def test_a_worker_started_while_a_queue_is_paused_does_not_take_its_work(
    ops: Service, api: httpx.Client
) -> None:
    _pause(api)
    ops.stop("worker")
    ops.start_worker("worker-later", "ladder,tier.fast,callbacks")
    try:
        job_id = _submit(ops)
        workers = _until(
            lambda: [
                w
                for w in api.get("/v1/console/workers").json()["workers"]
                if w["alive"] and w["queues"]
            ],
            what="the new worker's report",
        )
        assert len(workers) == 1
        assert FAST in workers[0]["queues"]
        assert workers[0]["consuming"] == ["callbacks", "ladder"]
        time.sleep(2.0)
        assert _job(api, job_id)["status"] == "running"
    finally:
        _resume(api)
    _completed(api, job_id)


def test_resuming_releases_no_more_than_the_prefetch_limit(ops: Service, api: httpx.Client) -> None:
    _pause(api)
    jobs = [_submit(ops, 1) for _ in range(12)]  # twelve tasks wait on the queue
    broker = _broker(ops)
    _until(lambda: broker.llen(FAST) >= 12, what="the tasks on the queue")
    workers = [w for w in api.get("/v1/console/workers").json()["workers"] if w["alive"]]
    assert len(workers) == 1
    node, limit = workers[0]["node"], workers[0]["prefetch_limit"]
    assert limit == 2  # two processes, prefetch multiplier 1
    held: list[int] = []
    stop = threading.Event()

    def sample() -> None:  # what the worker holds (taken from the broker, not finished)
        while not stop.is_set():
            held.append(int(broker.hlen(held_key(node))))
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        _resume(api)
        for job_id in jobs:
            _completed(api, job_id)
    finally:
        stop.set()
        sampler.join()
    assert max(held) >= 1  # the sampler saw the worker take work
    assert max(held) <= limit, f"the worker held {max(held)} tasks at once"


def test_a_drained_worker_takes_no_new_work_until_undrained(
    ops: Service, api: httpx.Client
) -> None:
    workers = [w for w in api.get("/v1/console/workers").json()["workers"] if w["alive"]]
    node = workers[0]["node"]
    assert api.post(f"/v1/console/workers/{node}/drain").status_code == 204

    def drained() -> dict[str, Any] | None:
        for w in api.get("/v1/console/workers").json()["workers"]:
            if w["node"] == node and w["consuming"] == [] and w["drained"]:
                return dict(w)
        return None

    _until(drained, what="the worker to drain")
    job_id = _submit(ops)
    time.sleep(2.0)
    assert _job(api, job_id)["status"] == "running"
    assert api.post(f"/v1/console/workers/{node}/undrain").status_code == 204
    _completed(api, job_id)
    assert [e["target"] for e in _audited(api, "worker.drain")][:1] == [node]
    assert api.post("/v1/console/workers/nobody@nowhere/drain").status_code == 404


def test_retry_sends_infra_error_items_up_again_in_the_same_job(
    ops: Service, api: httpx.Client
) -> None:
    _pause(api)
    job_id = _submit(ops)
    cancelled = api.post(f"/v1/console/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    before = _job(api, job_id)
    assert before["status"] == "completed"
    assert {(i["reward"]["status"], i["reward"]["revision"]) for i in before["items"]} == {
        ("infra_error", 1)
    }
    retried = api.post(f"/v1/console/jobs/{job_id}/retry")
    assert retried.status_code == 200, retried.text
    assert retried.json() == {"job_id": job_id, "retried": 3}
    running = _job(api, job_id)
    assert running["status"] == "running"  # the queue is still paused: the work waits
    _resume(api)
    after = _completed(api, job_id)
    # The same job and items; each reward is the next revision, scored this time.
    assert [i["index"] for i in after["items"]] == [i["index"] for i in before["items"]]
    assert {(i["reward"]["status"], i["reward"]["revision"]) for i in after["items"]} == {
        ("scored", 2)
    }
    assert all(i["reward"]["value"] is not None for i in after["items"])
    events = _audited(api, "job.retry")
    assert events[0]["target"] == job_id
    assert events[0]["detail"] == {"items": 3}
    nothing = api.post(f"/v1/console/jobs/{job_id}/retry")
    assert nothing.status_code == 409
    assert "nothing to retry" in nothing.text


def test_the_operations_need_an_operator(ops: Service) -> None:
    with ops.client(api_key=ops.env["COPS_TRAINER_KEY"]) as trainer:
        assert trainer.get("/v1/console/queues").status_code == 403
        assert trainer.post(f"/v1/console/queues/{FAST}/pause").status_code == 403
        assert trainer.get("/v1/console/reviewers").status_code == 403


RUBRIC = {"dimensions": [{"name": "verdict", "type": "label", "labels": ["good", "bad"]}]}


def _review_policy(queue: str) -> dict[str, Any]:
    """Text items go straight to people: two answers each, a gold item first for everyone."""
    human = {"tier": "human", "config": {"queue": queue, "rubric": RUBRIC, "overlap": 2,
                                         "gold_rate": 1.0}}  # fmt: skip
    component = {"name": "people", "tier": "human", "component": "score"}
    return {"name": f"review-{queue}", "ladders": {"text": [human]},
            "reward": {"text": {"components": [component]}}}  # fmt: skip


def _answer_all(ops: Service, reviewer: str, queue: str, answers: dict[str, str]) -> int:
    """The reviewer takes every task left for them and answers by the item's text; how many."""
    n = 0
    with ops.client(api_key=ops.create_key(reviewer, "reviewer")) as client:
        while (lease := client.post(f"/v1/review/queues/{queue}/next")).status_code == 200:
            text = lease.json()["task"]["payload"]["text"]
            submitted = client.post(
                f"/v1/review/leases/{lease.json()['lease_id']}/submit",
                json={"values": {"verdict": answers[text]}},
                headers={"Idempotency-Key": uuid.uuid4().hex},
            )
            assert submitted.status_code == 204, submitted.text
            n += 1
        assert lease.status_code == 204, lease.text
    return n


def test_reviewers_show_throughput_agreement_and_gold_accuracy(
    ops: Service, api: httpx.Client
) -> None:
    queue = f"cops-{uuid.uuid4().hex[:6]}"
    policy = _review_policy(queue)
    assert api.post("/v1/policies", json={"document": policy}).status_code == 201
    items = [{"kind": "text", "payload": {"text": t}} for t in ("first", "second")]
    assert api.post("/v1/rewards", json={"policy": policy["name"], "items": items}).status_code \
        == 202  # fmt: skip
    gold = {"kind": "text", "payload": {"text": "gold"}, "rubric": RUBRIC,
            "answer": {"verdict": "good"}}  # fmt: skip
    assert api.post(f"/v1/review/queues/{queue}/gold", json=gold).status_code == 201
    rita = _answer_all(ops, "cops-rita", queue, {"gold": "good", "first": "good", "second": "bad"})
    sam = _answer_all(ops, "cops-sam", queue, {"gold": "bad", "first": "good", "second": "bad"})
    assert (rita, sam) == (3, 3)  # the gold item and both items of the job
    found = api.get("/v1/console/reviewers")
    assert found.status_code == 200, found.text
    rows = {r["reviewer"]: r for r in found.json()["reviewers"]}
    # Throughput counts answers to real items; gold answers count towards accuracy.
    assert (rows["cops-rita"]["answered"], rows["cops-rita"]["answered_24h"]) == (2, 2)
    assert rows["cops-rita"]["per_hour_24h"] == pytest.approx(2 / 24)
    assert (rows["cops-rita"]["gold_answered"], rows["cops-rita"]["gold_accuracy"]) == (1, 1.0)
    assert (rows["cops-sam"]["gold_answered"], rows["cops-sam"]["gold_accuracy"]) == (1, 0.0)
    # They agree on both items, which differ: perfect agreement.
    assert found.json()["agreement"][queue] == {"verdict": 1.0}


# ------------------------------------------------------------------ in a real browser


@pytest.fixture
def page(ops: Service, browser: Any) -> Iterator[Any]:
    """A tab signed in as the operator (a shared machine is slow, not broken: long timeouts)."""
    with operator_tab(
        browser,
        ops.base_url,
        "/console/queues",
        "cops-op",
        viewport=(1440, 1000),
        timeout_ms=90_000,
    ) as tab:
        yield tab


def test_browser_pause_a_queue_see_the_job_wait_then_finish_after_resume(
    ops: Service, api: httpx.Client, page: Any, tmp_path: Path
) -> None:
    row = page.locator("#queue-tier\\.fast")
    assert row.locator(".state").inner_text().strip() == "running"
    # From the keyboard: focus the queue's Pause button, press Enter, and Enter again on the
    # question's confirming button (it has the focus).
    page.get_by_role("button", name="Pause tier.fast").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#confirm button:focus", timeout=5000)  # autofocus, after load
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/queues#queue-tier.fast")
    assert row.locator(".state").inner_text().startswith("paused by cops-op")
    _until(lambda: _queue(api, FAST)["consuming"] == 0, what="workers to leave tier.fast")
    job_id = _submit(ops)
    time.sleep(1.5)
    page.goto(f"{ops.base_url}/console/jobs/{job_id}")
    assert page.locator("#job-status").inner_text() == "running"
    alert = page.get_by_role("alert")
    assert "queue 'tier.fast' an operator paused" in alert.inner_text()
    page.goto(f"{ops.base_url}/console/queues")
    assert int(row.locator(".depth").inner_text()) >= 1
    page.screenshot(path=str(tmp_path / "console-queues-paused.png"), full_page=True)  # docs/img/
    page.get_by_role("button", name="Resume tier.fast").click()
    page.wait_for_url("**/console/queues#queue-tier.fast")
    assert row.locator(".state").inner_text().strip() == "running"
    _completed(api, job_id)
    page.goto(f"{ops.base_url}/console/jobs/{job_id}")
    assert page.locator("#job-status").inner_text() == "completed"
    assert page.get_by_role("alert").count() == 0
    assert page.locator("#items .pill.scored").count() == 3


def test_browser_retry_button_revises_the_infra_error_items(
    ops: Service, api: httpx.Client, page: Any
) -> None:
    _pause(api)
    job_id = _submit(ops, 2)
    assert api.post(f"/v1/console/jobs/{job_id}/cancel").status_code == 200
    _resume(api)
    page.goto(f"{ops.base_url}/console/jobs/{job_id}")
    assert page.locator("#job-errors").inner_text() == "2"
    # The form posts and comes back to the same URL: wait for that navigation, not the URL.
    with page.expect_navigation():
        page.get_by_role("button", name="Retry 2 infra_error items").click()
    _completed(api, job_id)
    page.reload()
    assert page.locator("#job-errors").inner_text() == "0"
    assert page.locator("#items .pill.scored").count() == 2
    assert page.get_by_role("button", name="Retry 2 infra_error items").count() == 0


def test_browser_workers_and_reviewers_pages(ops: Service, page: Any, tmp_path: Path) -> None:
    working = page.locator("#worker-table tbody tr").filter(has_text="working")
    assert working.count() == 1
    assert working.locator(".consuming").inner_text() == "callbacks, ladder, tier.fast"
    page.get_by_role("link", name="Reviewers").click()
    page.wait_for_url("**/console/reviewers")
    assert page.get_by_role("heading", name="Throughput and accuracy on gold items").count() == 1
    page.screenshot(path=str(tmp_path / "console-reviewers.png"), full_page=True)  # docs/img/


def test_browser_a_worker_holding_a_task_shows_it(ops: Service, page: Any, tmp_path: Path) -> None:
    """The worker table lists what each worker holds (the page failed with a 500 as soon as a
    worker held anything, see the next test)."""
    broker = redis.Redis.from_url(ops.env["VERIFIER_BROKER__URL"])
    (node,) = {text(n) for n in broker.zrange(presence_key(FAST), 0, -1)}
    entry = ["tier.schema.verify", ["json", 0, ["x1", "x2"]], FAST, {"request_id": "r-held"}]
    task_id = f"shown-{uuid.uuid4().hex[:6]}"
    broker.hset(held_key(node), task_id, json.dumps(entry))
    try:
        page.reload()
        row = page.locator("#worker-table tbody tr").filter(has_text=node.split("@")[0])
        shown = row.locator("li.task").filter(has_text="tier.schema.verify")
        assert shown.inner_text() == "tier.schema.verify (2 items, tier.fast): held"
        page.screenshot(path=str(tmp_path / "console-worker-holding.png"), full_page=True)
    finally:
        broker.hdel(held_key(node), task_id)


def test_operations_lists_the_tasks_workers_record_in_either_format(tmp_path: Path) -> None:
    """A worker records each task with the request's context (four fields); one of an older
    release recorded three. The operations view reads both (it failed on the four-field ones).
    On a broker of its own: a service's recovery sweep would send a dead worker's tasks again."""
    from verifier_service.console.operations.service import operations

    server = RedisServer(free_port(), tmp_path)
    server.start()
    redis_url = f"redis://127.0.0.1:{server.port}/0"
    client = redis.Redis.from_url(redis_url)
    node = f"held-{uuid.uuid4().hex[:6]}@host"
    now = ["tier.chem_fast.verify", ["molecule", 0, ["a", "b"]], "tier.fast", {"request_id": "r"}]
    older = ["tier.schema.verify", ["json", 0, ["c"]], "tier.fast"]
    client.hset(held_key(node), mapping={"t1": json.dumps(now), "t0": json.dumps(older)})
    try:
        (worker,) = [w for w in operations(redis_url).workers if w.node == node]
    finally:
        server.stop()
    tasks = [(t.id, t.name, t.items, t.state) for t in worker.tasks]
    assert tasks == [
        ("t0", "tier.schema.verify", 1, "held"),
        ("t1", "tier.chem_fast.verify", 2, "held"),
    ]
