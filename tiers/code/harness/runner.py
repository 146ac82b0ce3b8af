"""The judge that runs inside a sandbox container (stdlib only, Python >= 3.8).

The pool starts each container with this file's text (the programs it runs filled in, see
CANDIDATE_STUB below) as `python3 -I -c`, as root with only the SETUID, SETGID and KILL
capabilities, as the container's PID 1. Before it reads anything it makes itself non-dumpable,
starts the zygote (zygote.py: a clean interpreter that only forks candidates' processes) and
has it fork the candidate's process, which drops to CANDIDATE_UID and waits for its job; then it
reads one JSON spec on stdin (or, for a one-off `docker run`, the spec as the remaining
arguments). For tests it forks a test runner under its own uid that holds the tests, calls the
candidate's functions through a pipe that carries only plain data, compares the values itself
and records the results on a pipe only the judge reads; the candidate can read or signal
neither process. It waits with a wall-clock limit and output caps, kills every other process,
and prints one JSON object on stdout. The host does not trust it either: it enforces its own
deadline and output cap, and removes the container afterwards.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import sys

# `signal` would pull in enum; the C module is enough. json is imported once per container
# (the test runner, forked from here, needs it anyway).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Any
else:
    import _signal as signal

json_loads, json_dumps = json.loads, json.dumps

WORK = "/work"  # the candidate's work dir: a tmpfs of CANDIDATE_UID, mode 0700
JUDGE_DIR = "/judge"  # the judge's: a tmpfs of root, mode 0700, where the tests are written
CANDIDATE_UID = 1000
CANDIDATE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORK,
    "TMPDIR": WORK + "/.tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
MAX_EVENT_BYTES = 4 * 1024 * 1024
DELIVERED_MARK = b"vs:received\n"  # tiers.code.attach.DELIVERED_MARK

# The programs the harness runs, kept in their own files next to this one (candidate.py: the
# candidate's process; judge_rpc.py: the proxies of the test runner; script_tests.py and
# pytest_plugin.py: the two test runners). The host puts their text here when it builds the
# container's command (tiers.code.harness.harness_program): this program runs from `python3 -c`.
CANDIDATE_STUB = ""
JUDGE_RPC = ""
SCRIPT_HARNESS = ""
PYTEST_HARNESS = ""
IO_HARNESS = ""
# spawn.py: starting candidates' processes (from the zygote, zygote.py) and ending them.
SPAWN = ""
ZYGOTE_PROGRAM = ""
WATCH = ""  # watch.py: the wait for one candidate's run


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


_spawn: dict[str, Any] = {}


def _start_spawner() -> None:
    """spawn.py's functions in a namespace of their own; the zygote started if it can be."""
    names = ("CANDIDATE_STUB", "ZYGOTE_PROGRAM", "WORK", "CANDIDATE_UID", "CANDIDATE_ENV")
    _spawn.update({name: globals()[name] for name in names}, __name__="__spawn__")
    exec(compile(SPAWN, "<spawn>", "exec"), _spawn)
    _spawn["start_zygote"]()


def _start_candidate_process() -> tuple[int, int, int, int, int, int, int]:
    """The next candidate's process (spawn.py), made before its spec is read."""
    started: tuple[int, int, int, int, int, int, int] = _spawn["start_candidate"]()
    return started


def _kill_all_but_init() -> None:
    """SIGKILL every process but ourselves (PID 1) and the zygote (spawn.py)."""
    _spawn["kill_all_but_judge"]()


def _prctl_not_dumpable() -> None:
    """PR_SET_DUMPABLE 0: no process without CAP_SYS_PTRACE may open our memory or fds."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def _start_test_runner(
    program: str, job: dict[str, Any], tests: str, req_w: int, resp_r: int, out_w: int, err_w: int
) -> tuple[int, int]:
    """Fork the test runner: the judge's uid, the tests, the proxies, the record of results.
    Returns (pid, read end of its result pipe)."""
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(result_w)
        return pid, result_r
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.makedirs(JUDGE_DIR + "/tmp", exist_ok=True)
        os.chdir(JUDGE_DIR)
        os.environ.clear()
        os.environ.update(PATH="/usr/bin:/bin", HOME=JUDGE_DIR, TMPDIR=JUDGE_DIR + "/tmp")
        os.environ.update(LANG="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
        os.environ.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        scope: dict[str, Any] = {"__name__": "__judge__"}
        exec(_compiled(JUDGE_RPC, "<judge_rpc>"), scope)
        scope["connect"](req_w, resp_r)
        scope.update(_result_fd=result_w, _job=job, _tests=tests)
        try:
            exec(_compiled(program, "<test_runner>"), scope)
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


_COMPILED: dict[str, Any] = {}


def _compiled(source: str, name: str) -> Any:
    if source not in _COMPILED:
        _COMPILED[source] = compile(source, name, "exec")
    return _COMPILED[source]


def _preload() -> None:
    """While the container waits for its candidate, do the test runner's start-up work once:
    its modules and code are then inherited by the fork instead of paid for per candidate."""
    import linecache  # noqa: F401
    import traceback  # noqa: F401

    _compiled(JUDGE_RPC, "<judge_rpc>")
    _compiled(SCRIPT_HARNESS, "<test_runner>")
    _compiled(IO_HARNESS, "<test_runner>")
    _compiled(WATCH, "<watch>")


def _send_job(fd: int, job: dict[str, Any]) -> None:
    data = json_dumps(job).encode()
    os.write(fd, len(data).to_bytes(4, "big") + data)


_watcher: dict[str, Any] = {}


def _watch(
    main_pid: int, streams: dict[int, str], timeout_s: float, cap: int, limit: int
) -> dict[str, Any]:
    """Wait for `main_pid` within `timeout_s`, reading `streams` with caps; then kill the rest
    (watch.py)."""
    if not _watcher:
        _watcher.update(__name__="__watch__", MAX_EVENT_BYTES=MAX_EVENT_BYTES)
        _watcher.update(json_loads=json_loads, _live_processes=_live_processes)
        _watcher.update(_kill_all_but_judge=_kill_all_but_init, _spared=_spared)
        exec(_compiled(WATCH, "<watch>"), _watcher)
    run: dict[str, Any] = _watcher["watch"](main_pid, CANDIDATE_PID, streams, timeout_s, cap, limit)
    return run


def _spared() -> set[int]:
    """Processes that are not strays: the judge's own, those there before it, the zygote."""
    spared: set[int] = _spawn["spared"]()
    return spared | BASELINE_PIDS


def _rpc_message(data: bytes) -> dict[str, Any]:
    """The candidate's one message of a run (its setup failed, or the files it was asked for)."""
    size = int.from_bytes(data[:4], "big")
    try:
        value = json_loads(data[4 : 4 + size].decode())
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _candidate_gone() -> bool:
    """Whether the candidate's process, made before its spec was read, has died since. Nothing
    of a candidate's has run yet, so only something outside killed it: the kernel's OOM killer,
    an operator. The judge (PID 1) is its parent and reaps every orphan: reaped is gone too."""
    try:
        pid, _ = os.waitpid(CANDIDATE_PID, os.WNOHANG)
    except ChildProcessError:
        return True
    return pid != 0


def _replace_candidate_if_gone() -> None:
    """A new candidate process for the one that died waiting, so that the candidate about to
    run is not blamed ("crashed", "timeout") for what happened before its spec arrived."""
    global CANDIDATE_PID, REQ_W, RESP_R, OUT_R, ERR_R, OUT_W, ERR_W
    if not _candidate_gone():
        return
    for fd in (REQ_W, RESP_R, OUT_R, ERR_R, OUT_W, ERR_W):
        os.close(fd)
    CANDIDATE_PID, REQ_W, RESP_R, OUT_R, ERR_R, OUT_W, ERR_W = _start_candidate_process()


def main(spec: dict[str, Any]) -> None:
    _replace_candidate_if_gone()  # before the mark: the spec is not yet anyone's
    os.write(2, DELIVERED_MARK)  # the host retries a candidate on another container only without it
    cap = int(spec["output_cap"])
    limit = int(spec["output_limit"])
    timeout_s = float(spec["timeout_s"]) * (2 if spec.get("setup") else 1)
    report: dict[str, Any] = {"harness": "ok", "oom_kills": 0, "pids_max_hits": 0}
    oom0, pids0 = _oom_kills(), _pids_max_hits()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    mode = spec["mode"]
    job = {k: spec.get(k) for k in ("mode", "code", "files", "stdin", "setup", "fetch_files")}
    job["timeout_s"] = timeout_s
    job.update(lang=spec.get("lang"), run_timeout_s=spec.get("run_timeout_s"))  # other languages
    job["fetch_cap"] = cap
    streams = {OUT_R: "stdout", ERR_R: "stderr"}
    if mode == "run":
        os.close(OUT_W)
        os.close(ERR_W)
        _send_job(REQ_W, job)
        streams[RESP_R] = "rpc"
        main_pid = CANDIDATE_PID
    else:
        program = {"script": SCRIPT_HARNESS, "io": IO_HARNESS}.get(mode, PYTEST_HARNESS)
        tests = json_dumps(spec["io"]) if mode == "io" else spec["tests"]
        main_pid, result_r = _start_test_runner(program, job, tests, REQ_W, RESP_R, OUT_W, ERR_W)
        os.close(OUT_W)
        os.close(ERR_W)
        streams[result_r] = "events"
    run = _watch(main_pid, streams, timeout_s, cap, limit)
    message = _rpc_message(run.pop("rpc"))
    setup_failed = [e for e in run["events"] if e.get("event") == "setup_failed"]
    if "setup_failed" in message or setup_failed:
        code = message.get("setup_failed") or (setup_failed or [{}])[0].get("code") or 1
        report["setup"] = dict(run, exit_code=code)
        _finish(report, oom0, pids0, cpu0)
        return
    if run["candidate_signal"] and run["signal"] is None:
        run["signal"] = run["candidate_signal"]  # the candidate's process was killed
    report["run"] = run
    files = message.get("files")
    report["files"] = files if isinstance(files, dict) else {}
    for key in ("compile", "program"):  # other languages: the compile and the run's own end
        if isinstance(message.get(key), dict):
            report[key] = message[key]
    _finish(report, oom0, pids0, cpu0)


def _finish(report: dict[str, Any], oom0: int, pids0: int, cpu0: resource.struct_rusage) -> None:
    report["oom_kills"] = _oom_kills() - oom0
    report["pids_max_hits"] = _pids_max_hits() - pids0
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    report["cpu_s"] = round(cpu.ru_utime + cpu.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 4)
    sys.stdout.write(json_dumps(report) + ("\n" if SERVING else ""))
    sys.stdout.flush()


BASELINE_PIDS = set(_live_processes())
SERVING = False


# isolation "process": the host opens the stdin of a warm container with SERVE_HELLO, then
# sends one spec after another (4-byte length + JSON); the judge answers each with one report
# line on stdout. The loop's helpers (reading frames, cleaning up between candidates) are in
# serve.py, put in SERVE_LOOP as the others are.
SERVE_HELLO = b"vs:serve\n"  # tiers.code.session.SERVE_HELLO
SERVE_LOOP = ""


def _read_exact_stdin(size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(0, size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _read_all_stdin() -> bytes:
    parts = []
    while chunk := os.read(0, 1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def serve() -> None:
    """Judge one job's candidates one after another, each in a fresh process started before its
    spec is read, with everything of the one before gone (serve.py): its processes, its files
    in the work dir, /dev/shm and /dev/mqueue, its System V IPC objects. Stops serving (the
    container exits, the host gives the rest of the job a fresh one) when that cannot be made
    sure of."""
    global CANDIDATE_PID, REQ_W, RESP_R, OUT_R, ERR_R, OUT_W, ERR_W
    scope: dict[str, Any] = {"__name__": "__serve__", "_live_processes": _live_processes}
    scope.update(_kill_all_but_judge=_kill_all_but_init, _spared=_spawn["spared"])
    _spawn["preload"]()
    exec(_compiled(SERVE_LOOP, "<serve>"), scope)
    while True:
        spec = scope["read_frame"](_read_exact_stdin)
        if spec is None:
            break
        _judge_spec(spec)
        if not scope["clean_between_candidates"](CANDIDATE_UID, WORK, JUDGE_DIR):
            sys.stderr.write("vs:unclean\n")
            break
        CANDIDATE_PID, REQ_W, RESP_R, OUT_R, ERR_R, OUT_W, ERR_W = _start_candidate_process()
    _kill_all_but_init()


def _judge_spec(spec: dict[str, Any]) -> None:
    try:
        main(spec)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EAGAIN, errno.ENOMEM):
            sys.stdout.write(json_dumps({"harness": "resource", "error": str(exc)}) + "\n")
            sys.stdout.flush()
        else:
            raise


if __name__ == "__main__":
    _prctl_not_dumpable()
    _start_spawner()
    CANDIDATE_PID, REQ_W, RESP_R, OUT_R, ERR_R, OUT_W, ERR_W = _start_candidate_process()
    if sys.argv[1:]:
        _judge_spec(json_loads("".join(sys.argv[1:])))
    else:
        _preload()
        _first = _read_exact_stdin(len(SERVE_HELLO))
        if _first == SERVE_HELLO:
            SERVING = True
            serve()
        else:
            _judge_spec(json_loads(_first + _read_all_stdin()))
