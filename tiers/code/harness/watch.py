"""The judge's wait for one candidate's run (runner.py runs this text in a namespace of its
own, with the names below put in).

It waits for the main process of the run (the test runner, or in mode "run" the candidate's
process) within the wall-clock limit, reading its streams with caps: stdout and stderr (the
candidate's, shared with the test runner), the test runner's result lines, the candidate's
answer. Then it notes stray processes, kills every process but the judge and the zygote, and
says how the run ended.
"""

from __future__ import annotations

import os
import select
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from typing import Any
else:
    import _signal as signal

# Put in this namespace by the runner (runner.py, _watcher).
MAX_EVENT_BYTES: int = globals()["MAX_EVENT_BYTES"]
json_loads: Callable[[str], Any] = globals()["json_loads"]
_live_processes: Callable[[], dict[int, str]] = globals()["_live_processes"]
_kill_all_but_judge: Callable[[], None] = globals()["_kill_all_but_judge"]
_spared: Callable[[], set[int]] = globals()["_spared"]


def watch(
    main_pid: int,
    candidate_pid: int,
    streams: dict[int, str],
    timeout_s: float,
    cap: int,
    limit: int,
) -> dict[str, Any]:
    """Wait for `main_pid` within `timeout_s`, reading `streams` with caps; then kill the rest."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    started = time.monotonic()
    status: int | None = None

    def poll() -> int | None:
        nonlocal status
        if status is None:
            done, raw = os.waitpid(main_pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
        return status

    poller = select.poll()
    for fd in streams:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    kept = {name: bytearray() for name in streams.values()}
    totals = dict.fromkeys(streams.values(), 0)
    timed_out = output_exceeded = False
    deadline = started + timeout_s
    open_fds = set(streams)

    def pump(fd: int) -> None:
        nonlocal output_exceeded
        name = streams[fd]
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                poller.unregister(fd)
                open_fds.discard(fd)
                return
            totals[name] += len(data)
            room = (cap if name in ("stdout", "stderr") else MAX_EVENT_BYTES) - len(kept[name])
            if room > 0:
                kept[name] += data[:room]
            if totals["stdout"] + totals["stderr"] > limit:
                output_exceeded = True
                return

    while not output_exceeded:
        if poll() is not None:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for fd, _ in poller.poll(remaining * 1000):
            if fd == wake_r:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
            elif fd in open_fds:
                pump(fd)
    elapsed = time.monotonic() - started
    for fd in list(open_fds):
        if not output_exceeded:
            pump(fd)
    me = os.getpid()
    strays = {
        other: comm
        for other, comm in _live_processes().items()
        if other not in (1, me, main_pid, candidate_pid) and other not in _spared()
    }
    candidate_status = _status_now(candidate_pid) if main_pid != candidate_pid else None
    _kill_all_but_judge()
    if main_pid != candidate_pid and candidate_status is None:
        try:
            os.waitpid(candidate_pid, 0)  # reaped, so its CPU counts in the report's cpu_s
        except ChildProcessError:
            pass
    if poll() is None:
        _, raw = os.waitpid(main_pid, 0)
        status = os.waitstatus_to_exitcode(raw)
    drain_deadline = time.monotonic() + 0.5
    while open_fds and not output_exceeded and time.monotonic() < drain_deadline:
        for fd, _ in poller.poll(50):
            if fd in open_fds:
                pump(fd)
    signal.set_wakeup_fd(old_wakeup)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in (*streams, wake_r, wake_w):
        os.close(fd)
    code = status
    return {
        "exit_code": code if code is not None and code >= 0 else None,
        "signal": -code if code is not None and code < 0 else None,
        "candidate_signal": -candidate_status
        if candidate_status and candidate_status < 0
        else None,
        "timed_out": timed_out,
        "output_exceeded": output_exceeded,
        "duration_s": round(elapsed, 4),
        "stdout": _decode(bytes(kept["stdout"]), totals["stdout"], cap),
        "stderr": _decode(bytes(kept["stderr"]), totals["stderr"], cap),
        "stdout_bytes": totals["stdout"],
        "stderr_bytes": totals["stderr"],
        "events": _parse_lines(bytes(kept.get("events", b""))),
        "rpc": bytes(kept.get("rpc", b"")),
        "strays": sorted(set(strays.values()))[:20],
    }


def _decode(data: bytes, total: int, cap: int) -> str:
    text = data[:cap].decode("utf-8", errors="replace")
    if total > cap:
        text += f"\n[... {total - cap} more bytes not shown]"
    return text


def _status_now(pid: int) -> int | None:
    try:
        done, raw = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(raw) if done else None


def _parse_lines(data: bytes) -> list[dict[str, Any]]:
    events = []
    for line in data.splitlines():
        try:
            event = json_loads(line.decode())
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events
