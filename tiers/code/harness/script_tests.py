"""Runs an assert-style test script in the judge's test runner, inside the sandbox.

The tests run in a namespace that holds the solution's names as the judge's proxies (as when
solution and tests are concatenated into one file), and each top-level `assert` is one test.
Results go out as JSON lines on the result pipe, which only the judge reads. The runner
executes this text in the globals of judge_rpc.py, with _result_fd, _job and _tests added.
"""

from __future__ import annotations

import _ast
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tiers.code.harness.judge_rpc import (
        MONITOR,
        CandidateGoneError,
        start_candidate,
    )

TRACEBACK_CHARS = 4000
# Put in these globals by the runner (tiers/code/harness/runner.py, _start_test_runner).
_result_fd: int = globals()["_result_fd"]
_job: dict[str, Any] = globals()["_job"]
_tests: str = globals()["_tests"]

_out = os.fdopen(_result_fd, "w", buffering=1)


def _emit(obj: dict[str, Any]) -> None:
    import json

    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _describe(exc: BaseException) -> dict[str, Any]:
    import traceback

    tb = exc.__traceback__
    lines = traceback.format_exception(type(exc), exc, tb.tb_next if tb is not None else None)
    return {
        "traceback": "".join(lines)[-TRACEBACK_CHARS:],
        "exc": type(exc).__name__,
        "errno": getattr(exc, "errno", None),
    }


def _not_run(names: list[str], why: str) -> None:
    for name in names:
        _emit({"event": "result", "name": name, "outcome": "failed", "message": "not run: " + why})


def _run() -> int:
    import linecache

    # Tracebacks show the failing line of the tests, which are in no file here.
    linecache.cache["tests.py"] = (len(_tests), None, _tests.splitlines(True), "tests.py")
    tree = compile(_tests, "tests.py", "exec", _ast.PyCF_ONLY_AST)
    assert isinstance(tree, _ast.Module)
    asserts = [n for n in tree.body if isinstance(n, _ast.Assert)]
    names = [f"line_{n.lineno}" for n in asserts] or ["script"]
    _emit({"event": "collected", "tests": names})
    try:
        state = start_candidate(_job)
    except CandidateGoneError:
        _not_run(names, "the candidate's process ended while loading solution.py")
        return 1
    if "setup_failed" in state:
        _emit({"event": "setup_failed", "code": state["setup_failed"]})
        return 1
    if "solution_error" in state:
        info = state["solution_error"]
        _emit({"event": "solution_error", "traceback": str(info.get("traceback")),
               "exc": str(info.get("type")), "errno": info.get("errno")})  # fmt: skip
        _not_run(names, "solution.py raised " + str(info.get("type")))
        _emit({"event": "finished"})
        return 1
    scope: dict[str, Any] = dict(state["names"], __name__="__main__")
    # `from solution import f` / `import solution` in a script reach the same proxies.
    import sys

    module = type(sys)("solution")
    module.__dict__.update(state["names"])
    sys.modules["solution"] = module
    failed_at = None
    failures = 0
    for node in tree.body:
        name = f"line_{node.lineno}"
        if failed_at is not None:
            if isinstance(node, _ast.Assert):
                _not_run([name], failed_at)
            continue
        try:
            code = compile(_ast.Module(body=[node], type_ignores=[]), "tests.py", "exec")
            exec(code, scope)
        except CandidateGoneError:
            pending = [f"line_{n.lineno}" for n in asserts if n.lineno >= node.lineno]
            _not_run(pending or [name], "the candidate's process ended during the tests")
            return 1
        except Exception as exc:
            info = _describe(exc)
            failures += 1
            if isinstance(node, _ast.Assert):
                _emit(dict(info, event="result", name=name, outcome="failed"))
            else:
                failed_at = f"line {node.lineno} raised {info['exc']}"
                _emit(dict(info, event="result", outcome="failed",
                           name=name + "_setup" if asserts else "script"))  # fmt: skip
        else:
            if isinstance(node, _ast.Assert):
                _emit({"event": "result", "name": name, "outcome": "passed"})
    if not asserts and failed_at is None:
        _emit({"event": "result", "name": "script", "outcome": "passed"})
    _emit({"event": "finished"})
    return 0 if failed_at is None and not failures else 1


try:
    _code = _run()
finally:
    _emit({"event": "monitor", "signals": sorted(MONITOR)})
    _out.close()
raise SystemExit(_code)
