"""The judge's side of the zygote's protocol (harness/spawn.py), run on the host against a
zygote that dies mid-answer: the process it had already forked must not live on beside the one
the judge makes in its place (both would hold the same pipes and race for the job). In a
container this was 1 run in 15-50 of test_zygote's zygote-killing test: a timeout."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

from tiers.code.harness import harness_source

# A zygote that forks the candidate's process, sends its pid and dies before its b"k", as one
# the OOM killer picks between its middle process's answer and its own.
DYING_ZYGOTE = """
import os, socket, subprocess, sys
ctl = socket.socket(fileno=int(sys.argv[1]))
ctl.recvmsg(1, socket.CMSG_LEN(16))
forked = subprocess.Popen(["sleep", "60"], start_new_session=True)
print(forked.pid, flush=True)
ctl.sendall(forked.pid.to_bytes(4, "big"))
os._exit(0)
"""


def _spawn_namespace() -> dict[str, Any]:
    scope: dict[str, Any] = {"CANDIDATE_STUB": "", "ZYGOTE_PROGRAM": "", "WORK": "/tmp"}
    scope.update(CANDIDATE_UID=os.getuid(), CANDIDATE_ENV={}, __name__="__spawn__")
    exec(compile(harness_source("spawn.py"), "<spawn>", "exec"), scope)
    return scope


def _gone(pid: int) -> bool:
    """Dead: reaped, or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_a_zygote_dying_before_its_answer_leaves_no_candidate_process_behind() -> None:
    spawn = _spawn_namespace()
    ours, theirs = socket.socketpair()
    zygote = subprocess.Popen(
        [sys.executable, "-c", DYING_ZYGOTE, str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
        stdout=subprocess.PIPE,
        text=True,
    )
    theirs.close()
    spawn["_zygote"].update(pid=zygote.pid, sock=ours)
    pipes = [os.pipe() for _ in range(2)]
    fds = [pipes[0][0], pipes[0][1], pipes[1][0], pipes[1][1]]
    forked = 0
    try:
        assert spawn["_from_zygote"](fds) is None  # no pid: the judge makes one itself
        assert zygote.stdout is not None
        forked = int(zygote.stdout.readline())
        deadline = time.monotonic() + 5
        while not _gone(forked) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(forked), f"the zygote's last candidate process {forked} still runs"
        assert spawn["zygote_pid"]() is None  # and the zygote is given up
    finally:
        for fd in fds:
            os.close(fd)
        if forked and not _gone(forked):
            os.kill(forked, 9)  # the test failed: leave nothing running
        zygote.wait(timeout=5)  # already reaped by the judge's side: returns at once
        if zygote.stdout:
            zygote.stdout.close()
