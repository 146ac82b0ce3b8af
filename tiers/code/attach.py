"""The attach protocol between the host and a sandbox container's harness.

The harness is the container's PID 1, started ahead and waiting for one JSON spec on stdin. The
host attaches to the container, writes the spec and closes its side, then reads the framed
stdout/stderr stream until the harness exits; stdout carries the harness's one JSON report.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tiers.code.settings import SandboxSettings

logger = logging.getLogger(__name__)

# What the harness writes on the container's stderr once it has read the whole spec. Only the
# harness writes there (the candidate runs under another uid, with its own pipes): without it a
# container that died was never given the candidate, and another may take the candidate.
DELIVERED_MARK = b"vs:received\n"

# Extra wall-clock the host allows past the candidate's own limit before it kills the
# container: harness start-up, writing files, reporting.
HOST_GRACE_S = 3.0


class SandboxInfraError(RuntimeError):
    """A run failed for a reason of ours (engine error, container would not start)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class RunOutcome:
    """What came back from one sandbox run: the harness report, or why there is none."""

    report: dict[str, Any] | None
    exit_code: int | None
    host_timed_out: bool = False
    host_output_exceeded: bool = False
    wall_s: float = 0.0
    raw_stderr: str = ""
    container_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run_attached(
    api: Any, cid: str, spec: dict[str, Any], timeout_s: float, memory_mb: int, s: SandboxSettings
) -> RunOutcome:
    """Hand `spec` to the harness waiting in started container `cid` and read its report.

    `api` is the engine's low-level client (docker.APIClient). The container's memory limit is
    raised or lowered to `memory_mb` first. A host watchdog kills the container at the
    candidate's deadline plus a grace, and the host stops reading (and kills it) past its own
    output cap. Raises SandboxInfraError with reason container_gone when the container had died
    before the attach, or another reason for engine failures.
    """
    import docker.errors

    if memory_mb != s.default_memory_mb:
        try:
            api.update_container(cid, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m")
        except docker.errors.DockerException as exc:
            raise infra_error("container_update_failed", exc) from exc
    payload = json.dumps(spec).encode()
    try:
        sock_io = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    except docker.errors.NotFound as exc:
        raise SandboxInfraError("container_gone", str(exc)) from exc
    except docker.errors.APIError as exc:
        if "is not running" in str(exc) or exc.status_code == 409:
            raise SandboxInfraError("container_gone", str(exc)) from exc
        raise infra_error("attach_failed", exc) from exc
    except Exception as exc:
        raise infra_error("engine_unavailable", exc) from exc
    sock: socket.socket = getattr(sock_io, "_sock", sock_io)

    host_limit = 4 * s.output_cap_bytes + 8 * 1024 * 1024
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        try:
            api.kill(cid)
        except Exception:
            logger.debug("kill of %s after its deadline failed", cid[:12], exc_info=True)

    budget = timeout_s * (2 if spec.get("setup") else 1) + HOST_GRACE_S
    watchdog = threading.Timer(budget, kill)
    streams = {1: bytearray(), 2: bytearray()}
    received = 0
    exceeded = False
    started = time.perf_counter()
    try:
        watchdog.start()
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        # The attach stream is framed: 8-byte header (stream id, 3 zero bytes, length).
        pending = bytearray()
        while True:
            data = sock.recv(65536)
            if not data:
                break
            received += len(data)
            pending += data
            while len(pending) >= 8:
                size = int.from_bytes(pending[4:8], "big")
                if len(pending) < 8 + size:
                    break
                kind = pending[0]
                if kind in streams and len(streams[kind]) < host_limit:
                    streams[kind] += pending[8 : 8 + size]
                del pending[: 8 + size]
            if received > host_limit + 64 * 1024:
                exceeded = True
                kill()
                break
    except OSError as exc:
        if not killed.is_set():
            raise infra_error("engine_unavailable", exc) from exc
    finally:
        watchdog.cancel()
        sock_io.close()
    wall = time.perf_counter() - started
    delivered = streams[2].startswith(DELIVERED_MARK)
    if delivered:
        del streams[2][: len(DELIVERED_MARK)]
    report: dict[str, Any] | None = None
    if not killed.is_set():
        try:
            parsed = json.loads(bytes(streams[1]))
            report = parsed if isinstance(parsed, dict) else None
        except ValueError:
            report = None
    exit_code: int | None = 0
    oom_killed = False
    if report is None and not killed.is_set():
        # Only now does the container's own state tell anything.
        try:
            state = api.inspect_container(cid)["State"]
        except Exception as exc:
            raise infra_error("engine_unavailable", exc) from exc
        exit_code = state.get("ExitCode")
        oom_killed = bool(state.get("OOMKilled"))
        if not delivered and not oom_killed:
            # It had died before its harness read the candidate (engine restart, external
            # cleanup). One that died later is the candidate's failure: never retried.
            raise SandboxInfraError("container_gone", f"container {cid[:12]} was not running")
    return RunOutcome(
        report=report,
        exit_code=exit_code,
        host_timed_out=killed.is_set() and not exceeded,
        host_output_exceeded=exceeded,
        wall_s=wall,
        raw_stderr=streams[2].decode("utf-8", errors="replace")[-4000:],
        container_id=cid,
        extra={"oom_killed": oom_killed},
    )


def infra_error(reason: str, exc: BaseException) -> SandboxInfraError:
    return SandboxInfraError(reason, f"{reason}: {type(exc).__name__}: {exc}")
