"""One trainer cannot stall the others through `POST /run_code`: its runs are capped per key and
per API process (429 with Retry-After, the body naming the cap), and they run on a thread pool
of their own, so other trainers' requests keep their latency while many slow programs run.
Through API processes of the test's own on the live service's PostgreSQL and Redis, and the
real Docker engine."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import httpx
from support import Service, free_port, wait_ready

ITEM = {"kind": "json", "payload": {"tool": "t", "args": {}}, "reference": {"schema": {}}}


@contextmanager
def api_with(service: Service, **env: str) -> Iterator[Service]:
    """An API process of its own, with `env` (settings) added to the service's."""
    own = replace(service, env={**service.env, **env}, processes={}, logs={})
    port = free_port()
    own.base_url = f"http://127.0.0.1:{port}"
    api = own.start(f"api-{port}", "api", "--port", str(port))
    try:
        wait_ready(own.base_url, process=api)
        yield own
    finally:
        own.stop_all()


def _trainer(service: Service) -> str:
    return service.create_key(f"fair-{uuid.uuid4().hex[:6]}", "trainer", requests_per_min="0")


def _sleeper(seconds: float) -> dict[str, Any]:
    return {"language": "python", "code": f"import time\ntime.sleep({seconds})\nprint('done')",
            "run_timeout": seconds + 30}  # fmt: skip


def _fire(
    pool: ThreadPoolExecutor, http: httpx.Client, key: str, n: int, body: dict[str, Any]
) -> list[Future[httpx.Response]]:
    headers = {"Authorization": f"Bearer {key}"}
    return [pool.submit(http.post, "/run_code", json=body, headers=headers) for _ in range(n)]


def _timed_gets(http: httpx.Client, key: str, path: str, n: int) -> list[float]:
    took = []
    for _ in range(n):
        started = time.monotonic()
        answer = http.get(path, headers={"Authorization": f"Bearer {key}"})
        took.append(time.monotonic() - started)
        assert answer.status_code == 200, answer.text
    return took


def test_many_slow_runs_of_one_trainer_leave_anothers_requests_fast(live_service: Service) -> None:
    # Caps high enough to let all 42 runs in (the repro: 42 slow calls, more than the
    # 40 threads of the pool the API's sync routes share): only the pool of their own is tested.
    with api_with(
        live_service,
        VERIFIER_SANDBOX__RUN_CODE_CONCURRENCY="48",
        VERIFIER_SANDBOX__RUN_CODE_CONCURRENCY_PER_KEY="48",
    ) as api:
        a, b = _trainer(live_service), _trainer(live_service)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        with (
            httpx.Client(base_url=api.base_url, timeout=120, limits=limits) as http,
            ThreadPoolExecutor(48) as pool,
        ):
            submitted = http.post(
                "/v1/rewards", json={"policy": "default", "items": [ITEM], "wait_s": 5},
                headers={"Authorization": f"Bearer {b}"},
            )  # fmt: skip
            assert submitted.status_code == 200, submitted.text
            job = f"/v1/jobs/{submitted.json()['id']}"
            quiet = _timed_gets(http, b, job, 20)

            runs = _fire(pool, http, a, 42, _sleeper(25))
            time.sleep(8)  # the runs are in, their containers starting or sleeping
            loaded = _timed_gets(http, b, job, 20)
            answers = [run.result() for run in runs]

    print(
        f"B's GET {job}: p50/max {statistics.median(quiet):.3f}/{max(quiet):.3f} s quiet, "
        f"{statistics.median(loaded):.3f}/{max(loaded):.3f} s beside 42 slow /run_code of A"
    )
    # Before, B's requests waited for a thread until A's first runs ended (22 s in the issue).
    assert max(loaded) < 2.0, loaded
    assert [r.status_code for r in answers] == [200] * 42
    assert all(r.json()["run_result"]["stdout"] == "done\n" for r in answers), answers[0].text


def test_runs_over_a_cap_get_429_naming_it(live_service: Service) -> None:
    with api_with(
        live_service,
        VERIFIER_SANDBOX__RUN_CODE_CONCURRENCY="6",
        VERIFIER_SANDBOX__RUN_CODE_CONCURRENCY_PER_KEY="4",
    ) as api:
        a, c = _trainer(live_service), _trainer(live_service)
        with (
            httpx.Client(base_url=api.base_url, timeout=120) as http,
            ThreadPoolExecutor(16) as pool,
        ):
            runs = _fire(pool, http, a, 10, _sleeper(8))
            deadline = time.monotonic() + 30
            while sum(r.done() for r in runs) < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            # A's 4 run; C's first 2 fill the process's 6, its other 2 are refused.
            others = _fire(pool, http, c, 4, _sleeper(1))
            a_answers = [r.result() for r in runs]
            c_answers = [r.result() for r in others]
            # Slots are given back when runs end: A runs again.
            again = http.post(
                "/run_code", json=_sleeper(0), headers={"Authorization": f"Bearer {a}"}
            )

    refused = [r for r in a_answers if r.status_code == 429]
    assert sorted(r.status_code for r in a_answers) == [200] * 4 + [429] * 6
    for answer in refused:
        body = answer.json()
        assert (body["error"], body["cap"], body["limit"]) == ("run_code_busy", "per_key", 4)
        assert answer.headers["retry-after"] == "1"
    assert sorted(r.status_code for r in c_answers) == [200] * 2 + [429] * 2
    overall = [r.json() for r in c_answers if r.status_code == 429]
    assert all((o["cap"], o["limit"]) == ("overall", 6) for o in overall), overall
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "Success"
