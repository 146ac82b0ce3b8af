"""The real SandboxFusion SDK (sandbox-fusion 0.3.7) against our /run_code, in every language
it has a name for that we run: run_code and its concurrent helper, in a child process as a
trainer would run them, against an API process of the test's own on the real Docker engine."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from language_programs import ALL
from support import Service, free_port, wait_ready

from tiers.code.languages import get_language

SDK_LANGS = sorted(p.language for p in ALL.values() if p.sdk_name)


@pytest.fixture(scope="module")
def endpoint(live_service: Service) -> Iterator[str]:
    """An API process of the test's own; the SDK's endpoint has a trainer key in its path."""
    # The SDK cannot send memory_limit_MB: the service's run_code_memory_mb applies.
    env = {**live_service.env, "VERIFIER_SANDBOX__RUN_CODE_MEMORY_MB": "256"}
    service = replace(live_service, env=env, processes={}, logs={})
    port = free_port()
    service.base_url = f"http://127.0.0.1:{port}"
    api = service.start("api-sdk-languages", "api", "--port", str(port))
    try:
        wait_ready(service.base_url, process=api)
        key = live_service.create_key("sandboxfusion-sdk-languages", "trainer")
        yield f"{service.base_url}/k/{key}/"
    finally:
        service.stop_all()


def sdk(sdk_path: Path, endpoint: str, script: str, *args: Any) -> Any:
    """Run `script` (which prints one JSON line last) with the SDK, as a trainer would."""
    prelude = (
        "import json, sys\n"
        "from sandbox_fusion import RunCodeRequest, run_code, set_sandbox_endpoint\n"
        "from sandbox_fusion import run_concurrent\n"
        "set_sandbox_endpoint(sys.argv[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + script, endpoint, *map(json.dumps, args)],
        env={"PYTHONPATH": str(sdk_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


RUN_ONE = (
    "r = run_code(RunCodeRequest(**json.loads(sys.argv[2])), max_attempts=1)\n"
    "print(json.dumps(json.loads(r.json())))\n"
)


def sdk_name(lang: str) -> str:
    name = ALL[lang].sdk_name
    assert name is not None
    return name


@pytest.mark.parametrize("lang", SDK_LANGS)
def test_sdk_runs_each_kind_of_program(sdk_path: Path, endpoint: str, lang: str) -> None:
    programs, name = ALL[lang], sdk_name(lang)
    ok = sdk(
        sdk_path,
        endpoint,
        RUN_ONE,
        {"language": name, "code": programs.sum, "stdin": "1 2", "compile_timeout": 60},
    )
    assert ok["status"] == "Success", ok
    assert ok["run_result"]["stdout"] == "3\n"
    wrong = sdk(
        sdk_path,
        endpoint,
        RUN_ONE,
        {"language": name, "code": programs.wrong, "stdin": "1 2", "compile_timeout": 60},
    )
    assert wrong["run_result"]["stdout"] == "-1\n"
    broken = sdk(sdk_path, endpoint, RUN_ONE, {"language": name, "code": programs.compile_error})
    assert broken["status"] == "Failed", broken
    if get_language(lang).compiled:
        assert broken["compile_result"]["return_code"] != 0
        built = broken["compile_result"]
        assert get_language(lang).source in built["stdout"] + built["stderr"]
        assert broken["run_result"] is None
    slow = sdk(
        sdk_path, endpoint, RUN_ONE, {"language": name, "code": programs.timeout, "run_timeout": 1}
    )
    assert slow["status"] == "Failed"
    assert slow["run_result"]["status"] == "TimeLimitExceeded", slow
    # The hog (4 GB) is stopped by the service's run_code_memory_mb (256 MB here).
    hog = sdk(
        sdk_path, endpoint, RUN_ONE, {"language": name, "code": programs.hog, "run_timeout": 20}
    )
    assert hog["status"] == "Failed", hog
    assert "survived" not in (hog["run_result"]["stdout"] or "")


def test_sdk_concurrent_helper_runs_every_language(sdk_path: Path, endpoint: str) -> None:
    requests = [
        # compile_timeout: four g++ at once on a loaded 2-core machine can take over 10 s.
        {
            "language": sdk_name(lang),
            "code": ALL[lang].sum,
            "stdin": f"{i} {i}",
            "compile_timeout": 60,
        }
        for i in range(3)
        for lang in SDK_LANGS
    ]
    script = (
        "reqs = [RunCodeRequest(**r) for r in json.loads(sys.argv[2])]\n"
        "out = run_concurrent(run_code, args=[[r] for r in reqs], concurrency=4)\n"
        "print(json.dumps([[o.status, o.run_result and o.run_result.stdout, o.json()] "
        "for o in out]))\n"
    )
    results = sdk(sdk_path, endpoint, script, requests)
    assert len(results) == len(requests)
    for request, (status, stdout, whole) in zip(requests, results, strict=True):
        i = int(request["stdin"].split()[0])
        assert status == "Success", (request, whole)
        assert stdout == f"{2 * i}\n", request
