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

This module is the scheduling only: the engine client and its checks are in tiers.code.engine,
the exchange with a container's harness in tiers.code.attach.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tiers.code.attach import RunOutcome, SandboxInfraError, infra_error, run_attached
from tiers.code.engine import (
    JUDGE_USER,
    LABEL,
    OWNER_LABEL,
    check_engine,
    isolation_options,
    owner_tag,
    remove_stale_containers,
    resolve_runtime,
)
from tiers.code.harness import harness_program
from tiers.code.settings import SandboxSettings
from tiers.registry import settings_for

logger = logging.getLogger(__name__)

# Used containers have exited (their harness, PID 1, is gone) and hold only engine records; under
# load that never pauses they are removed anyway once this many wait.
USED_BACKLOG_MAX = 64


class SandboxPool:
    """Pre-started single-use containers, refilled in the background."""

    def __init__(self, settings: SandboxSettings, client: Any | None = None) -> None:
        self.settings = settings
        self.client = check_engine(settings, client)
        self.runtime = resolve_runtime(settings, self.client)
        self.pid = os.getpid()
        self.owner = owner_tag()
        self._program = harness_program()
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
            command=["python3", "-I", "-c", self._program],
            stdin_open=True,
            user=JUDGE_USER,
            working_dir="/",
            # No network_disabled: network_mode "none" (isolation_options) already leaves only
            # a loopback, and without it the engine writes /etc/hosts, so `localhost` resolves
            # for a program serving itself on the loopback (SandboxFusion's isolation tests).
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
            raise infra_error("container_start_failed", exc) from exc
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
                    outcome = run_attached(
                        self.client.api, cid, spec, timeout_s, memory_mb, self.settings
                    )
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

    # -- jobs (isolation "process": tiers.code.session) ---------------------------------------

    def begin_job(self) -> None:
        """A job holds containers from now on: the pool defers its engine work as for run()."""
        with self._cond:
            if self._closed:
                raise SandboxInfraError("pool_closed", "the sandbox pool has been shut down")
            self._in_flight += 1

    def end_job(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def release(self, cid: str, ended: bool) -> None:
        """Give back a container a job took with acquire(): removed when quiet if its judge
        exited on its own, else killed and removed now. It never serves anything again."""
        (self._retire if ended else self.destroy)(cid)

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


_pool: SandboxPool | None = None
_pool_lock = threading.Lock()


def get_pool(settings: SandboxSettings | None = None) -> SandboxPool:
    """The process's pool, created on first use (again in a forked child: threads don't fork).

    Its settings are `settings`, else the code family's as handed to tiers.registry.configure
    (their defaults before that). Asked for with other settings than it has, the pool is
    replaced by one with those.
    """
    global _pool
    settings = settings or settings_for("code", SandboxSettings)
    with _pool_lock:
        if _pool is not None and _pool.pid == os.getpid() and _pool.settings != settings:
            _pool.shutdown()
            _pool = None
        if _pool is None or _pool.pid != os.getpid():
            _pool = SandboxPool(settings)
        return _pool


def shutdown_pool() -> None:
    """Remove every container of this process's pool (registered to run at exit)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None and pool.pid == os.getpid():
        pool.shutdown()


atexit.register(shutdown_pool)
