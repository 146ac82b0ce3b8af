"""Runs plain programs for `POST /run_code` through the same single-use container pool."""

from __future__ import annotations

import binascii
import logging

from tiers.code.attach import SandboxInfraError
from tiers.code.engine import SandboxUnavailableError
from tiers.code.pool import get_pool
from tiers.code.settings import SandboxSettings
from tiers.registry import settings_for
from verifier_service.sandbox.schemas import (
    CommandRunResult,
    CommandRunStatus,
    RunCodeRequest,
    RunCodeResponse,
    RunStatus,
)

logger = logging.getLogger(__name__)

SUPPORTED_LANGUAGES = frozenset({"python", "python3"})


def _sandbox_error(message: str) -> RunCodeResponse:
    return RunCodeResponse(status=RunStatus.SandboxError, message=message)


def run_settings(settings: SandboxSettings) -> SandboxSettings:
    """The sandbox settings `/run_code` runs under: the tier's, with the run_code limits.

    Output within `run_code_output_limit_bytes` comes back whole (no separate, smaller cap), and
    `run_timeout` is honoured up to `run_code_max_timeout_s`. The pool of a process is keyed by
    its settings; only `/run_code` uses the API process's pool, so these are its settings, and
    it keeps `run_code_pool_size` warm containers (none by default).
    """
    limit = settings.run_code_output_limit_bytes
    return settings.model_copy(
        update={
            "output_cap_bytes": limit,
            "output_limit_bytes": limit,
            "max_timeout_s": settings.run_code_max_timeout_s,
            "max_memory_mb": max(settings.max_memory_mb, settings.run_code_memory_mb),
            "pool_size": settings.run_code_pool_size,
        }
    )


def run_code(request: RunCodeRequest) -> RunCodeResponse:
    """Run `request.code` once in a fresh sandbox container; never raises for bad requests."""
    if request.language.lower() not in SUPPORTED_LANGUAGES:
        return _sandbox_error(
            f"language {request.language!r} is not supported by this sandbox; supported: python"
        )
    settings = run_settings(settings_for("code", SandboxSettings))
    if request.run_timeout <= 0:
        return _sandbox_error("run_timeout must be positive")
    timeout_s = min(request.run_timeout, settings.max_timeout_s)
    memory_mb = settings.run_code_memory_mb
    if request.memory_limit_MB > 0:
        memory_mb = max(64, min(request.memory_limit_MB, settings.max_memory_mb))
    files: dict[str, str] = {}
    for path, content in request.files.items():
        if content is None:
            continue  # SandboxFusion: a file whose content is None is not written
        try:
            binascii.a2b_base64(content)
        except binascii.Error:
            return _sandbox_error(f"files[{path!r}] is not valid base64")
        files[path] = content
    size = len(request.code.encode()) + sum(len(c) for c in files.values())
    size += len((request.stdin or "").encode())
    if size > settings.max_source_bytes:
        return _sandbox_error(
            f"code, stdin and files are {size} bytes; the limit is {settings.max_source_bytes}"
        )
    spec = {
        "mode": "run",
        "code": request.code,
        "stdin": request.stdin,
        "files": files,
        "fetch_files": request.fetch_files,
        "timeout_s": timeout_s,
        "output_cap": settings.output_cap_bytes,
        "output_limit": settings.output_limit_bytes,
    }
    try:
        outcome = get_pool(settings).run(spec, timeout_s, memory_mb)
    except (SandboxUnavailableError, SandboxInfraError) as exc:
        logger.warning("run_code could not run: %s", exc)
        return _sandbox_error(str(exc))

    report = outcome.report
    if report is None:
        if outcome.host_timed_out:
            run = CommandRunResult(
                status=CommandRunStatus.TimeLimitExceeded, execution_time=outcome.wall_s
            )
            return RunCodeResponse(status=RunStatus.Failed, message="", run_result=run)
        if outcome.extra.get("oom_killed"):
            why = f"memory limit of {memory_mb} MB exceeded; killed"
        elif outcome.host_output_exceeded:
            why = "the program wrote too much output and was killed"
        else:
            why = f"the sandbox harness died (exit code {outcome.exit_code})"
        run = CommandRunResult(
            status=CommandRunStatus.Finished, execution_time=outcome.wall_s, stderr=why
        )
        return RunCodeResponse(status=RunStatus.Failed, message=why, run_result=run)
    if report.get("harness") != "ok":
        return _sandbox_error(f"sandbox harness: {report.get('error')}")

    raw = report.get("run") or {}
    signal_no = raw.get("signal")
    return_code = raw.get("exit_code")
    if signal_no:
        return_code = -int(signal_no)
    stderr = str(raw.get("stderr") or "")
    notes = []
    if raw.get("output_exceeded"):
        notes.append(f"output limit of {settings.output_limit_bytes} bytes exceeded; killed")
    elif report.get("oom_kills", 0) > 0 and signal_no:
        notes.append(f"memory limit of {memory_mb} MB exceeded; killed")
    if notes:
        stderr = (stderr + "\n" if stderr else "") + "; ".join(notes)
    if raw.get("timed_out"):
        status = CommandRunStatus.TimeLimitExceeded
        return_code = None
    else:
        status = CommandRunStatus.Finished
    run = CommandRunResult(
        status=status,
        execution_time=raw.get("duration_s"),
        return_code=return_code,
        stdout=str(raw.get("stdout") or ""),
        stderr=stderr,
    )
    ok = status is CommandRunStatus.Finished and return_code == 0
    return RunCodeResponse(
        status=RunStatus.Success if ok else RunStatus.Failed,
        message="",
        run_result=run,
        files={k: str(v) for k, v in (report.get("files") or {}).items()},
    )
