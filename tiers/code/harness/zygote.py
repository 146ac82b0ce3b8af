"""The zygote: a clean process that only forks candidates' processes (stdlib only).

The judge (runner.py, the container's PID 1) starts it once per container, before it has read
anything from the host: a fresh interpreter (`python3 -I -u -B -c`) as root, with the
candidates' environment, /dev/null on fds 0-2 and its control socket on fd 3 (spawn.py). It
defines the candidate's program (candidate.py, with its main not run), makes itself
non-dumpable, and then only waits for requests on the control socket:

- b"p": the judge serves a job of several candidates: import the stdlib modules candidate
  code commonly imports (PRELOAD), once here instead of once per candidate.
- b"x": SIGKILL every process but the judge and the zygote; answer b"k".
- b"f" with four fds (SCM_RIGHTS: the candidate's request pipe, answer pipe, stdout, stderr):
  fork a process that forks the candidate and exits, so the candidate becomes a child of the
  judge (which waits for it and kills it); answer the candidate's pid (4 bytes) and b"k", or
  4 zero bytes and b"e" when no process could be made.

The zygote never reads a spec, a test or anything a candidate wrote, and runs nothing of a
candidate's: every candidate is a copy of it made by fork, so what one candidate changes (its
modules, builtins, files it opened) dies with its process and the next one starts from the same
state. The candidate's copy drops to CANDIDATE_UID, its own session, rlimits and an empty work
dir before its main reads the job; the zygote stays root, which the candidate's uid can neither
signal nor trace, and non-dumpable, so its /proc entries (memory, fds) stay closed too.
"""

from __future__ import annotations

import _socket
import gc
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

WORK = "/work"  # runner.py WORK
CANDIDATE_UID = 1000  # runner.py CANDIDATE_UID
CONTROL_FD = 3
FDS_PER_CANDIDATE = 4
# candidate.py's text, put here by the judge when it starts the zygote (spawn.py).
CANDIDATE_PROGRAM = ""
# What candidate code commonly imports, imported here once per job when the judge asks (b"p"),
# not in a container that serves one candidate only. typing is most of it (HumanEval's prompts
# all import it: about 15 ms per candidate otherwise) and brings re, collections, functools
# and operator along; rarer and costlier ones (dataclasses, hashlib, decimal, ...) are left to
# the candidates that import them, as each job pays for the preload in its container.
PRELOAD = ("typing", "re", "math", "collections", "itertools", "functools", "heapq", "string",
           "bisect", "operator", "copy")  # fmt: skip


def _prctl_dumpable(value: int) -> None:
    """PR_SET_DUMPABLE: 0 closes our /proc entries to every process without CAP_SYS_PTRACE."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _preload() -> None:
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            continue


def _kill_all() -> None:
    """SIGKILL every process but PID 1 (the judge) and this one, at once (a fork bomb cannot
    outrun it): root with CAP_KILL may signal them all; kill(-1) spares init and the caller."""
    for _ in range(3):
        try:
            os.kill(-1, 9)
        except OSError:
            return


def _received_fds(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    return fds


def _become_candidate(ctl: Any, fds: list[int], scope: dict[str, Any]) -> Callable[[], None]:
    """In the candidate's fresh process: its fds, session, limits and uid; then its main."""
    import fcntl
    import resource

    ctl.detach()  # closed below with every other fd, not by the socket object
    os.setsid()
    keep = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for target, fd in zip((3, 4, 1, 2), keep, strict=True):
        os.dup2(fd, target)
    os.closerange(5, 4096)
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")  # the candidate, not the judge or the zygote, is the kernel's pick
    except OSError:
        pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(CANDIDATE_UID, CANDIDATE_UID, CANDIDATE_UID)
        os.setresuid(CANDIDATE_UID, CANDIDATE_UID, CANDIDATE_UID)
    # Dropping the uid left us non-dumpable; a candidate may read its own /proc entries, as a
    # freshly exec'd one could. Its memory is a copy of the zygote's: nothing in it is secret.
    _prctl_dumpable(1)
    os.chdir(WORK)
    main: Callable[[], None] = scope["main"]
    return main


def _fork_candidate(ctl: Any, fds: list[int], scope: dict[str, Any]) -> Callable[[], None] | None:
    """Fork the candidate through a middle process; returns its main in the candidate only."""
    gc.freeze()  # the zygote's objects: no collection in a candidate walks (and copies) them
    try:
        middle = os.fork()
    except OSError:
        ctl.sendall(b"\0\0\0\0e")
        return None
    if middle == 0:
        code = 1
        try:
            pid = os.fork()
            if pid == 0:
                code = -1
            else:
                os.write(ctl.fileno(), pid.to_bytes(4, "big"))
                code = 0
        except BaseException:
            code = 1
        if code != -1:
            os._exit(code)  # the candidate is now the judge's child (PID 1 adopts orphans)
        return _become_candidate(ctl, fds, scope)
    _, status = os.waitpid(middle, 0)
    ctl.sendall(b"k" if os.waitstatus_to_exitcode(status) == 0 else b"\0\0\0\0e")
    return None


def serve() -> Callable[[], None] | None:
    """The zygote's loop; returns only in a candidate's process (its main) or at the end."""
    scope: dict[str, Any] = {"__name__": "__candidate__", "__builtins__": __builtins__}
    exec(compile(CANDIDATE_PROGRAM, "<string>", "exec"), scope)
    _prctl_dumpable(0)
    ctl = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, CONTROL_FD)
    space = _socket.CMSG_LEN(4 * FDS_PER_CANDIDATE)
    while True:
        try:
            data, ancdata, _, _ = ctl.recvmsg(1, space)
        except OSError:
            return None
        if not data:
            return None  # the judge is gone or done
        fds = _received_fds(ancdata)
        if data == b"p":
            _preload()
        elif data == b"x":
            _kill_all()
            ctl.sendall(b"k")
        elif data == b"f" and len(fds) == FDS_PER_CANDIDATE:
            main = _fork_candidate(ctl, fds, scope)
            if main is not None:
                return main
        else:
            ctl.sendall(b"\0\0\0\0e")
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    _candidate_main = serve()
    if _candidate_main is None:
        os._exit(0)
    _candidate_main()  # then the interpreter ends as a fresh candidate's would (atexit, threads)
