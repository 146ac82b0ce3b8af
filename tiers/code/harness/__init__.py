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
    'SERVE_LOOP = ""': "serve.py",
    'SPAWN = ""': "spawn.py",
    'ZYGOTE_PROGRAM = ""': "zygote.py",
    'WATCH = ""': "watch.py",
}


def harness_source(name: str) -> str:
    """The text of one harness file of this package."""
    return resources.files("tiers.code.harness").joinpath(name).read_text()


@cache
def harness_program() -> str:
    """The runner's source with the test programs it runs filled in: the container's command."""
    program = harness_source("runner.py")
    for placeholder, name in _EMBEDDED.items():
        program = _fill(program, placeholder, _filled_source(name), "runner.py")
    return program


# A harness file's placeholder line -> the file whose text replaces its empty string.
_NESTED = {"candidate.py": {'COMPILED_HARNESS = ""': "compiled.py"}}


def _filled_source(name: str) -> str:
    text = harness_source(name)
    for placeholder, inner in _NESTED.get(name, {}).items():
        text = _fill(text, placeholder, harness_source(inner), name)
    return text


def _fill(program: str, placeholder: str, text: str, where: str) -> str:
    if program.count(placeholder) != 1:
        raise RuntimeError(f"{where} must hold the line {placeholder!r} exactly once")
    variable = placeholder.partition(" = ")[0]
    return program.replace(placeholder, f"{variable} = {text!r}")
