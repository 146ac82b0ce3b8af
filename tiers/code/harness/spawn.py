"""The judge's helpers that start candidates' processes and end them (runner.py runs this text
in a namespace of its own, with the names below put in).

A candidate's process is made before its spec is read, so its memory never held a test:
- from the zygote (zygote.py) when there is one: a clean interpreter the judge started at
  container start, before it read anything, that only forks. A fork costs about a millisecond
  where a fresh interpreter costs tens, and the candidate's modules are already imported.
- else by fork and exec of a fresh interpreter running candidate.py (the zygote could not be
  started, or it died, e.g. picked by the kernel's OOM killer).
Either way the process runs under CANDIDATE_UID in its own session with fds 0 (/dev/null),
1 and 2 (its stdout and stderr pipes), 3 (requests) and 4 (answers), and no other.

Ending them: "kill every process but the judge" is kill(-1) (which spares PID 1 and the
caller) sent by the zygote, which must outlive every candidate; without a zygote, by the judge.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Put in this namespace by the runner (runner.py, _spawn).
CANDIDATE_STUB: str = globals()["CANDIDATE_STUB"]
ZYGOTE_PROGRAM: str = globals()["ZYGOTE_PROGRAM"]
WORK: str = globals()["WORK"]
CANDIDATE_UID: int = globals()["CANDIDATE_UID"]
CANDIDATE_ENV: dict[str, str] = globals()["CANDIDATE_ENV"]

PYTHON_FLAGS = ["-I", "-u", "-B", "-c"]
_zygote: dict[str, Any] = {"pid": None, "sock": None}


def zygote_pid() -> int | None:
    pid: int | None = _zygote["pid"]
    return pid


def _drop_to_candidate_uid() -> None:
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(CANDIDATE_UID, CANDIDATE_UID, CANDIDATE_UID)
        os.setresuid(CANDIDATE_UID, CANDIDATE_UID, CANDIDATE_UID)


def start_zygote() -> None:
    """Start the zygote (before anything is read from the host); without one, fork and exec."""
    import _socket

    try:
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        program = ZYGOTE_PROGRAM.replace(
            'CANDIDATE_PROGRAM = ""', f"CANDIDATE_PROGRAM = {CANDIDATE_STUB!r}", 1
        )
        pid = os.fork()
    except OSError:
        return
    if pid == 0:
        try:
            os.setsid()
            os.dup2(theirs.fileno(), 3)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(4, 4096)
            argv = [sys.executable, *PYTHON_FLAGS, program]
            os.execve(sys.executable, argv, dict(CANDIDATE_ENV))  # the candidates' own
        finally:
            os._exit(126)
    theirs.close()
    _zygote.update(pid=pid, sock=ours)


def preload() -> None:
    """Serving a job: the zygote imports what candidates commonly import, once."""
    sock = _zygote["sock"]
    if sock is not None:
        try:
            sock.sendall(b"p")
        except OSError:
            _lose_zygote()


def _lose_zygote() -> None:
    sock, pid = _zygote["sock"], _zygote["pid"]
    _zygote.update(pid=None, sock=None)
    if sock is not None:
        sock.close()
    if pid is not None:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass


def _from_zygote(fds: list[int]) -> int | None:
    """The pid of a candidate forked by the zygote with `fds`, or None (then fork and exec)."""
    import _socket

    sock = _zygote["sock"]
    if sock is None:
        return None
    rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
    answer = b""
    try:
        sock.sendmsg([b"f"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
        while len(answer) < 5:
            chunk = sock.recv(5 - len(answer))
            if not chunk:
                break
            answer += chunk
    except OSError:
        pass
    if len(answer) < 5 or answer[4:] != b"k":
        _lose_zygote()
        _kill_stray(answer)
        return None
    return int.from_bytes(answer[:4], "big")


def _kill_stray(answer: bytes) -> None:
    """The zygote died (the OOM killer's pick) after its middle process had forked the
    candidate's process and sent its pid, before the zygote's b"k". That process holds the
    same pipes as the one the judge makes in its place and would race it for the job: kill it
    before anything is written to them. (It is PID 1's child once the middle exits; the judge
    reaps it.)"""
    pid = int.from_bytes(answer[:4], "big") if len(answer) >= 4 else 0
    if pid > 0:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _high_dup(fd: int) -> int:
    return int(__import__("fcntl").fcntl(fd, 1030, 100))  # F_DUPFD_CLOEXEC above 100


def _fork_exec(fds: list[int]) -> int:
    """The candidate's process as a fresh interpreter running candidate.py (no zygote)."""
    import resource

    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        keep = [_high_dup(fd) for fd in fds]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for target, fd in zip((3, 4, 1, 2), keep, strict=True):
            os.dup2(fd, target)
        os.closerange(5, 4096)
        try:
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("1000")  # the candidate, not the judge, is what the kernel should pick
        except OSError:
            pass
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _drop_to_candidate_uid()
        os.chdir(WORK)
        argv = [sys.executable, *PYTHON_FLAGS, CANDIDATE_STUB]
        os.execve(sys.executable, argv, dict(CANDIDATE_ENV))
    finally:
        os._exit(126)


def start_candidate() -> tuple[int, int, int, int, int, int, int]:
    """The next candidate's process, waiting for its job on fd 3. Returns (pid, req_w, resp_r,
    out_r, err_r, out_w, err_w); the judge keeps out_w/err_w for the test runner."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd in (req_w, resp_r, out_r, err_r, out_w, err_w):
        os.set_inheritable(fd, False)
    theirs = [req_r, resp_w, out_w, err_w]
    pid = _from_zygote(theirs)
    if pid is None:
        pid = _fork_exec(theirs)
    os.close(req_r)
    os.close(resp_w)
    return pid, req_w, resp_r, out_r, err_r, out_w, err_w


def kill_all_but_judge() -> None:
    """SIGKILL every process in the container but the judge (and the zygote, while there is
    one): kill(-1), which spares PID 1 and its caller, sent by the zygote or else by us."""
    sock = _zygote["sock"]
    if sock is not None:
        try:
            sock.sendall(b"x")
            if sock.recv(1) == b"k":
                return
        except OSError:
            pass
        _lose_zygote()
    for _ in range(3):
        try:
            os.kill(-1, 9)  # as PID 1 with CAP_KILL: every other process in the container
        except OSError:
            return


def spared() -> set[int]:
    """The processes that stay between candidates: the judge and the zygote."""
    zygote = _zygote["pid"]
    return {os.getpid()} | ({zygote} if zygote is not None else set())
