"""Runs stdin/stdout cases in the judge's test runner, inside the sandbox.

The candidate's process runs solution.py once per case with the case's stdin and sends back
what it wrote; the expected output and the checker (exact, tokens, float, or a special judge
given as code) stay here, under the judge's uid. A case fails when its answer took longer than
its time limit by the judge's own clock. The runner executes this text in the globals of
judge_rpc.py, with _result_fd, _job and _tests (the cases and checker as JSON) added.
"""

from __future__ import annotations

import json
import math
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from tiers.code.harness.judge_rpc import MONITOR, CandidateGoneError, receive, request, send

TRACEBACK_CHARS = 4000
DIFF_CHARS = 2000
# Put in these globals by the runner (tiers/code/harness/runner.py, _start_test_runner).
_result_fd: int = globals()["_result_fd"]
_job: dict[str, Any] = globals()["_job"]
_tests: str = globals()["_tests"]

_out = os.fdopen(_result_fd, "w", buffering=1)


def _emit(obj: dict[str, Any]) -> None:
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _float_equal(got: str, want: str, abs_tol: float, rel_tol: float) -> bool:
    try:
        a, b = float(got), float(want)
    except ValueError:
        return got == want
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def make_checker(config: dict[str, Any]) -> Callable[[str, str, str], bool]:
    """check(stdin, output, expected) -> passed, for the configured checker."""
    kind = config.get("checker") or "tokens"
    if kind == "exact":
        return lambda _i, got, want: got.rstrip("\n") == want.rstrip("\n")
    if kind == "tokens":
        return lambda _i, got, want: got.split() == want.split()
    if kind == "float":
        abs_tol = float(config.get("abs_tol") or 1e-6)
        rel_tol = float(config.get("rel_tol") or 1e-6)
        return lambda _i, got, want: (
            len(got.split()) == len(want.split())
            and all(
                _float_equal(g, w, abs_tol, rel_tol)
                for g, w in zip(got.split(), want.split(), strict=True)
            )
        )
    scope: dict[str, Any] = {"__name__": "special_judge"}
    exec(compile(str(config.get("checker_code")), "checker.py", "exec"), scope)
    check = scope["check"]
    return lambda i, got, want: check(i, got, want) is True


def _diff(got: str, want: str) -> str:
    import difflib

    lines = difflib.unified_diff(
        want.splitlines(), got.splitlines(), "expected", "output", lineterm="", n=2
    )
    return "\n".join(lines)[:DIFF_CHARS]


def _run() -> None:
    config = json.loads(_tests)
    cases = config["cases"]
    names = config.get("names") or [f"case_{i + 1}" for i in range(len(cases))]
    _emit({"event": "collected", "tests": names})
    check = make_checker(config)
    limit = float(config.get("case_timeout_s") or 2.0)
    try:
        send(_job)
        ready = receive()
    except CandidateGoneError:
        ready = {"gone": True}
    if "setup_failed" in ready:
        _emit({"event": "setup_failed", "code": ready["setup_failed"]})
        return
    if isinstance(ready.get("compile_failed"), dict):  # another language's compiler said no
        built = ready["compile_failed"]
        why = (
            "timed out"
            if built.get("status") == "TimeLimitExceeded"
            else f"exited with {built.get('return_code')}"
        )
        output = str(built.get("stderr") or "") + str(built.get("stdout") or "")
        output = output[-DIFF_CHARS * 4 :]
        _emit({"event": "solution_error", "exc": "CompileError",
               "traceback": f"the compiler {why}:\n{output}"})  # fmt: skip
        for name in names:
            _emit({"event": "result", "name": name, "outcome": "failed",
                   "message": f"{name}: not run: the program does not compile"})  # fmt: skip
        _emit({"event": "finished"})
        return
    for index, (name, case) in enumerate(zip(names, cases, strict=True)):
        started = time.monotonic()
        try:
            got = request({"op": "case", "stdin": str(case.get("stdin") or ""), "timeout_s": limit})
        except CandidateGoneError:
            for rest in names[index:]:
                _emit({"event": "result", "name": rest, "outcome": "failed",
                       "message": "not run: the candidate's process ended"})  # fmt: skip
            return
        answer = got["ret"] if isinstance(got.get("ret"), dict) else {}
        output = str(answer.get("stdout") or "")
        took = time.monotonic() - started
        want = str(case.get("stdout") or "")
        message = ""
        if answer.get("timed_out") or took > limit + 0.5:
            message = f"{name}: time limit {limit:g} s exceeded"
        elif answer.get("exit") != 0:
            stderr = str(answer.get("stderr") or "")[-TRACEBACK_CHARS:]
            message = f"{name}: the program exited with {answer.get('exit')}\n{stderr}"
        else:
            try:
                passed = check(str(case.get("stdin") or ""), output, want)
            except Exception as exc:
                passed = False
                message = f"{name}: the checker raised {type(exc).__name__}: {exc}"
            if not passed and not message:
                message = f"{name}: wrong answer\n{_diff(output, want)}"
        if message:
            _emit({"event": "result", "name": name, "outcome": "failed", "message": message})
        else:
            _emit({"event": "result", "name": name, "outcome": "passed"})
    _emit({"event": "finished"})


try:
    _run()
finally:
    _emit({"event": "monitor", "signals": sorted(MONITOR)})
    _out.close()
