"""The programs that run inside a sandbox container, kept as files that ruff and mypy check.

`runner.py` is the judge (the container's PID 1); it starts `candidate.py` as the candidate's
process under another uid, and runs `judge_rpc.py` with `script_tests.py` (assert-style tests)
or `pytest_plugin.py` (pytest tests) in its test runner. They are read from the installed
package (package data) and put together into one program for `python3 -I -c`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

# runner.py's placeholder line -> the file whose text replaces its empty string.
_EMBEDDED = {
    'CANDIDATE_STUB = ""': "candidate.py",
    'JUDGE_RPC = ""': "judge_rpc.py",
    'SCRIPT_HARNESS = ""': "script_tests.py",
    'PYTEST_HARNESS = ""': "pytest_plugin.py",
    'IO_HARNESS = ""': "io_tests.py",
}


def harness_source(name: str) -> str:
    """The text of one harness file of this package."""
    return resources.files("tiers.code.harness").joinpath(name).read_text()


@cache
def harness_program() -> str:
    """The runner's source with the test programs it runs filled in: the container's command."""
    program = harness_source("runner.py")
    for placeholder, name in _EMBEDDED.items():
        if program.count(placeholder) != 1:
            raise RuntimeError(f"runner.py must hold the line {placeholder!r} exactly once")
        variable = placeholder.partition(" = ")[0]
        program = program.replace(placeholder, f"{variable} = {harness_source(name)!r}")
    return program
