"""The harness that runs inside a sandbox container (stdlib only, Python >= 3.8).

The pool starts each container with this file's text (with the test programs it runs filled in,
see SCRIPT_HARNESS below) as `python3 -I -c` and the harness as the container's PID 1, waiting
for a JSON spec on stdin (or, for a one-off `docker run`, the spec as the remaining arguments).
It writes the candidate's files into /work, runs the tests (or the program) in a child process
in its own session with a wall-clock limit and output caps, collects per-test results through a
pipe, kills everything else still running, and prints one JSON object on stdout. As PID 1 of
the container's PID namespace it cannot be killed from inside, and when it exits the kernel
kills whatever the candidate left behind. The host does not trust it either:
it enforces its own deadline and output cap, and removes the container afterwards.
"""

from __future__ import annotations

import binascii
import errno
import os
import resource
import select
import sys
import time

# Every candidate pays for this interpreter's start-up, so the harness imports only C modules:
# `signal` would pull in enum, `base64` and `json` re, `selectors` collections, `typing` itself
# (together about 25 ms of CPU per candidate, on a budget of some 150).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from typing import Any
else:
    import _signal as signal


def _json_codec() -> tuple[Callable[[str], Any], Callable[[Any], str]]:
    """(loads, dumps) on json's C accelerator, without importing json (and so re).

    Falls back to the json module where the accelerator is missing or differs. loads raises
    ValueError for anything that is not one well-formed JSON value.
    """
    try:
        import _json

        class _Context:
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = float  # NaN, Infinity, -Infinity

        scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # duck-typed context

        def _no_default(obj: object) -> object:
            raise TypeError(f"{type(obj).__name__} is not JSON serializable")

        encode = _json.make_encoder(
            {}, _no_default, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
        )

        def loads(text: str) -> Any:
            text = text.strip(" \t\n\r")
            try:
                value, end = scan(text, 0)
            except (StopIteration, RecursionError) as exc:
                raise ValueError(f"not JSON: {text[:40]!r}") from exc
            if end != len(text):
                raise ValueError(f"extra data after the JSON value at {end}")
            return value

        def dumps(obj: Any) -> str:
            return "".join(encode(obj, 0))

        if loads(dumps({"a": [1, 2.5, None, True, "\u00e9"]})) == {
            "a": [1, 2.5, None, True, "\u00e9"]
        }:
            return loads, dumps
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
    import json

    return json.loads, json.dumps


json_loads, json_dumps = _json_codec()

WORK = "/work"
HARNESS_DIR = "/work/.vs"
MAX_EVENT_BYTES = 4 * 1024 * 1024

# The programs the harness runs for the tests, kept in their own files next to this one
# (script_tests.py: assert-style scripts, run in the test child; pytest_plugin.py: written as
# /work/conftest.py). The host puts their text here when it builds the container's command
# (tiers.code.harness.harness_program), as this program runs from `python3 -c`, not from a file.
SCRIPT_HARNESS = ""
PYTEST_CONFTEST = ""


def _cgroup_counter(paths_and_keys: list[tuple[str, str]]) -> int:
    """The first readable `key N` line among cgroup v1/v2 event files, else 0."""
    for path, key in paths_and_keys:
        try:
            with open(path) as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            continue
    return 0


def _oom_kills() -> int:
    return _cgroup_counter(
        [
            ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
            ("/sys/fs/cgroup/memory.events", "oom_kill"),
        ]
    )


def _pids_max_hits() -> int:
    return _cgroup_counter(
        [("/sys/fs/cgroup/pids/pids.events", "max"), ("/sys/fs/cgroup/pids.events", "max")]
    )


def _live_processes() -> dict[int, str]:
    """{pid: command name} of every process in the container that is not a zombie."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        state = stat[stat.rfind(")") + 2 : stat.rfind(")") + 3]
        if state not in ("Z", "X"):
            found[int(entry)] = comm
    return found


def _kill_all_but_init() -> None:
    """SIGKILL every process we may signal except ourselves and PID 1 (the container's init)."""
    for _ in range(3):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            return


def _child_setup() -> None:
    # The candidate, not the harness, is what the kernel should pick on OOM.
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _decode(data: bytes, total: int, cap: int) -> str:
    text = data[:cap].decode("utf-8", errors="replace")
    if total > cap:
        text += f"\n[... {total - cap} more bytes not shown]"
    return text


def _spawn(
    argv: list[str] | None,
    source: str | None,
    env: dict[str, str],
    stdin_path: str | None,
    result_w: int,
) -> tuple[int, int, int]:
    """Fork a child in its own session with stdout/stderr on new pipes; return (pid, out, err).

    The child execs `argv`, or (saving a second interpreter start-up) runs `source` itself.
    """
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(out_w)
        os.close(err_w)
        return pid, out_r, err_r
    code = 1
    try:
        os.setsid()
        _child_setup()
        stdin_fd = os.open(stdin_path or os.devnull, os.O_RDONLY)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, result_w)
        os.closerange(result_w + 1, 1024)
        os.chdir(WORK)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if argv is not None:
            os.set_inheritable(result_w, True)
            os.execve(argv[0], argv, env)
        os.environ.clear()
        os.environ.update(env)
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
        try:
            harness_globals = {"__name__": "__harness__", "_json_dumps": json_dumps}
            exec(compile(source or "", "<harness>", "exec"), harness_globals)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _run_child(
    argv: list[str] | None,
    env: dict[str, str],
    timeout_s: float,
    stdin_path: str | None,
    cap: int,
    limit: int,
    source: str | None = None,
) -> dict[str, Any]:
    """Run `argv` (or `source`) in its own session; return what happened, with capped output."""
    result_r, result_w = os.pipe()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    old_wakeup = signal.set_wakeup_fd(wake_w)
    env = dict(env, VS_RESULT_FD=str(result_w))
    started = time.monotonic()
    pid, out_r, err_r = _spawn(argv, source, env, stdin_path, result_w)
    os.close(result_w)
    status: int | None = None

    def poll() -> int | None:
        nonlocal status
        if status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
        return status

    poller = select.poll()
    streams = {out_r: "stdout", err_r: "stderr", result_r: "events"}
    for fd in streams:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    kept = {"stdout": bytearray(), "stderr": bytearray(), "events": bytearray()}
    totals = {"stdout": 0, "stderr": 0, "events": 0}
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
            room = (MAX_EVENT_BYTES if name == "events" else cap) - len(kept[name])
            if room > 0:
                kept[name] += data[:room]
            if totals["stdout"] + totals["stderr"] > limit or totals["events"] > MAX_EVENT_BYTES:
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
    if timed_out or output_exceeded:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    # What the test wrote before it ended is in the pipes; take it before looking for strays.
    for fd in list(open_fds):
        if not output_exceeded:
            pump(fd)
    me = os.getpid()
    strays = {
        other: comm
        for other, comm in _live_processes().items()
        if other not in (1, me, pid) and other not in BASELINE_PIDS
    }
    _kill_all_but_init()
    if poll() is None:
        _, raw = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(raw)
    drain_deadline = time.monotonic() + 0.5
    while open_fds and not output_exceeded and time.monotonic() < drain_deadline:
        for fd, _ in poller.poll(50):
            if fd in open_fds:
                pump(fd)
    signal.set_wakeup_fd(old_wakeup)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in (result_r, out_r, err_r, wake_r, wake_w):
        os.close(fd)
    events = []
    for line in bytes(kept["events"]).splitlines():
        try:
            event = json_loads(line.decode())
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    code = status
    return {
        "exit_code": code if code is not None and code >= 0 else None,
        "signal": -code if code is not None and code < 0 else None,
        "timed_out": timed_out,
        "output_exceeded": output_exceeded,
        "duration_s": round(elapsed, 4),
        "stdout": _decode(bytes(kept["stdout"]), totals["stdout"], cap),
        "stderr": _decode(bytes(kept["stderr"]), totals["stderr"], cap),
        "stdout_bytes": totals["stdout"],
        "stderr_bytes": totals["stderr"],
        "events": events,
        "strays": sorted(set(strays.values()))[:20],
    }


def _write(path: str, text_or_bytes: str | bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(text_or_bytes, bytes):
        with open(path, "wb") as fh:
            fh.write(text_or_bytes)
    else:
        with open(path, "w") as fh:
            fh.write(text_or_bytes)


def _safe_path(rel: str) -> str:
    path = os.path.normpath(os.path.join(WORK, rel))
    if path != WORK and not path.startswith(WORK + "/"):
        raise ValueError(f"file path {rel!r} is outside the work directory")
    return path


def main() -> None:
    spec = json_loads("".join(sys.argv[1:]) or sys.stdin.read())
    cap = int(spec["output_cap"])
    limit = int(spec["output_limit"])
    timeout_s = float(spec["timeout_s"])
    os.makedirs(HARNESS_DIR, exist_ok=True)
    os.makedirs(WORK + "/.tmp", exist_ok=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": WORK,
        "TMPDIR": WORK + "/.tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    report: dict[str, Any] = {"harness": "ok", "oom_kills": 0, "pids_max_hits": 0}
    oom0, pids0 = _oom_kills(), _pids_max_hits()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)

    if spec.get("setup"):
        _write(HARNESS_DIR + "/setup.py", spec["setup"])
        report["setup"] = _run_child(
            [sys.executable, HARNESS_DIR + "/setup.py"], env, timeout_s, None, cap, limit
        )
        if report["setup"]["exit_code"] != 0:
            _finish(report, oom0, pids0, cpu0)
            return

    for rel, content in (spec.get("files") or {}).items():
        _write(_safe_path(rel), binascii.a2b_base64(content or ""))
    _write(WORK + "/solution.py", spec["code"])
    stdin_path = None
    if spec.get("stdin"):
        stdin_path = HARNESS_DIR + "/stdin"
        _write(stdin_path, spec["stdin"])
    mode = spec["mode"]
    argv: list[str] | None
    if mode == "run":
        argv = [sys.executable, WORK + "/solution.py"]
    elif mode == "pytest":
        _write(WORK + "/test_solution.py", spec["tests"])
        _write(WORK + "/conftest.py", PYTEST_CONFTEST)
        argv = [
            sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
            "-o", "console_output_style=classic", "--rootdir", WORK, "test_solution.py",
        ]  # fmt: skip
    else:
        _write(WORK + "/tests.py", spec["tests"])
        argv = None
    source = SCRIPT_HARNESS if argv is None else None
    report["run"] = _run_child(argv, env, timeout_s, stdin_path, cap, limit, source)

    fetched: dict[str, str] = {}
    for rel in spec.get("fetch_files") or []:
        try:
            with open(_safe_path(rel), "rb") as fh:
                data = fh.read(cap + 1)
        except (OSError, ValueError):
            continue
        if len(data) <= cap:
            fetched[rel] = binascii.b2a_base64(data, newline=False).decode()
    report["files"] = fetched
    _finish(report, oom0, pids0, cpu0)


def _finish(report: dict[str, Any], oom0: int, pids0: int, cpu0: resource.struct_rusage) -> None:
    report["oom_kills"] = _oom_kills() - oom0
    report["pids_max_hits"] = _pids_max_hits() - pids0
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    report["cpu_s"] = round(cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 4)
    sys.stdout.write(json_dumps(report))
    sys.stdout.flush()


BASELINE_PIDS = set(_live_processes())

if __name__ == "__main__":
    try:
        main()
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EAGAIN, errno.ENOMEM):
            sys.stdout.write(json_dumps({"harness": "resource", "error": str(exc)}))
        else:
            raise
