"""The judge's helpers for isolation "process": one container serves one job's candidates.

The runner (runner.py, the container's PID 1) executes this text in a namespace of its own and
calls read_frame for each spec and clean_between_candidates after each candidate. A candidate
must leave nothing that the next one could see or that could change the next one's verdict: no
process (the judge has already SIGKILLed every process but itself), no file in the work dir,
/mnt, /tmp, /dev/shm or /dev/mqueue, no System V IPC object. The judge is root without
CAP_DAC_OVERRIDE or CAP_IPC_OWNER, so the files and IPC objects of the candidate's uid are
removed by a short-lived process of that uid (forked from the judge after every candidate process
is gone), and then checked: anything left and the judge serves no one else.
"""

from __future__ import annotations

import json
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_FRAME = 64 * 1024 * 1024
# The scratch tmpfs (/mnt, /tmp: tiers.code.engine SCRATCH_DIRS) are the candidate's as well.
SHARED_DIRS = ("/dev/shm", "/dev/mqueue", "/mnt", "/tmp")
IPC_TABLES = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
_live_processes: Callable[[], dict[int, str]] = globals()["_live_processes"]
_kill_all_but_judge: Callable[[], None] = globals()["_kill_all_but_judge"]
_spared: Callable[[], set[int]] = globals()["_spared"]


def read_frame(read_exact: Callable[[int], bytes]) -> dict[str, Any] | None:
    """The next spec from the host (4-byte big-endian length + JSON); None at the end."""
    head = read_exact(4)
    if len(head) < 4:
        return None
    size = int.from_bytes(head, "big")
    if size > MAX_FRAME:
        return None
    data = read_exact(size)
    if len(data) < size:
        return None
    spec = json.loads(data)
    return spec if isinstance(spec, dict) else None


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _empty(path: str) -> None:
    """Remove everything inside `path` that this process may remove (not `path` itself)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, stat.S_IRWXU)  # a candidate may have locked itself out
                _empty(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue


def _ipc_ids(table: str) -> list[int]:
    """Ids of the System V IPC objects in one /proc/sysvipc table (second column)."""
    try:
        with open(table) as fh:
            lines = fh.read().splitlines()[1:]
    except OSError:
        return []
    return [int(line.split()[1]) for line in lines if len(line.split()) > 1]


def _remove_ipc() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    for shmid in _ipc_ids(IPC_TABLES[0]):
        libc.shmctl(shmid, ipc_rmid, None)
    for semid in _ipc_ids(IPC_TABLES[1]):
        libc.semctl(semid, 0, ipc_rmid)
    for msqid in _ipc_ids(IPC_TABLES[2]):
        libc.msgctl(msqid, ipc_rmid, None)


def _leftovers(work: str) -> list[str]:
    """What of a candidate is still there (empty when the next candidate may start)."""
    left = [f"{path}: {len(os.listdir(path))} entries" for path in (work, *SHARED_DIRS)
            if os.path.isdir(path) and os.listdir(path)]  # fmt: skip
    left += [f"{table}: {len(_ipc_ids(table))} objects" for table in IPC_TABLES
             if _ipc_ids(table)]  # fmt: skip
    return left


def _clean_as(uid: int, work: str) -> int:
    """In a child under `uid`: remove what that uid left; exit 0 only if nothing is left."""
    pid = os.fork()
    if pid:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    code = 1
    try:
        if os.getuid() == 0:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        _remove_ipc()
        for path in (work, *SHARED_DIRS):
            _empty(path)
        code = 0 if not _leftovers(work) else 1
    finally:
        os._exit(code)


def clean_between_candidates(uid: int, work: str, judge_dir: str) -> bool:
    """Make sure nothing of the last candidate is left; False if that failed."""
    import time

    spared = _spared()
    deadline = time.monotonic() + 1.0
    while True:
        _reap()
        if not [pid for pid in _live_processes() if pid not in spared]:
            break
        if time.monotonic() > deadline:
            return False
        _kill_all_but_judge()
        time.sleep(0.001)
    status = _clean_as(uid, work)
    _empty(judge_dir)
    _reap()
    return status == 0 and not [pid for pid in _live_processes() if pid not in _spared()]
