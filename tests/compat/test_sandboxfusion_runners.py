"""SandboxFusion's runner tests, as our own cases (sandboxfusion_runner_cases.py), sent over HTTP
to `POST /run_code` of an API process of the test's own on the real Docker engine, each
language in its own image, as a trainer moving from SandboxFusion would send them.

docs/languages.md counts them per language; `pytest -rA` on this file prints one line per case
(`PASSED ...[LANGUAGE-NAME]`), which is where those counts come from.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest
from sandboxfusion_runner_cases import CASES, Case
from support import Service, free_port, wait_ready


@pytest.fixture(scope="module")
def run_code_url(live_service: Service) -> Iterator[str]:
    """`/run_code` of an API process of the test's own, a trainer's key in its path (as the
    SDK's endpoint has it)."""
    # SandboxFusion's requests send no memory limit: the service's run_code_memory_mb applies.
    env = {**live_service.env, "VERIFIER_SANDBOX__RUN_CODE_MEMORY_MB": "512"}
    service = replace(live_service, env=env, processes={}, logs={})
    port = free_port()
    service.base_url = f"http://127.0.0.1:{port}"
    api = service.start("api-sandboxfusion-runners", "api", "--port", str(port))
    try:
        wait_ready(service.base_url, process=api)
        key = live_service.create_key("sandboxfusion-runners", "trainer")
        yield f"{service.base_url}/k/{key}/run_code"
    finally:
        service.stop_all()


def post(url: str, case: Case) -> dict[str, Any]:
    response = httpx.post(url, json=case.request(), timeout=120)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_sandboxfusion_runner_case(run_code_url: str, case: Case) -> None:
    if case.concurrent == 1:
        case.check(post(run_code_url, case))
        return
    with ThreadPoolExecutor(max_workers=case.concurrent) as pool:
        answers = list(pool.map(lambda _: post(run_code_url, case), range(case.concurrent)))
    for answer in answers:
        case.check(answer)
