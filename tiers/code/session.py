"""Isolation "process": one warm container serves one job's candidates, one after another.

A job is one verify_batch call: one request's items for one principal. The host takes a warm
container from the pool, opens its judge's stdin with SERVE_HELLO and then sends one spec after
another (4-byte length + JSON); the judge starts each candidate in a fresh process under the
candidate's uid, with its own limits and an empty work dir, and answers with one report line on
stdout; between candidates it kills every process but itself and removes whatever the
candidate's uid left (tiers/code/harness/serve.py). The container is never given to another
job: when the job ends its stdin is closed, the judge exits, and the container is removed.

A candidate the container could not take (it had died before the judge read the spec) moves
on to a fresh container; one that the host had to kill (deadline, output) takes its container
with it, and the job's next candidate gets a fresh one.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any

from tiers.code.attach import (
    DELIVERED_MARK,
    HOST_GRACE_S,
    RunOutcome,
    SandboxInfraError,
    infra_error,
)
from tiers.code.pool import SandboxPool

logger = logging.getLogger(__name__)

SERVE_HELLO = b"vs:serve\n"  # tiers/code/harness/runner.py SERVE_HELLO
# How long a closed job's judge may take to exit before its container is killed instead.
CLOSE_WAIT_S = 2.0


class _NotDelivered(Exception):
    """The container ended before its judge read the spec: the candidate may go elsewhere."""


class JobContainer:
    """The container (or, after a kill, the containers) serving one job's candidates in turn.

    Not thread-safe: one candidate at a time, as the judge in the container serves them.
    """

    def __init__(self, pool: SandboxPool, memory_mb: int) -> None:
        self.pool = pool
        self.memory_mb = memory_mb
        self.container_ids: list[str] = []
        self._cid: str | None = None
        self._sock_io: Any = None
        self._sock: socket.socket | None = None
        self._pending = bytearray()
        self._streams = {1: bytearray(), 2: bytearray()}
        self._closed = False
        pool.begin_job()

    # -- the container -------------------------------------------------------------------------

    def _open(self) -> None:
        import docker.errors

        cid = self.pool.acquire()
        self._cid = cid
        self.container_ids.append(cid)
        self._pending.clear()
        self._streams = {1: bytearray(), 2: bytearray()}
        api = self.pool.client.api
        try:
            if self.memory_mb != self.pool.settings.default_memory_mb:
                mem = f"{self.memory_mb}m"
                api.update_container(cid, mem_limit=mem, memswap_limit=mem)
            self._sock_io = api.attach_socket(
                cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        except docker.errors.NotFound as exc:
            self._drop(ended=False)
            raise _NotDelivered(str(exc)) from exc
        except docker.errors.APIError as exc:
            self._drop(ended=False)
            if "is not running" in str(exc) or exc.status_code == 409:
                raise _NotDelivered(str(exc)) from exc
            raise infra_error("attach_failed", exc) from exc
        except Exception as exc:
            self._drop(ended=False)
            raise infra_error("engine_unavailable", exc) from exc
        self._sock = getattr(self._sock_io, "_sock", self._sock_io)
        try:
            self._sock.sendall(SERVE_HELLO)
        except OSError as exc:
            self._drop(ended=False)
            raise _NotDelivered(str(exc)) from exc

    def _drop(self, ended: bool) -> None:
        """Let go of the current container: removed when quiet if its judge exited on its own,
        else killed and removed now."""
        cid, self._cid = self._cid, None
        if self._sock_io is not None:
            try:
                self._sock_io.close()
            except OSError:
                pass
        self._sock_io = self._sock = None
        if cid is not None:
            self.pool.release(cid, ended)

    def close(self) -> None:
        """End the job: the judge reads the end of its stdin, kills what is left and exits."""
        if self._closed:
            return
        self._closed = True
        try:
            self._close_container()
        finally:
            self.pool.end_job()

    def _close_container(self) -> None:
        if self._cid is None or self._sock is None:
            return
        ended = False
        try:
            self._sock.shutdown(socket.SHUT_WR)
            self._sock.settimeout(CLOSE_WAIT_S)
            while self._sock.recv(65536):
                pass
            ended = True
        except OSError:
            ended = False
        self._drop(ended)

    # -- one candidate -------------------------------------------------------------------------

    def run(self, spec: dict[str, Any], timeout_s: float) -> RunOutcome:
        """Judge one spec in the job's container; a fresh container first if it has none."""
        attempts = self.pool.settings.pool_size + 2
        for attempt in range(1, attempts + 1):
            try:
                if self._cid is None:
                    self._open()
                return self._exchange(spec, timeout_s)
            except _NotDelivered as exc:
                self._drop(ended=False)
                if attempt == attempts:
                    raise SandboxInfraError("container_gone", str(exc)) from exc
        raise AssertionError("unreachable")

    def _exchange(self, spec: dict[str, Any], timeout_s: float) -> RunOutcome:
        assert self._sock is not None
        assert self._cid is not None
        cid, sock, api = self._cid, self._sock, self.pool.client.api
        host_limit = 4 * self.pool.settings.output_cap_bytes + 8 * 1024 * 1024
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                api.kill(cid)
            except Exception:
                logger.debug("kill of %s after its deadline failed", cid[:12], exc_info=True)

        data = json.dumps(spec).encode()
        budget = timeout_s * (2 if spec.get("setup") else 1) + HOST_GRACE_S
        watchdog = threading.Timer(budget, kill)
        out, err = self._streams[1], self._streams[2]
        out.clear()
        err.clear()
        eof = exceeded = False
        received = 0
        started = time.perf_counter()
        try:
            watchdog.start()
            sock.sendall(len(data).to_bytes(4, "big") + data)
            while b"\n" not in out:
                chunk = sock.recv(65536)
                if not chunk:
                    eof = True
                    break
                received += len(chunk)
                self._unframe(chunk, host_limit)
                if received > host_limit + 64 * 1024:
                    exceeded = True
                    kill()
                    break
        except OSError as exc:
            eof = True
            if not killed.is_set():
                self._drop(ended=False)
                raise infra_error("engine_unavailable", exc) from exc
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - started
        delivered = err.startswith(DELIVERED_MARK)
        if delivered:
            del err[: len(DELIVERED_MARK)]
        report: dict[str, Any] | None = None
        line, _, _ = bytes(out).partition(b"\n")
        if not killed.is_set() and not eof:
            try:
                parsed = json.loads(line)
                report = parsed if isinstance(parsed, dict) else None
            except ValueError:
                report = None
        exit_code: int | None = 0
        oom_killed = False
        if report is None:
            if not killed.is_set():
                try:
                    state = api.inspect_container(cid)["State"]
                except Exception as exc:
                    self._drop(ended=False)
                    raise infra_error("engine_unavailable", exc) from exc
                exit_code = state.get("ExitCode")
                oom_killed = bool(state.get("OOMKilled"))
                if not delivered and not oom_killed:
                    raise _NotDelivered(f"container {cid[:12]} was not running")
            self._drop(ended=False)
        outcome = RunOutcome(
            report=report,
            exit_code=exit_code,
            host_timed_out=killed.is_set() and not exceeded,
            host_output_exceeded=exceeded,
            wall_s=wall,
            raw_stderr=err.decode("utf-8", errors="replace")[-4000:],
            container_id=cid,
            extra={"oom_killed": oom_killed, "isolation": "process"},
        )
        if report is not None and b"vs:unclean" in err:
            self._drop(ended=False)  # the judge could not clean up: it serves no one else
        return outcome

    def _unframe(self, chunk: bytes, host_limit: int) -> None:
        """Split the attach stream (8-byte header: stream id, 3 zero bytes, length)."""
        pending = self._pending
        pending += chunk
        while len(pending) >= 8:
            size = int.from_bytes(pending[4:8], "big")
            if len(pending) < 8 + size:
                break
            kind = pending[0]
            if kind in self._streams and len(self._streams[kind]) < host_limit:
                self._streams[kind] += pending[8 : 8 + size]
            del pending[: 8 + size]
