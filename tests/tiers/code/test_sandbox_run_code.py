"""SandboxFusion-compatible POST /run_code, through the real engine."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from verifier_service.auth.deps import CurrentPrincipal
from verifier_service.auth.service import local_admin
from verifier_service.sandbox.endpoints import router


@pytest.fixture(scope="module")
def client(sandbox_pool: Any) -> Iterator[TestClient]:
    app = FastAPI()
    app.include_router(router)
    # The route needs a trainer; who calls is not what these tests are about.
    app.dependency_overrides[CurrentPrincipal.__metadata__[0].dependency] = local_admin
    with TestClient(app) as test_client:
        yield test_client


def run(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/run_code", json={"language": "python", **body})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_hello_world_matches_sandboxfusion_shape(client: TestClient) -> None:
    data = run(client, code="print('hello')")
    assert set(data) == {
        "status",
        "message",
        "compile_result",
        "run_result",
        "executor_pod_name",
        "files",
    }
    assert data["status"] == "Success"
    assert data["compile_result"] is None
    result = data["run_result"]
    assert result["status"] == "Finished"
    assert result["return_code"] == 0
    assert result["stdout"] == "hello\n"
    assert result["stderr"] == ""
    assert result["execution_time"] > 0


def test_non_zero_exit_is_failed(client: TestClient) -> None:
    data = run(client, code="import sys\nprint('bad', file=sys.stderr)\nsys.exit(3)")
    assert data["status"] == "Failed"
    assert data["run_result"]["return_code"] == 3
    assert "bad" in data["run_result"]["stderr"]


def test_exception_is_failed_with_traceback(client: TestClient) -> None:
    data = run(client, code="raise ValueError('nope')")
    assert data["status"] == "Failed"
    assert data["run_result"]["return_code"] == 1
    assert "ValueError: nope" in data["run_result"]["stderr"]


def test_stdin_is_passed(client: TestClient) -> None:
    data = run(client, code="a, b = map(int, input().split())\nprint(a + b)", stdin="2 40\n")
    assert data["status"] == "Success"
    assert data["run_result"]["stdout"] == "42\n"


def test_time_limit_exceeded(client: TestClient) -> None:
    data = run(client, code="while True:\n    pass", run_timeout=1)
    assert data["status"] == "Failed"
    assert data["run_result"]["status"] == "TimeLimitExceeded"


def test_files_in_and_out(client: TestClient) -> None:
    data = run(
        client,
        code="text = open('in.txt').read()\nopen('out.txt', 'w').write(text.upper())",
        files={"in.txt": base64.b64encode(b"shout").decode()},
        fetch_files=["out.txt", "missing.txt"],
    )
    assert data["status"] == "Success", data
    assert base64.b64decode(data["files"]["out.txt"]) == b"SHOUT"
    assert "missing.txt" not in data["files"]


def test_memory_limit_kills_the_program(client: TestClient) -> None:
    data = run(client, code="x = bytearray(400 * 1024 * 1024)\nx[::4096] = b'1' * len(x[::4096])",
               memory_limit_MB=100)  # fmt: skip
    assert data["status"] == "Failed"
    result = data["run_result"]
    assert result["return_code"] != 0
    assert "MemoryError" in result["stderr"] or "memory limit" in result["stderr"]


def test_no_network(client: TestClient) -> None:
    data = run(client, code="import socket\nsocket.create_connection(('8.8.8.8', 53), timeout=1)")
    assert data["status"] == "Failed"
    assert "unreachable" in data["run_result"]["stderr"]


def test_unsupported_language_is_a_sandbox_error_not_a_4xx(client: TestClient) -> None:
    response = client.post("/run_code", json={"language": "cobol", "code": "DISPLAY 'HI'."})
    assert response.status_code == 200
    data = response.json()
    assert data["status"] == "SandboxError"
    assert "cobol" in data["message"]
    assert data["run_result"] is None


# -- SandboxFusion parity: what its clients rely on ---------------------------------------------


def test_large_stdout_comes_back_whole(client: TestClient) -> None:
    # 300 kB: SandboxFusion returns it whole; the code tier's 64 kB cap must not apply here.
    data = run(client, code="import sys\nsys.stdout.write('x' * 300_000 + 'END')")
    assert data["status"] == "Success", data["message"]
    assert len(data["run_result"]["stdout"]) == 300_003
    assert data["run_result"]["stdout"].endswith("END")


def test_output_of_several_megabytes_is_not_killed(client: TestClient) -> None:
    data = run(client, code="import sys\nfor _ in range(3):\n    sys.stdout.write('y' * 1_000_000)")
    assert data["status"] == "Success", data["run_result"]["stderr"][-300:]
    assert len(data["run_result"]["stdout"]) == 3_000_000


def test_a_file_with_no_content_is_not_written(client: TestClient) -> None:
    data = run(
        client,
        code="import os\nprint(os.path.exists('absent.txt'), open('here.txt').read())",
        files={"absent.txt": None, "here.txt": base64.b64encode(b"hi").decode()},
    )
    assert data["status"] == "Success", data
    assert data["run_result"]["stdout"] == "False hi\n"


def test_memory_default_is_the_run_code_setting_not_the_tier_default(client: TestClient) -> None:
    # The SDK cannot send memory_limit_MB; 400 MB is over the tier's 256 MB default.
    data = run(client, code="x = bytearray(400 * 1024 * 1024)\nx[::4096] = b'1' * len(x[::4096])")
    assert data["status"] == "Success", data["run_result"]["stderr"][-300:]


def test_run_timeout_above_sixty_seconds_is_honoured(client: TestClient) -> None:
    data = run(client, code="import time\ntime.sleep(62)\nprint('done')", run_timeout=90)
    assert data["status"] == "Success", data
    assert data["run_result"]["stdout"] == "done\n"
    assert data["run_result"]["execution_time"] >= 62
