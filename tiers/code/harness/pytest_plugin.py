"""Runs pytest-style tests in the judge's test runner, inside the sandbox.

pytest runs here, under the judge's uid, on a copy of the tests in the judge's own directory
(the candidate can neither read nor write it, nor ship a conftest.py or plugin that pytest
would load). `solution` is a module of the judge's proxies, and the solution's public names are
also builtins (HumanEval-style tests that do not import them). Each test's result goes out as a
JSON line on the result pipe, which only the judge reads; an expected failure (xfail) is not a
pass. The runner executes this text in the globals of judge_rpc.py, with _result_fd, _job and
_tests added.
"""

from __future__ import annotations

import builtins
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import pytest

    from tiers.code.harness.judge_rpc import MONITOR, CandidateGoneError, start_candidate

TRACEBACK_CHARS = 4000
# Put in these globals by the runner (tiers/code/harness/runner.py, _start_test_runner).
_result_fd: int = globals()["_result_fd"]
_job: dict[str, Any] = globals()["_job"]
_tests: str = globals()["_tests"]
TEST_FILE = "/judge/test_solution.py"

_out = os.fdopen(_result_fd, "w", buffering=1)


def _emit(obj: dict[str, Any]) -> None:
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _name(nodeid: str) -> str:
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


class ResultPlugin:
    """Reports collection and every test's outcome to the judge."""

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            _emit({"event": "collect_error", "name": report.nodeid,
                   "traceback": str(report.longrepr)[-TRACEBACK_CHARS:]})  # fmt: skip

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        _emit({"event": "collected", "tests": [_name(i.nodeid) for i in session.items]})

    def pytest_exception_interact(
        self, node: pytest.Item | pytest.Collector, call: pytest.CallInfo[Any]
    ) -> None:
        exc = call.excinfo.value if call.excinfo is not None else None
        if exc is not None and hasattr(node, "nodeid"):
            _emit({"event": "exc", "name": _name(node.nodeid), "exc": type(exc).__name__,
                   "errno": getattr(exc, "errno", None)})  # fmt: skip

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome: str = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed"  # an expected failure is not a pass
        if report.when == "call" or outcome != "passed":
            event: dict[str, Any] = {"event": "result", "name": _name(report.nodeid),
                                     "outcome": outcome, "when": report.when}  # fmt: skip
            if report.failed:
                event["traceback"] = str(report.longrepr)[-TRACEBACK_CHARS:]
            _emit(event)

    def pytest_sessionfinish(self, exitstatus: int) -> None:
        if not MONITOR.intersection({"exited_early"}):
            _emit({"event": "finished", "exitstatus": int(exitstatus)})


def _run() -> int:
    module = type(sys)("solution")
    sys.modules["solution"] = module
    try:
        state = start_candidate(_job)
    except CandidateGoneError:
        state = {"gone": True}
    if "setup_failed" in state:
        _emit({"event": "setup_failed", "code": state["setup_failed"]})
        return 1
    if "solution_error" in state:
        info = state["solution_error"]
        _emit({"event": "solution_error", "traceback": str(info.get("traceback")),
               "exc": str(info.get("type")), "errno": info.get("errno")})  # fmt: skip
    for key, value in (state.get("names") or {}).items():
        setattr(module, key, value)
        if not key.startswith("_") and not hasattr(builtins, key):
            setattr(builtins, key, value)
    with open(TEST_FILE, "w") as fh:
        fh.write(_tests)
    import pytest

    args = ["-q", "--tb=short", "-p", "no:cacheprovider", "-o", "console_output_style=classic",
            "--rootdir", "/judge", "-c", "/dev/null", TEST_FILE]  # fmt: skip
    return int(pytest.main(args, plugins=[ResultPlugin()]))


try:
    _code = _run()
finally:
    _emit({"event": "monitor", "signals": sorted(MONITOR)})
    _out.close()
raise SystemExit(_code)
