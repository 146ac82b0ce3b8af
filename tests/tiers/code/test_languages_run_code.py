"""POST /run_code in other languages than Python: SandboxFusion's fields and statuses."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from language_programs import ALL, CPP

from tiers.code import sandbox_languages
from tiers.code.languages import get_language
from tiers.code.sandbox_languages import shutdown_language_pools
from verifier_service.auth.deps import CurrentPrincipal
from verifier_service.auth.service import local_admin
from verifier_service.core.handlers import install_error_handlers
from verifier_service.sandbox.endpoints import router

# TypeScript is compiled too, but has its own test below (tsc reports on stdout).
COMPILED = sorted(lang for lang in ALL if get_language(lang).compiled)


@pytest.fixture(scope="module")
def client(sandbox_pool: Any) -> Iterator[TestClient]:
    app = FastAPI()
    app.include_router(router)
    install_error_handlers(app)
    app.dependency_overrides[CurrentPrincipal.__metadata__[0].dependency] = local_admin
    with TestClient(app) as test_client:
        yield test_client
    shutdown_language_pools()


def run(client: TestClient, language: str, code: str, **body: Any) -> dict[str, Any]:
    # rustc and javac at load average 10+ on 2 cores can take longer than their default
    # compile limit (20 s); the compile limit is not what these tests are about.
    body.setdefault("compile_timeout", 60)
    response = client.post("/run_code", json={"language": language, "code": code, **body})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


@pytest.mark.parametrize("lang", sorted(ALL))
def test_program_reads_stdin_and_succeeds(client: TestClient, lang: str) -> None:
    data = run(client, lang, ALL[lang].sum, stdin="40 2\n")
    assert data["status"] == "Success", data
    assert data["run_result"]["stdout"] == "42\n"
    assert data["run_result"]["return_code"] == 0
    assert data["run_result"]["status"] == "Finished"
    if get_language(lang).compiled:
        built = data["compile_result"]
        assert built["status"] == "Finished", built
        assert built["return_code"] == 0, built
        assert built["execution_time"] > 0
        # The run's time is its own, not the compile's.
        assert data["run_result"]["execution_time"] < built["execution_time"] + 1.0
    else:
        assert data["compile_result"] is None


@pytest.mark.parametrize("lang", COMPILED)
def test_compile_error_is_failed_with_the_compilers_message_and_no_run(
    client: TestClient, lang: str
) -> None:
    data = run(client, lang, ALL[lang].compile_error)
    assert data["status"] == "Failed"
    assert data["run_result"] is None
    built = data["compile_result"]
    assert built["status"] == "Finished"
    assert built["return_code"] != 0
    assert "error" in built["stderr"] or lang == "go"  # go: "x declared but not used"
    assert get_language(lang).source in built["stdout"] + built["stderr"]


def test_compile_timeout_is_time_limit_exceeded(client: TestClient) -> None:
    # Constant evaluation of ~10^10 steps: g++ works until the compile limit kills it.
    code = (
        "constexpr long f() { long s = 0; for (long i = 0; i < 200000; i++)\n"
        "  for (long j = 0; j < 200000; j++) s += i ^ j; return s; }\n"
        '#include <cstdio>\nint main() { constexpr long v = f(); std::printf("%ld", v); }\n'
    )
    data = run(client, "cpp", code, compile_timeout=1)
    assert data["status"] == "Failed"
    assert data["compile_result"]["status"] == "TimeLimitExceeded", data
    assert data["compile_result"]["execution_time"] < 5
    assert data["run_result"] is None


@pytest.mark.parametrize("lang", sorted(ALL))
def test_run_timeout_is_time_limit_exceeded(client: TestClient, lang: str) -> None:
    data = run(client, lang, ALL[lang].timeout, run_timeout=1)
    assert data["status"] == "Failed"
    assert data["run_result"]["status"] == "TimeLimitExceeded", data
    assert data["run_result"]["execution_time"] < 3


@pytest.mark.parametrize("lang", sorted(ALL))
def test_memory_limit_stops_a_hog(client: TestClient, lang: str) -> None:
    data = run(client, lang, ALL[lang].hog, memory_limit_MB=128, run_timeout=10)
    assert data["status"] == "Failed", data
    assert data["run_result"] is not None, data  # it compiled, and the run failed
    assert "survived" not in (data["run_result"]["stdout"] or "")
    assert data["run_result"]["return_code"] != 0


def test_files_are_written_and_fetched_for_a_compiled_program(client: TestClient) -> None:
    code = (
        '#include <fstream>\n#include <string>\nint main(){ std::ifstream in("data/in.txt");'
        ' std::string s; in >> s; std::ofstream("out.txt") << s << s; }\n'
    )
    data = run(
        client,
        "cpp",
        code,
        files={"data/in.txt": base64.b64encode(b"ab").decode()},
        fetch_files=["out.txt"],
    )
    assert data["status"] == "Success", data
    assert base64.b64decode(data["files"]["out.txt"]) == b"abab"


def test_cpp_standard_is_chosen_by_name(client: TestClient) -> None:
    code = '#include <cstdio>\nint main(){ std::printf("%ld\\n", __cplusplus); }\n'
    assert run(client, "cpp11", code)["run_result"]["stdout"] == "201103\n"
    assert run(client, "cpp20", code)["run_result"]["stdout"] == "202002\n"
    assert run(client, CPP.language, code)["run_result"]["stdout"] == "201703\n"


def test_unbuilt_language_is_a_422_naming_the_build_command(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sandbox_languages, "image_for_family", lambda family: f"verifier-sandbox-{family}:never"
    )
    response = client.post("/run_code", json={"language": "rust", "code": "fn main(){}"})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "language_not_built"
    assert "verifier-service sandbox build-image --language rust" in body["hint"]


def test_typescript_runs_as_sandboxfusion_runs_it_without_type_checks(client: TestClient) -> None:
    # Types are stripped, not checked: a type error, or Node's globals (require, process, Buffer)
    # with no declarations for them, never stop a program SandboxFusion would run.
    code = (
        'import util from "util";\nconst fs = require("fs");\n'
        'const n: number = "six" as string;\n'
        "const total: number = fs.readFileSync(0, 'utf8').split(' ').map(Number)"
        ".reduce((a: number, b: number) => a + b, 0);\n"
        "console.log(util.format('%s %d', n, total), Buffer.from('ok').toString());\n"
    )
    data = run(client, "typescript", code, stdin="40 2", compile_timeout=60)
    assert data["status"] == "Success", data
    assert data["run_result"]["stdout"] == "six 42 ok\n"
    assert data["compile_result"]["return_code"] == 0
    # A syntax error is still a compile error, with the diagnostic, and nothing runs.
    data = run(client, "typescript", "const n: number = ;\n", compile_timeout=60)
    assert data["status"] == "Failed"
    assert data["run_result"] is None
    assert "TS1109" in data["compile_result"]["stderr"], data


@pytest.mark.parametrize("lang", ["rust", "typescript"])
def test_a_compile_past_its_limit_is_reported_as_the_compiles(
    client: TestClient, lang: str
) -> None:
    # The run's limit is the run's: a compile killed at its own limit is reported as that, with
    # its result, however short the run's limit (before: the judge's deadline for both, the sum
    # of the two, passed while the compile was being stopped, and the answer was a run timeout
    # with no compile_result).
    code = {"rust": 'fn main() { println!("hi"); }', "typescript": 'console.log("hi");'}[lang]
    for _ in range(3):
        data = run(client, lang, code, compile_timeout=0.05, run_timeout=0.01)
        assert data["status"] == "Failed", data
        assert data["compile_result"]["status"] == "TimeLimitExceeded", data
        assert data["run_result"] is None, data


def test_a_short_run_limit_is_measured_from_the_run(client: TestClient) -> None:
    # rustc takes far longer than the run's 0.5 s: a program that needs 0.1 s still succeeds.
    code = "fn main() { std::thread::sleep(std::time::Duration::from_millis(100)); }"
    data = run(client, "rust", code, run_timeout=0.5)
    assert data["status"] == "Success", data
    assert data["compile_result"]["execution_time"] > 0.1


def test_scratch_dirs_outside_the_work_dir_are_writable_and_fetched(client: TestClient) -> None:
    # SandboxFusion's programs write /mnt/b by absolute path; the root stays read-only.
    code = (
        "printf sauce > /mnt/b && printf tmp > /tmp/t && printf work > w.txt && "
        "if touch /etc/x 2>/dev/null; then echo root-writable; fi"
    )
    data = run(client, "bash", code, fetch_files=["/mnt/b", "/tmp/t", "w.txt", "/etc/passwd"])
    assert data["status"] == "Success", data
    assert data["run_result"]["stdout"] == ""
    files = {k: base64.b64decode(v) for k, v in data["files"].items()}
    assert files == {"/mnt/b": b"sauce", "/tmp/t": b"tmp", "w.txt": b"work"}
