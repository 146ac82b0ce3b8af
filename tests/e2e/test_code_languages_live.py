"""Code rewards in other languages than Python, end to end: POST /v1/rewards, the ladder, a
Celery worker on tier.sandbox, the real Docker engine and the per-language images."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from language_programs import ALL
from support import Service

from tiers.code.languages import get_language

CASES = [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "40 2\n", "stdout": "42\n"}]


@pytest.fixture(scope="module")
def sandbox_worker(live_service: Service) -> Iterator[Service]:
    env = {
        **live_service.env,
        "VERIFIER_SANDBOX__POOL_SIZE": "1",
        "VERIFIER_SANDBOX__LANGUAGE_POOL_SIZE": "1",
        "VERIFIER_SANDBOX__DEFAULT_MEMORY_MB": "128",
        # Six compiles at once on a loaded 2-core machine take longer than the live service's
        # 60 s task limit allows.
        "VERIFIER_WORKER__TASK_TIME_LIMIT_S": "300",
        "VERIFIER_WORKER__VISIBILITY_TIMEOUT_S": "305",
    }
    service = replace(live_service, env=env, processes={}, logs={})
    service.start_worker("sandbox-languages", "tier.sandbox", concurrency=1)
    yield service
    service.stop_all()


def item(lang: str, code: str, **payload: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "language": lang,
        "code": code,
        # Node's start-up in a fresh container took over 4 s at load average 18 on 2 cores.
        "case_timeout_s": 8.0,
        "timeout_s": 40.0,
        "compile_timeout_s": 60.0,  # g++ under a loaded machine; the limit is not the point here
        **payload,
    }
    if "tests" not in body:
        body["cases"] = CASES
    return {"kind": "code", "payload": body}


@pytest.mark.parametrize("lang", sorted(ALL))
def test_each_kind_of_candidate_gets_its_reward(sandbox_worker: Service, lang: str) -> None:
    p = ALL[lang]
    items = [
        item(lang, p.sum),
        item(lang, p.wrong),
        item(lang, p.compile_error),
        item(lang, p.timeout),
        item(lang, p.hog),
        item(lang, p.add, tests=p.add_tests),
    ]
    with sandbox_worker.client(timeout=240) as client:
        response = client.post("/v1/rewards", json={"items": items, "wait_s": 200})
    assert response.status_code == 200, response.text
    got = response.json()["items"]
    rewards = [i["reward"] for i in got]
    assert all(r["status"] == "scored" for r in rewards), got
    feedback = [i["verdicts"][0]["feedback"] for i in got]
    correct, wrong, broken, slow, hog, asserted = (r["value"] for r in rewards)
    assert correct == 1.0, feedback[0]
    assert asserted == 1.0, feedback[5]
    assert wrong == broken == slow == hog == 0.0, feedback
    assert "wrong answer" in feedback[1]
    if get_language(lang).compiled:
        assert got[2]["verdicts"][0]["reason"] == "compile_error", feedback[2]
    assert "time limit 8 s exceeded" in feedback[3]


def test_unknown_language_is_refused_at_submit(sandbox_worker: Service) -> None:
    with sandbox_worker.client(timeout=30) as client:
        response = client.post("/v1/rewards", json={"items": [item("cobol", "DISPLAY 1.")]})
    assert response.status_code == 422, response.text
    assert "supported" in response.text
    assert "cpp" in response.text
