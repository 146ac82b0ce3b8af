"""A pool of pre-started, locked-down sandbox containers; each runs one candidate, then dies.

A `docker run` costs about 0.2 s, an exec into a running container about 0.06 s. The pool keeps
`pool_size` containers started ahead in background threads, each with the harness already running
as its PID 1 and waiting for a spec on stdin, so a candidate pays only for an attach (no exec, no
interpreter start-up). A container never serves two candidates: when the harness exits the
kernel kills whatever the candidate left running, the container is removed, and a fresh one
takes its place.

Trainers send candidates in bursts (one GRPO step, then seconds of generation). Starting and
removing containers costs the engine more CPU than running a candidate, so the pool does that
engine work when no candidate is in flight: a burst no larger than the pool runs on warm
containers only, and the pool refills (and removes the used ones) in the quiet that follows. A
candidate left without a warm container gets one started for it at once, so a burst larger than
the pool goes on at the sustained rate instead of stalling.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from verifier_service.settings import SandboxSettings, get_settings

logger = logging.getLogger(__name__)

LABEL = "verifier-service.sandbox"
OWNER_LABEL = "verifier-service.sandbox.owner"
SANDBOX_USER = "1000:1000"
# Extra wall-clock the host allows past the candidate's own limit before it kills the
# container: harness start-up, writing files, reporting.
HOST_GRACE_S = 3.0
# Taken by runtime "auto" when the engine has it: a C runtime, it starts and deletes a
# container with less CPU than runc (Go), which is what bounds throughput on a small machine.
PREFERRED_RUNTIME = "crun"
# Used containers have exited (their harness, PID 1, is gone) and hold only engine records; under
# load that never pauses they are removed anyway once this many wait.
USED_BACKLOG_MAX = 64


def isolation_options(s: SandboxSettings, runtime: str) -> dict[str, Any]:
    """The locked-down host config of every sandbox container (docker-py create_host_config)."""
    uid, _, gid = SANDBOX_USER.partition(":")
    return {
        "runtime": runtime,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {"/work": f"size={s.tmpfs_mb}m,uid={uid},gid={gid},mode=0700"},
        "mem_limit": f"{s.default_memory_mb}m",
        "memswap_limit": f"{s.default_memory_mb}m",
        "pids_limit": s.pids_limit,
        "nano_cpus": int(s.cpus * 1e9),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ipc_mode": "private",
        "shm_size": f"{min(s.tmpfs_mb, 16)}m",
        "ulimits": [{"Name": "core", "Soft": 0, "Hard": 0}],
    }


class SandboxUnavailableError(RuntimeError):
    """The Docker engine or the sandbox image is not usable; the message says how to fix it."""


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


def _runner_source() -> str:
    return resources.files("tiers.code").joinpath("_runner.py").read_text()


def _process_start_time(pid: int) -> str:
    """Start time of `pid` in clock ticks since boot ("" if unknown): tells reused pids apart."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :].split()[19]


def _owner_tag() -> str:
    """host:pid:start-time:pool-id; the pool id tells apart two pools of one process."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start_time(pid)}:{uuid.uuid4().hex[:8]}"


def _owner_is_gone(owner: str) -> bool:
    """Whether the process that labelled a container as `owner` no longer runs on this host."""
    host, pid_text, start, *_ = [*owner.split(":"), "", "", ""]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's worker: not ours to judge
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return bool(start) and _process_start_time(pid) != start


def make_client(settings: SandboxSettings) -> Any:
    """A Docker client for the configured engine (raises docker.errors.DockerException)."""
    import docker

    # Reads of a running exec's output may be quiet for the whole candidate time limit.
    timeout = int(max(60.0, 2 * settings.max_timeout_s + 30))
    pool_size = 2 * (settings.pool_size + settings.concurrency) + 8
    if settings.docker_url:
        return docker.DockerClient(
            base_url=settings.docker_url, timeout=timeout, max_pool_size=pool_size
        )
    return docker.from_env(timeout=timeout, max_pool_size=pool_size)


def check_engine(settings: SandboxSettings, client: Any | None = None) -> Any:
    """Return a client after checking the engine answers and the image exists."""
    import docker.errors

    where = _where(settings)
    try:
        client = client or make_client(settings)
        client.ping()
    except Exception as exc:  # the SDK raises many kinds (DockerException, requests errors)
        raise SandboxUnavailableError(
            f"Docker engine not reachable at {where}: {exc}. Start it (e.g. "
            "`bash .ci/install-docker.sh`) or set VERIFIER_SANDBOX__DOCKER_URL."
        ) from exc
    try:
        client.images.get(settings.image)
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailableError(
            f"sandbox image {settings.image!r} is missing from the Docker engine at {where}; "
            "build it with `verifier-service sandbox build-image` (or build "
            "docker/sandbox.Dockerfile and set VERIFIER_SANDBOX__IMAGE)."
        ) from exc
    except docker.errors.DockerException as exc:
        raise SandboxUnavailableError(f"cannot inspect image {settings.image!r}: {exc}") from exc
    return client


def _where(settings: SandboxSettings) -> str:
    return settings.docker_url or "the default socket (DOCKER_HOST or /var/run/docker.sock)"


def _probe_runtime(settings: SandboxSettings, client: Any, runtime: str) -> str | None:
    """Run `true` in a locked-down container under `runtime`; None if it worked, else why not."""
    api = client.api
    cid: str | None = None
    try:
        host_config = api.create_host_config(
            **isolation_options(settings, runtime), log_config={"Type": "none", "Config": {}}
        )
        cid = api.create_container(
            settings.image,
            command=["true"],
            user=SANDBOX_USER,
            network_disabled=True,
            labels={LABEL: "1", OWNER_LABEL: _owner_tag()},
            host_config=host_config,
        )["Id"]
        api.start(cid)
        status = api.wait(cid, timeout=30).get("StatusCode")
        return None if status == 0 else f"the probe container exited with status {status}"
    except Exception as exc:  # engine errors come as many kinds; each is a reason here
        return f"{type(exc).__name__}: {exc}"
    finally:
        if cid is not None:
            try:
                api.remove_container(cid, force=True)
            except Exception:
                logger.warning("could not remove runtime probe container %s", cid[:12])


def resolve_runtime(settings: SandboxSettings, client: Any) -> str:
    """The OCI runtime sandbox containers run under (settings.runtime checked on the engine).

    `auto` takes crun when the engine has it and a locked-down container runs under it, else
    the engine's default runtime. A named runtime must be registered with the engine and run
    the probe container, or this raises SandboxUnavailableError saying how to fix it.
    """
    try:
        info = client.info()
    except Exception as exc:
        raise SandboxUnavailableError(
            f"cannot ask the Docker engine at {_where(settings)} for its runtimes: {exc}"
        ) from exc
    registered = sorted(info.get("Runtimes") or {})
    default = str(info.get("DefaultRuntime") or "runc")
    wanted = settings.runtime
    if wanted == "auto":
        if PREFERRED_RUNTIME in registered and PREFERRED_RUNTIME != default:
            problem = _probe_runtime(settings, client, PREFERRED_RUNTIME)
            if problem is None:
                return PREFERRED_RUNTIME
            logger.warning(
                "sandbox runtime auto: the engine has %s but it cannot run a sandbox container "
                "(%s); using the engine's default runtime %s",
                PREFERRED_RUNTIME,
                problem,
                default,
            )
        return default
    if wanted not in registered:
        raise SandboxUnavailableError(
            f"OCI runtime {wanted!r} (sandbox.runtime) is not registered with the Docker engine "
            f"at {_where(settings)}; it has: {', '.join(registered) or 'none'}. Register it in "
            "the engine's daemon.json `runtimes` (`bash .ci/install-docker.sh` does so for "
            "crun) or set VERIFIER_SANDBOX__RUNTIME=auto."
        )
    problem = _probe_runtime(settings, client, wanted)
    if problem is not None:
        raise SandboxUnavailableError(
            f"OCI runtime {wanted!r} (sandbox.runtime) cannot run a sandbox container on the "
            f"Docker engine at {_where(settings)}: {problem}. Fix the runtime's setup or set "
            "VERIFIER_SANDBOX__RUNTIME=auto."
        )
    return wanted


def remove_stale_containers(client: Any) -> int:
    """Remove labelled containers whose owning process on this host has died; return count."""
    removed = 0
    for info in client.api.containers(all=True, filters={"label": LABEL}):
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        if _owner_is_gone(owner):
            try:
                client.api.remove_container(info["Id"], force=True)
                removed += 1
            except Exception:
                logger.warning("could not remove stale sandbox container %s", info["Id"][:12])
    if removed:
        logger.info("removed %d stale sandbox containers", removed)
    return removed


class SandboxPool:
    """Pre-started single-use containers, refilled in the background."""

    def __init__(self, settings: SandboxSettings, client: Any | None = None) -> None:
        self.settings = settings
        self.client = check_engine(settings, client)
        self.runtime = resolve_runtime(settings, self.client)
        self.pid = os.getpid()
        self.owner = _owner_tag()
        self._runner = _runner_source()
        # All state below is guarded by _cond; fill and remove threads wait on it.
        self._cond = threading.Condition()
        self._ready: deque[str] = deque()  # started, harness waiting: serve one candidate each
        self._used: deque[str] = deque()  # served a candidate and exited: removed when quiet
        self._urgent: deque[str] = deque()  # may still run something: removed at once
        self._owned: set[str] = set()
        self._handed: set[str] = set()  # given to a candidate, not yet removed
        self._in_flight = 0  # candidates inside run()
        self._waiting = 0  # of those, waiting in acquire() with no warm container
        self._creating = 0
        self._closed = False
        self._last_error: Exception | None = None
        self._threads = [
            threading.Thread(target=self._fill_loop, name=f"sandbox-fill-{i}", daemon=True)
            for i in range(max(1, min(settings.pool_size, 4)))
        ]
        self._threads.append(
            threading.Thread(target=self._remove_loop, name="sandbox-remove", daemon=True)
        )
        remove_stale_containers(self.client)
        for thread in self._threads:
            thread.start()

    # -- containers --------------------------------------------------------------------------

    def _create(self) -> str:
        s = self.settings
        api = self.client.api
        # Output comes back over the attach, so the engine keeps no log of it.
        host_config = api.create_host_config(
            **isolation_options(s, self.runtime), log_config={"Type": "none", "Config": {}}
        )
        # The harness is the container's PID 1, started now and waiting for its spec on stdin:
        # a candidate then costs an attach instead of an exec plus an interpreter start-up.
        created = api.create_container(
            s.image,
            command=["python3", "-I", "-c", self._runner],
            stdin_open=True,
            user=SANDBOX_USER,
            working_dir="/work",
            network_disabled=True,
            labels={LABEL: "1", OWNER_LABEL: self.owner},
            host_config=host_config,
            environment={"HOME": "/work", "LANG": "C.UTF-8"},
        )
        cid: str = created["Id"]
        with self._cond:
            self._owned.add(cid)
        try:
            api.start(cid)
        except Exception:
            self.destroy(cid)
            raise
        return cid

    def destroy(self, cid: str) -> None:
        """Queue a container for forced removal now (kills everything in it)."""
        with self._cond:
            self._urgent.append(cid)
            self._cond.notify_all()

    def _retire(self, cid: str) -> None:
        """Queue a container whose harness has exited for removal when no candidate runs."""
        with self._cond:
            self._used.append(cid)
            self._cond.notify_all()

    def _remove_now(self, cid: str) -> None:
        try:
            self.client.api.remove_container(cid, force=True)
        except Exception as exc:
            if "No such container" not in str(exc) and "already in progress" not in str(exc):
                logger.warning("could not remove sandbox container %s: %s", cid[:12], exc)
                return
        with self._cond:
            self._owned.discard(cid)
            self._handed.discard(cid)
            self._cond.notify_all()

    # The scheduling rules, read with _cond held. Engine work (create, start, remove) takes the
    # same CPU the candidates need, so while any candidate is in flight a container is started
    # only for a candidate with no warm one left, and removed only if it may still run something
    # (killed on a deadline) or too many used ones wait.

    def _should_create(self) -> bool:
        if self._in_flight == 0:
            return len(self._ready) + self._creating < self.settings.pool_size
        return len(self._ready) + self._creating < self._waiting

    def _next_removal(self) -> str | None:
        if self._urgent:
            return self._urgent.popleft()
        if self._used and (
            self._in_flight == 0 or self._closed or len(self._used) > USED_BACKLOG_MAX
        ):
            return self._used.popleft()
        return None

    def _remove_loop(self) -> None:
        while True:
            with self._cond:
                while (cid := self._next_removal()) is None:
                    if self._closed:
                        return
                    self._cond.wait()
            self._remove_now(cid)

    def _fill_loop(self) -> None:
        backoff = 0.5
        while True:
            with self._cond:
                while not self._closed and not self._should_create():
                    self._cond.wait()
                if self._closed:
                    return
                self._creating += 1
            cid: str | None = None
            try:
                cid = self._create()
            except Exception as exc:
                self._last_error = exc
                logger.warning("could not start a sandbox container: %s", exc)
            finally:
                with self._cond:
                    self._creating -= 1
                    if cid is not None:
                        self._last_error = None
                        self._ready.append(cid)
                    self._cond.notify_all()
            if cid is None:
                time.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
            else:
                backoff = 0.5

    def acquire(self) -> str:
        """A fresh started container: a warm one, else one a fill thread starts for this
        candidate, else (none in acquire_timeout_s, or starting them fails) one started here."""
        deadline = time.monotonic() + self.settings.acquire_timeout_s
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                while not self._ready and not self._closed and self._last_error is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._closed:
                    raise SandboxInfraError("pool_closed", "the sandbox pool has been shut down")
                if self._ready:
                    cid = self._ready.popleft()
                    self._handed.add(cid)
                    return cid
            finally:
                self._waiting -= 1
        try:
            cid = self._create()
        except Exception as exc:
            raise _infra_error("container_start_failed", exc) from exc
        with self._cond:
            self._handed.add(cid)
        return cid

    # -- running -----------------------------------------------------------------------------

    def run(self, spec: dict[str, Any], timeout_s: float, memory_mb: int) -> RunOutcome:
        """Run the harness with `spec` in a fresh container, then destroy the container.

        Moves on to another container when the engine says a warm one died while it waited
        (engine restart, external cleanup): at most every warm one plus one started on the spot.
        """
        with self._cond:
            if self._closed:
                raise SandboxInfraError("pool_closed", "the sandbox pool has been shut down")
            self._in_flight += 1
        try:
            attempts = self.settings.pool_size + 2
            for attempt in range(1, attempts + 1):
                cid = self.acquire()
                outcome: RunOutcome | None = None
                try:
                    outcome = self._run_in(cid, spec, timeout_s, memory_mb)
                    return outcome
                except SandboxInfraError as exc:
                    if attempt == attempts or exc.reason != "container_gone":
                        raise
                finally:
                    # Only a harness that ended on its own is known to have taken every process
                    # of the container with it; any other container is killed and removed now.
                    ended = outcome is not None and not (
                        outcome.host_timed_out or outcome.host_output_exceeded
                    )
                    (self._retire if ended else self.destroy)(cid)
            raise AssertionError("unreachable")
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def _run_in(
        self, cid: str, spec: dict[str, Any], timeout_s: float, memory_mb: int
    ) -> RunOutcome:
        import docker.errors

        api = self.client.api
        s = self.settings
        if memory_mb != s.default_memory_mb:
            try:
                api.update_container(cid, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m")
            except docker.errors.DockerException as exc:
                raise _infra_error("container_update_failed", exc) from exc
        payload = json.dumps(spec).encode()
        try:
            sock_io = api.attach_socket(
                cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
        except docker.errors.NotFound as exc:
            raise SandboxInfraError("container_gone", str(exc)) from exc
        except docker.errors.APIError as exc:
            if "is not running" in str(exc) or exc.status_code == 409:
                raise SandboxInfraError("container_gone", str(exc)) from exc
            raise _infra_error("attach_failed", exc) from exc
        except Exception as exc:
            raise _infra_error("engine_unavailable", exc) from exc
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
                raise _infra_error("engine_unavailable", exc) from exc
        finally:
            watchdog.cancel()
            sock_io.close()
        wall = time.perf_counter() - started
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
                raise _infra_error("engine_unavailable", exc) from exc
            exit_code = state.get("ExitCode")
            oom_killed = bool(state.get("OOMKilled"))
            if received == 0 and not oom_killed:
                # It had died before we attached (engine restart, external cleanup).
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

    # -- lifecycle ---------------------------------------------------------------------------

    def owned(self) -> set[str]:
        """Ids of the containers this pool made that are not yet removed."""
        with self._cond:
            return set(self._owned)

    def ready_count(self) -> int:
        with self._cond:
            return len(self._ready)

    def wait_removed(self, timeout_s: float = 10.0) -> bool:
        """Wait until every container given to a candidate is gone; True if none is left."""
        return self._wait_for(lambda: not self._handed, timeout_s)

    def wait_full(self, timeout_s: float = 60.0) -> bool:
        """Wait until the pool holds `pool_size` warm containers and nothing else (no used one
        left to remove, none being started): the state a burst should find."""
        size = self.settings.pool_size
        return self._wait_for(
            lambda: len(self._ready) == len(self._owned) == size and not self._creating,
            timeout_s,
        )

    def _wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def shutdown(self) -> None:
        """Stop refilling and remove every container this pool made."""
        if self._closed:
            return
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)
        for cid in self.owned():
            self._remove_now(cid)
        # A container being created when we closed may have escaped `owned`; the label finds it.
        try:
            for info in self.client.api.containers(
                all=True, filters={"label": f"{OWNER_LABEL}={self.owner}"}
            ):
                self._remove_now(info["Id"])
        except Exception:
            logger.warning("could not list sandbox containers at shutdown", exc_info=True)


def _infra_error(reason: str, exc: BaseException) -> SandboxInfraError:
    return SandboxInfraError(reason, f"{reason}: {type(exc).__name__}: {exc}")


_pool: SandboxPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> SandboxPool:
    """The process's pool, created on first use (again in a forked child: threads don't fork)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = SandboxPool(get_settings().sandbox)
        return _pool


def shutdown_pool() -> None:
    """Remove every container of this process's pool (registered to run at exit)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None and pool.pid == os.getpid():
        pool.shutdown()


atexit.register(shutdown_pool)


def startup_check() -> str:
    """Fail fast at worker start-up: engine reachable, image present, the runtime runs a
    sandbox container; clear stale containers. Returns the runtime containers will use."""
    settings = get_settings().sandbox
    client = check_engine(settings)
    remove_stale_containers(client)
    return resolve_runtime(settings, client)
