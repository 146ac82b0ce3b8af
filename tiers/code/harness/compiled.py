"""Compile and run a program of another language than Python, in the candidate's process.

candidate.py executes this text (its COMPILED_HARNESS) when the job names a language
(tiers.code.languages.Language.harness_spec): the source is written under the language's file
name, the compile command runs under the candidate's uid with its own wall-clock limit (its whole
process group is killed past it), and the run command gets the language's environment and, for
native programs, the run's memory limit as RLIMIT_AS. Nothing here is trusted by the judge: it
only reports what the compiler said and how the run ended, as the candidate's process always has.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import subprocess
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COMPILE_OUTPUT_CHARS = 16000


def language_env(lang: dict[str, Any]) -> dict[str, str]:
    """The environment compile and run commands see: the candidate's, plus the language's."""
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (lang.get("env") or {}).items()})
    return env


def limit_run_memory(lang: dict[str, Any]) -> None:
    """In the run's child, before exec: the run's memory limit as RLIMIT_AS (native programs)."""
    limit_mb = lang.get("rlimit_as_mb")
    if limit_mb:
        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def compile_program(lang: dict[str, Any], work: str) -> dict[str, Any] | None:
    """Run the language's compile command in `work`; None for a language without one.

    Returns SandboxFusion's CommandRunResult fields: status (Finished, Error when the compiler
    could not start, TimeLimitExceeded), execution_time, return_code, stdout, stderr.
    """
    command = lang.get("compile")
    if not command:
        return None
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [str(c) for c in command],
            cwd=work,
            env=language_env(lang),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return {"status": "Error", "execution_time": 0.0, "return_code": None,
                "stdout": "", "stderr": f"the compiler could not start: {exc}"}  # fmt: skip
    timeout_s = float(lang.get("compile_timeout_s") or 10.0)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        status = "Finished"
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        status = "TimeLimitExceeded"
    _kill_group(proc)  # whatever the compiler left behind
    return {
        "status": status,
        "execution_time": round(time.monotonic() - started, 4),
        "return_code": proc.returncode if status == "Finished" else None,
        "stdout": out[-COMPILE_OUTPUT_CHARS:].decode(errors="replace"),
        "stderr": err[-COMPILE_OUTPUT_CHARS:].decode(errors="replace"),
    }


def compile_failed(result: dict[str, Any] | None) -> bool:
    return result is not None and (result["status"] != "Finished" or result["return_code"] != 0)


def wait_with_limit(pid: int, timeout_s: float | None) -> tuple[int, bool, float]:
    """Wait for `pid` (a session leader) at most `timeout_s`; kill its group past it.

    Returns (exit code as os.waitstatus_to_exitcode gives it, timed out, seconds taken).
    """
    started = time.monotonic()
    if timeout_s is None:
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        return code, False, time.monotonic() - started
    deadline = started + timeout_s
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(raw), False, time.monotonic() - started
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            poller.poll(remaining * 1000)
    finally:
        os.close(fd)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return code, True, time.monotonic() - started
