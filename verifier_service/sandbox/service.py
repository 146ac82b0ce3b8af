"""Runs plain programs for `POST /run_code` through the same single-use container pools."""

from __future__ import annotations

import binascii
import hashlib
import logging
from typing import Any

from fastapi.concurrency import run_in_threadpool

from tiers.code.attach import RunOutcome, SandboxInfraError
from tiers.code.engine import SandboxUnavailableError
from tiers.code.languages import UnknownLanguageError, get_language
from tiers.code.pool import get_pool
from tiers.code.sandbox_languages import (
    LanguageNotBuiltError,
    compile_timeout,
    language_built,
    run_program,
)
from tiers.code.settings import SandboxSettings
from tiers.registry import settings_for
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.sandbox.capacity import key_slots, run_pool
from verifier_service.sandbox.errors import LanguageNotBuiltRequestError, RunCodeBusyError
from verifier_service.sandbox.schemas import (
    CommandRunResult,
    CommandRunStatus,
    RunCodeRequest,
    RunCodeResponse,
    RunStatus,
)

logger = logging.getLogger(__name__)


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
            "language_pool_size": settings.run_code_pool_size,
            "language_pool_sizes": {},
        }
    )


def _owner(principal: AuthenticatedPrincipal) -> str:
    """Whose runs a cap counts together: the key's, or a signed-in person's."""
    if principal.key_id is not None:
        return f"key:{principal.key_id}"
    return f"{principal.via}:{hashlib.sha256(principal.name.encode()).hexdigest()[:32]}"


async def run_code_capped(
    request: RunCodeRequest, principal: AuthenticatedPrincipal, broker_url: str
) -> RunCodeResponse:
    """`run_code` within the caps: the caller's runs in flight (`run_code_concurrency_per_key`,
    across API processes) and this process's (`run_code_concurrency`), on a thread pool of
    its own (never the one the API's other routes share). 429 (RunCodeBusyError) when full."""
    settings = settings_for("code", SandboxSettings)
    owner, cap = _owner(principal), settings.run_code_concurrency_per_key
    # Held at most as long as the run may take (a process that dies frees the slot then).
    lease_s = settings.run_code_max_timeout_s + settings.compile_max_timeout_s + 60
    slots = key_slots(broker_url)
    token = await run_in_threadpool(slots.take, owner, cap, lease_s)
    if token is None:
        raise RunCodeBusyError(
            f"{cap} /run_code programs of this caller are running, its most at once",
            cap="per_key", limit=cap,
        )  # fmt: skip
    pool = run_pool(settings.run_code_concurrency)
    try:
        pool.admit()
    except RunCodeBusyError:
        await run_in_threadpool(slots.give_back, owner, token)
        raise

    def run_then_give_back() -> RunCodeResponse:
        try:
            return run_code(request)
        finally:
            slots.give_back(owner, token)

    return await pool.run(run_then_give_back)


def run_code(request: RunCodeRequest) -> RunCodeResponse:
    """Run `request.code` once in a fresh sandbox container; never raises for bad requests."""
    try:
        language = get_language(request.language)
    except UnknownLanguageError as exc:
        return _sandbox_error(str(exc))
    settings = run_settings(settings_for("code", SandboxSettings))
    if language_built(language, settings) is False:
        raise LanguageNotBuiltRequestError(language, settings)
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
    spec: dict[str, Any] = {
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
        if language.name == "python":
            outcome = get_pool(settings).run(spec, timeout_s, memory_mb)
        else:
            if request.compile_timeout <= 0:
                return _sandbox_error("compile_timeout must be positive")
            outcome = run_program(
                language,
                settings,
                spec,
                run_timeout_s=timeout_s,
                compile_timeout_s=compile_timeout(language, request.compile_timeout, settings),
                memory_mb=memory_mb,
            )
    except LanguageNotBuiltError as exc:
        raise LanguageNotBuiltRequestError(exc.language, settings) from exc
    except (SandboxUnavailableError, SandboxInfraError) as exc:
        logger.warning("run_code could not run: %s", exc)
        return _sandbox_error(str(exc))
    return _response(outcome, settings, memory_mb)


def _response(outcome: RunOutcome, settings: SandboxSettings, memory_mb: int) -> RunCodeResponse:
    """SandboxFusion's response from what the sandbox reported."""

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

    built = report.get("compile")
    compile_result = CommandRunResult.model_validate(built) if isinstance(built, dict) else None
    if compile_result is not None and (
        compile_result.status is not CommandRunStatus.Finished or compile_result.return_code != 0
    ):  # SandboxFusion: a program that does not compile is Failed, with no run_result
        return RunCodeResponse(status=RunStatus.Failed, message="", compile_result=compile_result)
    raw = dict(report.get("run") or {})
    program = report.get("program")
    if isinstance(program, dict):  # the run's own clock, without the compile's time
        raw.update(duration_s=program.get("duration_s"))
        raw["timed_out"] = bool(raw.get("timed_out") or program.get("timed_out"))
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
        compile_result=compile_result,
        run_result=run,
        files={k: str(v) for k, v in (report.get("files") or {}).items()},
    )
