"""The real SandboxFusion SDK (sandbox-fusion 0.3.7 from PyPI) against our POST /run_code.

The SDK is installed into a throwaway folder and run in a child process, as a trainer would run
it: `set_sandbox_endpoint(URL)` then `run_code(RunCodeRequest(...))`. The API process of this test
runs /run_code on the real Docker engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import Service, free_port, wait_ready


@pytest.fixture(scope="module")
def api_service(live_service: Service) -> Iterator[Service]:
    """An API process of the test's own, with the live service's settings."""
    service = replace(live_service, processes={}, logs={})
    port = free_port()
    service.base_url = f"http://127.0.0.1:{port}"
    api = service.start("api-sandboxfusion", "api", "--port", str(port))
    try:
        wait_ready(service.base_url, process=api)
        yield service
    finally:
        service.stop_all()


@pytest.fixture(scope="module")
def endpoint(api_service: Service, live_service: Service) -> str:
    """The SDK's endpoint: a trainer key in the URL, as the SDK cannot send a header."""
    key = live_service.create_key("sandboxfusion-sdk", "trainer")
    return f"{api_service.base_url}/k/{key}/"


def sdk_run(sdk_path: Path, endpoint: str, **request: Any) -> dict[str, Any]:
    script = (
        "import json, sys\n"
        "from sandbox_fusion import RunCodeRequest, run_code, set_sandbox_endpoint\n"
        "set_sandbox_endpoint(sys.argv[1])\n"
        "response = run_code(RunCodeRequest(**json.loads(sys.argv[2])), max_attempts=1)\n"
        "print(response.json())  # pydantic 1 or 2, as pip resolved it\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, endpoint, json.dumps({"language": "python", **request})],
        env={"PYTHONPATH": str(sdk_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_sdk_runs_a_program(sdk_path: Path, endpoint: str) -> None:
    out = sdk_run(sdk_path, endpoint, code="print(6 * 7)")
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == "42\n"


def test_sdk_gets_large_stdout_whole(sdk_path: Path, endpoint: str) -> None:
    out = sdk_run(sdk_path, endpoint, code="print('z' * 200_000, end='')")
    assert out["status"] == "Success", out["message"]
    assert out["run_result"]["stdout"] == "z" * 200_000


def test_sdk_file_with_none_content_is_not_written(sdk_path: Path, endpoint: str) -> None:
    out = sdk_run(
        sdk_path, endpoint, code="import os\nprint(os.path.exists('x.txt'))", files={"x.txt": None}
    )
    assert out["run_result"]["stdout"] == "False\n", out


def test_sdk_cannot_send_a_memory_limit_and_gets_the_run_code_default(
    sdk_path: Path, endpoint: str
) -> None:
    code = "x = bytearray(400 * 1024 * 1024)\nx[::4096] = b'1' * len(x[::4096])\nprint('ok')"
    out = sdk_run(sdk_path, endpoint, code=code)
    assert out["status"] == "Success", out["run_result"]


def test_the_api_process_keeps_no_containers_between_runs(
    sdk_path: Path, endpoint: str, api_service: Service
) -> None:
    import docker
    from tiers.code.engine import LABEL, OWNER_LABEL

    sdk_run(sdk_path, endpoint, code="print(1)")
    pid = api_service.processes["api-sandboxfusion"].pid
    client = docker.from_env()

    def owned() -> list[str]:
        found = client.api.containers(all=True, filters={"label": LABEL})
        return [
            c["Id"]
            for c in found
            if (c.get("Labels") or {}).get(OWNER_LABEL, "").split(":")[1:2] == [str(pid)]
        ]

    deadline = time.monotonic() + 20
    while owned() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert owned() == [], "the API process should hold no warm sandbox containers"
