"""Runs an assert-style test script inside the sandbox (the runner's test child executes it).

The solution and the tests share one namespace (as when they are concatenated into one file),
and each top-level `assert` is one test. Results go out as JSON lines on the pipe the runner
opened (fd in VS_RESULT_FD). The runner executes this text in the globals
{"__name__": "__harness__", "_json_dumps": <its JSON encoder>}: json itself would import re.
"""

from __future__ import annotations

import _ast
import os
import sys

TRACEBACK_CHARS = 4000

_json_dumps = globals()["_json_dumps"]  # put there by the runner

_out = os.fdopen(int(os.environ.pop("VS_RESULT_FD")), "w", buffering=1)


def _emit(obj: dict[str, object]) -> None:
    _out.write(_json_dumps(obj) + "\n")
    _out.flush()


def _describe(exc: BaseException) -> dict[str, object]:
    import traceback  # only on failure: it costs an import of re and tokenize

    tb = exc.__traceback__
    lines = traceback.format_exception(type(exc), exc, tb.tb_next if tb is not None else None)
    return {
        "traceback": "".join(lines)[-TRACEBACK_CHARS:],
        "exc": type(exc).__name__,
        "errno": getattr(exc, "errno", None),
    }


tests_src = open("/work/tests.py").read()
# _ast, not ast: the same tree without ast.py's import of enum.
tree = compile(tests_src, "tests.py", "exec", _ast.PyCF_ONLY_AST)
assert isinstance(tree, _ast.Module)  # what "exec" mode parses to; tells the type checker
asserts = [n for n in tree.body if isinstance(n, _ast.Assert)]
names = [f"line_{n.lineno}" for n in asserts] or ["script"]
_emit({"event": "collected", "tests": names})
module = type(sys)("__main__")
module.__file__ = "/work/solution.py"
sys.modules["__main__"] = module
sys.path.insert(0, "/work")
try:
    exec(compile(open("/work/solution.py").read(), "solution.py", "exec"), module.__dict__)
except BaseException as exc:
    info = _describe(exc)
    _emit(dict(info, event="solution_error"))
    for name in names:
        _emit(
            {
                "event": "result",
                "name": name,
                "outcome": "failed",
                "message": "not run: solution.py raised " + str(info["exc"]),
            }
        )
    _emit({"event": "finished"})
    raise SystemExit(1) from None
failed_at = None
_failures = 0
for node in tree.body:
    name = f"line_{node.lineno}"
    if failed_at is not None:
        if isinstance(node, _ast.Assert):
            message = "not run: " + failed_at
            _emit({"event": "result", "name": name, "outcome": "failed", "message": message})
        continue
    try:
        exec(
            compile(_ast.Module(body=[node], type_ignores=[]), "tests.py", "exec"), module.__dict__
        )
    except BaseException as exc:
        info = _describe(exc)
        _failures += 1
        if isinstance(node, _ast.Assert):
            _emit(dict(info, event="result", name=name, outcome="failed"))
        else:
            # A statement that is not a test failed: the remaining tests cannot run.
            failed_at = f"line {node.lineno} raised {info['exc']}"
            _emit(
                dict(
                    info,
                    event="result",
                    name=name + "_setup" if asserts else "script",
                    outcome="failed",
                    extra=bool(asserts),
                )
            )
    else:
        if isinstance(node, _ast.Assert):
            _emit({"event": "result", "name": name, "outcome": "passed"})
if not asserts and failed_at is None:
    _emit({"event": "result", "name": "script", "outcome": "passed"})
_emit({"event": "finished"})
_out.close()
raise SystemExit(0 if failed_at is None and not _failures else 1)
