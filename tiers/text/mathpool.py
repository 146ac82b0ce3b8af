"""A small pool of math comparison subprocesses, each call bounded in time and memory.

sympy can run for hours or take all memory on an answer such as `10^{10^{10^{10}}}` or
`99999999!`. A SIGALRM timeout works only in a process's main thread, which the API's inline
lane (a thread pool) is not, and a Celery prefork child must not be stalled either: so every
comparison runs in a child process (tiers.text.math_child) started with an address-space cap,
and the caller waits for its answer with a deadline. A child that misses it is killed (its whole
process group) and replaced on a later call; the caller gets a `timeout` outcome at once.

Children are started on first use and kept (importing sympy costs about a second); one process
keeps at most `size` of them, one per concurrent caller. A pool made before a fork (a Celery
prefork parent) is not used by the forked children: each process gets its own.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

OutcomeKind = Literal["ok", "timeout", "memory", "recursion", "crashed", "internal", "unavailable"]


@dataclass(frozen=True)
class MathOutcome:
    """What one bounded comparison came to."""

    kind: OutcomeKind
    parsed: bool = False
    equal: bool = False
    index: int = -1
    shown: str = ""
    message: str = ""
    wall_s: float = 0.0


class _Child:
    """One comparison subprocess and its pipes."""

    def __init__(self, memory_mb: int, start_timeout_s: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tiers.text.math_child", "--memory-mb", str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: killed whole, never by our signals
            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"},
        )
        self._buffer = b""
        ready = self._read_line(time.monotonic() + start_timeout_s)
        if ready is None or not json.loads(ready).get("ready"):
            self.kill()
            raise RuntimeError(
                "the math comparison subprocess did not start "
                "(is math-verify installed? pip install math-verify)"
            )

    def _read_line(self, deadline: float) -> bytes | None:
        """One line from the child, or None at the deadline or when it exits."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The child's reply, or None if it missed the deadline or died (it is then dead)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return None
        line = self._read_line(time.monotonic() + timeout_s)
        if line is None:
            self.kill()
            return None
        reply: dict[str, Any] = json.loads(line)
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.proc.wait()


class MathPool:
    """Bounded math comparisons in kept subprocesses (see the module's docstring)."""

    def __init__(self, *, size: int, memory_mb: int, start_timeout_s: float) -> None:
        self.size = size
        self.memory_mb = memory_mb
        self.start_timeout_s = start_timeout_s
        self._idle: list[_Child] = []
        self._busy = 0
        self._cond = threading.Condition()
        self._pid = os.getpid()
        self.restarts = 0  # children killed or lost so far (for tests and the bench)

    def _take(self) -> _Child | None:
        """An idle child, or None when the caller may start one; waits while all are busy."""
        with self._cond:
            while True:
                while self._idle:
                    child = self._idle.pop()
                    if child.alive():
                        self._busy += 1
                        return child
                    child.kill()  # it exited (after a MemoryError): reap it, close its pipes
                if self._busy < self.size:
                    self._busy += 1
                    return None
                self._cond.wait()

    def _give_back(self, child: _Child | None) -> None:
        with self._cond:
            self._busy -= 1
            if child is not None and child.alive():
                self._idle.append(child)
            self._cond.notify()

    def compare(self, answer: str, references: list[str], timeout_s: float) -> MathOutcome:
        """Is `answer` equivalent to one of `references`? Never waits much past `timeout_s`
        (plus a child's start-up when none is idle) and never raises for a bad answer."""
        start = time.monotonic()
        child = self._take()
        if child is None:
            try:
                child = _Child(self.memory_mb, self.start_timeout_s)
            except (RuntimeError, OSError) as exc:
                self._give_back(None)
                return MathOutcome("unavailable", message=str(exc))
        begun = time.monotonic()
        try:
            # The child's own CPU cap outlasts the deadline: it only ends a child orphaned
            # mid-request (its caller killed), which no one is left to kill at the deadline.
            request = {"answer": answer, "references": references, "cpu_limit_s": 2 * timeout_s}
            reply = child.ask(request, timeout_s)
        except Exception:
            child.kill()
            self._give_back(None)
            raise
        wall = time.monotonic() - begun
        if reply is None or reply.get("error") == "memory":
            # The child is gone: its slot gets a fresh one in the background, so that neither
            # this caller nor the next waits for sympy's import (about a second).
            threading.Thread(target=self._replace, daemon=True).start()
        else:
            self._give_back(child)
        if reply is None:
            self.restarts += 1
            timed_out = wall >= timeout_s * 0.99
            return MathOutcome(
                "timeout" if timed_out else "crashed",
                message=f"no answer within {timeout_s:g} s" if timed_out else "the child died",
                wall_s=time.monotonic() - start,
            )
        if "error" in reply:
            if reply["error"] == "memory":
                self.restarts += 1
                child.kill()
            return MathOutcome(reply["error"], message=str(reply.get("message", "")), wall_s=wall)
        return MathOutcome(
            "ok",
            parsed=bool(reply["parsed"]),
            equal=bool(reply["equal"]),
            index=int(reply["index"]),
            shown=str(reply["shown"]),
            wall_s=wall,
        )

    def _replace(self) -> None:
        """Start a child for a slot whose child died, and hand the slot back."""
        child = None
        try:
            child = _Child(self.memory_mb, self.start_timeout_s)
        except (RuntimeError, OSError):
            child = None  # the next caller of this slot tries again, and reports it
        finally:
            self._give_back(child)

    def warm(self) -> None:
        """Start one child now (it imports sympy), so the first comparison is not the slow one."""
        child = self._take()
        try:
            if child is None:
                child = _Child(self.memory_mb, self.start_timeout_s)
        finally:
            self._give_back(child)

    def close(self) -> None:
        with self._cond:
            children, self._idle = self._idle, []
        for child in children:
            child.kill()

    @property
    def owner_pid(self) -> int:
        return self._pid


_pools: dict[tuple[int, int, float], MathPool] = {}
_pools_lock = threading.Lock()


def pool_for(size: int, memory_mb: int, start_timeout_s: float) -> MathPool:
    """This process's pool for these limits (a pool inherited through fork is left alone)."""
    key = (size, memory_mb, start_timeout_s)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or pool.owner_pid != os.getpid():
            pool = _pools[key] = MathPool(
                size=size, memory_mb=memory_mb, start_timeout_s=start_timeout_s
            )
        return pool


@atexit.register
def _close_all() -> None:
    for pool in list(_pools.values()):
        if pool.owner_pid == os.getpid():
            pool.close()
