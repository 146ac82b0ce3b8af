"""The conftest.py the runner writes next to a candidate's pytest tests, inside the sandbox.

Reports each pytest test as a JSON line on the pipe the runner opened (fd in VS_RESULT_FD), and
makes the solution's public names visible to test files that do not import them (HumanEval-style
tests).
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import traceback

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import pytest

TRACEBACK_CHARS = 4000

_out = os.fdopen(int(os.environ.pop("VS_RESULT_FD")), "w", buffering=1)


def _emit(obj: dict[str, Any]) -> None:
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _name(nodeid: str) -> str:
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def pytest_sessionstart() -> None:
    sys.path.insert(0, "/work")
    try:
        import solution  # type: ignore[import-not-found]  # the candidate's, in /work
    except BaseException as exc:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        _emit(
            {
                "event": "solution_error",
                "traceback": "".join(lines)[-TRACEBACK_CHARS:],
                "exc": type(exc).__name__,
                "errno": getattr(exc, "errno", None),
            }
        )
        return
    for key, value in vars(solution).items():
        if not key.startswith("_") and not hasattr(builtins, key):
            setattr(builtins, key, value)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _emit(
            {
                "event": "collect_error",
                "name": report.nodeid,
                "traceback": str(report.longrepr)[-TRACEBACK_CHARS:],
            }
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    _emit({"event": "collected", "tests": [_name(i.nodeid) for i in session.items]})


def pytest_exception_interact(
    node: pytest.Item | pytest.Collector, call: pytest.CallInfo[Any]
) -> None:
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is not None and hasattr(node, "nodeid"):
        _emit(
            {
                "event": "exc",
                "name": _name(node.nodeid),
                "exc": type(exc).__name__,
                "errno": getattr(exc, "errno", None),
            }
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcome = report.outcome
    if hasattr(report, "wasxfail"):
        outcome = "passed"
    if report.when == "call" or outcome != "passed":
        event: dict[str, Any] = {
            "event": "result",
            "name": _name(report.nodeid),
            "outcome": outcome,
            "when": report.when,
        }
        if report.failed:
            event["traceback"] = str(report.longrepr)[-TRACEBACK_CHARS:]
        _emit(event)


def pytest_sessionfinish(exitstatus: int) -> None:
    _emit({"event": "finished", "exitstatus": int(exitstatus)})
