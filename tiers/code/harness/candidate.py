"""The candidate's side of the sandbox: runs under its own uid, holds no test and no result.

The judge (the runner, the container's PID 1) starts this program under the candidate's uid
before it has read any spec, with fd 3 carrying requests from the judge and fd 4 answers to it:
as a fork of the zygote (zygote.py), which defined it and calls main in the fork, or else as a
fresh interpreter (`python3 -c`, which runs main below).
It takes one job: writes the candidate's files, runs the payload's setup, then either runs
solution.py as a program (mode "run") or loads it as the module `solution` and answers calls from
the judge's test runner: every value it hands back is plain data (JSON with a few tags), or a
numbered handle to an object that stays here. Everything in this process is the candidate's to
change, so nothing it sends is trusted beyond being the candidate's answer: the judge compares
values itself and keeps the record of which test passed.
"""

from __future__ import annotations

import _json  # json's C half: `import json` pulls in re and enum, most of a start-up's cost
import binascii
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing, base64 and traceback cost every candidate start-up time
    from typing import Any

TRACEBACK_CHARS = 4000
WORK = "/work"
# Where fetch_files may read: the work dir, and the scratch tmpfs SandboxFusion's programs write
# to by absolute path (/mnt/b, /tmp/x; tiers.code.engine SCRATCH_DIRS).
FETCH_ROOTS = (WORK + "/", "/mnt/", "/tmp/")
# compiled.py's text, filled in by tiers.code.harness.harness_program: run only for a job that
# names another language than Python (its "lang"), see _language_program.
COMPILED_HARNESS = ""
# fd 3 (requests from the judge) and fd 4 (answers), opened by main: this text is also run in
# the zygote (zygote.py), where fd 3 is the zygote's own control socket.
_req: Any = None
_resp: Any = None
_handles: dict[int, Any] = {}
_signals: set[str] = set()
_PLAIN_BASES = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
_TRUSTED_MODULES = frozenset({"builtins", "collections", "enum", "decimal", "fractions"})


class _JsonContext:
    """What json's C scanner reads from json.JSONDecoder, with json.loads's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"),
                      "-Infinity": float("-inf")}.__getitem__  # fmt: skip


_scan = _json.make_scanner(_JsonContext())  # type: ignore[arg-type]


def _not_plain(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _dumps(obj: Any) -> str:
    """json.dumps(obj) (same separators, ensure_ascii, allow_nan), without importing json."""
    encoder = _json.make_encoder(
        {}, _not_plain, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    return "".join(encoder(obj, 0))


def _loads(data: bytes) -> Any:
    text = data.decode()
    value, end = _scan(text, 0)
    if text[end:].strip():
        raise ValueError("extra data after the JSON value")
    return value


def _send(obj: dict[str, Any]) -> None:
    data = _dumps(obj).encode()
    _resp.write(len(data).to_bytes(4, "big") + data)


def _recv() -> Any:
    head = _req.read(4)
    if len(head) < 4:
        raise SystemExit(0)  # the judge is done with us
    size = int.from_bytes(head, "big")
    data = b""
    while len(data) < size:
        chunk = _req.read(size - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return _loads(data)


def _note_type(value: Any) -> None:
    """Hack-monitor signals about a returned value's type (advisory: this process is the
    candidate's, the judge never relies on them for the score)."""
    for klass in type(value).__mro__:
        if klass.__module__ in _TRUSTED_MODULES or klass is object:
            continue
        if any(k in vars(klass) for k in ("__eq__", "__ne__", "__hash__")):
            _signals.add("defines_eq")
        if isinstance(value, _PLAIN_BASES):
            _signals.add("builtin_subclass")


def encode(value: Any, depth: int = 0) -> Any:
    """Plain data for `value`; anything that is not plain data becomes a handle."""
    if depth > 200:
        raise ValueError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return (
            value
            if value == value and value not in (float("inf"), -float("inf"))
            else {"$f": repr(value)}
        )
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"$t": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"$d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"$s" if kind is set else "$fs": [encode(v, depth + 1) for v in value]}
    if kind in (bytes, bytearray):
        text = binascii.b2a_base64(bytes(value), newline=False).decode()
        return {"$b" if kind is bytes else "$ba": text}
    if kind is complex:
        return {"$c": [encode(value.real), encode(value.imag)]}
    if kind is range:
        return {"$r": [value.start, value.stop, value.step]}
    if isinstance(value, type) or kind.__name__ in ("function", "module", "builtin_function"):
        return _handle(value)  # functions, classes, modules: the common case, kept cheap
    enum = sys.modules.get("enum")
    if enum is not None and isinstance(value, enum.Enum):
        return {"$e": [kind.__qualname__, value.name]}
    if hasattr(kind, "__dataclass_fields__"):
        import dataclasses  # already imported by the solution that made a dataclass

        fields = [
            [f.name, encode(getattr(value, f.name), depth + 1)] for f in dataclasses.fields(value)
        ]
        _handles[id(value)] = value  # the same object comes back when a test passes it on
        return {"$dc": kind.__qualname__, "f": fields, "h": id(value)}
    _note_type(value)
    if type(value).__module__ in ("decimal", "fractions"):
        return {"$num": [type(value).__name__, str(value)]}
    # A subclass of a builtin counts as its builtin value: its own methods decide nothing.
    base: Any
    for base in (bool, int, float, str, bytes, tuple, list, dict, frozenset, set):
        if isinstance(value, base):
            if base in (tuple, list, set, frozenset):
                return encode(base(iter(value)), depth)
            if base is dict:
                return encode(dict(dict.items(value)), depth)
            return encode(base(value), depth)
    return _handle(value)


def _encode_global(value: Any) -> Any:
    """A global of the solution: plain data when small, else a handle (fetched on use)."""
    if sys.getsizeof(value) > 16384:
        return _handle(value)
    try:
        return encode(value)
    except (ValueError, RecursionError):
        return _handle(value)


def _handle(value: Any) -> dict[str, Any]:
    key = id(value)
    _handles[key] = value
    info: dict[str, Any] = {"$h": key, "type": type(value).__qualname__}
    if isinstance(value, type) and issubclass(value, BaseException):
        info["exc"] = [value.__qualname__, _builtin_base(value)]
    elif type(value).__name__ == "module":
        info["module"] = value.__name__
    return info


def _builtin_base(klass: type) -> str:
    for base in klass.__mro__:
        if base.__module__ == "builtins":
            return base.__name__
    return "Exception"


def decode(value: Any) -> Any:
    """A value from the judge (plain data, a handle of ours, or a callback into the tests)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$h" in value:
        return _handles[value["$h"]]
    if "$cb" in value:
        return _callback(value["$cb"])
    (tag, body), *_ = value.items()
    if tag == "$t":
        return tuple(decode(v) for v in body)
    if tag == "$d":
        return {decode(k): decode(v) for k, v in body}
    if tag in ("$s", "$fs"):
        return (set if tag == "$s" else frozenset)(decode(v) for v in body)
    if tag in ("$b", "$ba"):
        data = binascii.a2b_base64(body)
        return data if tag == "$b" else bytearray(data)
    if tag == "$f":
        return float(body)
    if tag == "$c":
        return complex(decode(body[0]), decode(body[1]))
    if tag == "$r":
        return range(*body)
    if tag == "$dc":
        return {k: decode(v) for k, v in value["f"]}
    raise ValueError(f"unknown tag {tag!r}")


def _callback(key: int) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        _send({"cb": key, "args": [encode(a) for a in args],
               "kwargs": [[k, encode(v)] for k, v in kwargs.items()]})  # fmt: skip
        answer = _recv()
        if "raised" in answer:
            raise RuntimeError("the test's callback raised " + str(answer["raised"]))
        return decode(answer["ret"])

    return call


def _raised(exc: BaseException) -> dict[str, Any]:
    import traceback

    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    args = []
    for arg in exc.args[:4]:
        try:
            args.append(encode(arg))
        except Exception:
            args.append(repr(arg)[:200])
    return {
        "type": type(exc).__qualname__,
        "base": _builtin_base(type(exc)),
        "args": args,
        "traceback": "".join(lines)[-TRACEBACK_CHARS:],
        "errno": getattr(exc, "errno", None),
    }


_MUTABLE = (list, dict, set, bytearray)


def _serve_one(msg: dict[str, Any]) -> dict[str, Any]:
    op = msg["op"]
    target: Any = _handles.get(msg.get("h", -1))
    if op == "call":
        args = [decode(a) for a in msg.get("args", [])]
        kwargs = {k: decode(v) for k, v in msg.get("kwargs", [])}
        result = target(*args, **kwargs)
        # Arguments the candidate changed in place go back, as a caller would see them.
        changed = [[i, encode(a)] for i, a in enumerate(args) if type(a) in _MUTABLE]
        return {"ret": encode(result), "mut": changed}
    if op == "getattr":
        return {"ret": encode(getattr(target, msg["name"]))}
    if op == "setattr":
        setattr(target, msg["name"], decode(msg["value"]))
        return {"ret": None}
    if op == "getitem":
        return {"ret": encode(target[decode(msg["key"])])}
    if op == "setitem":
        target[decode(msg["key"])] = decode(msg["value"])
        return {"ret": None}
    if op == "iter":
        return {"ret": encode(iter(target))}
    if op == "next":
        return {"ret": encode(next(target))}
    if op in ("len", "bool", "str", "repr"):
        func: Any = {"len": len, "bool": bool, "str": str, "repr": repr}[op]
        return {"ret": encode(func(target))}
    raise ValueError(f"unknown operation {op!r}")


def _load_solution(code: str) -> Any:
    sys.path.insert(0, WORK)
    module = type(sys)("solution")
    module.__file__ = WORK + "/solution.py"
    sys.modules["solution"] = module
    exec(compile(code, "solution.py", "exec"), module.__dict__)
    return module


def _run_setup(setup: str) -> int:
    os.makedirs(WORK + "/.vs", exist_ok=True)
    with open(WORK + "/.vs/setup.py", "w") as fh:
        fh.write(setup)
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, WORK + "/.vs/setup.py"])
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _run_program(job: dict[str, Any]) -> None:
    """Run solution.py as a program, then send back the files asked for; exit as it did."""
    stdin_path = os.devnull
    if job.get("stdin"):
        stdin_path = WORK + "/.stdin"
        with open(stdin_path, "w") as fh:
            fh.write(job["stdin"])
    lang, built, extra = _language_program(job), None, {}
    if lang is not None:
        built = lang["compile_program"](job["lang"], WORK)
        extra["compile"] = built
        if lang["compile_failed"](built):
            _send({"files": {}, **extra})
            os._exit(0)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(stdin_path, os.O_RDONLY), 0)
        os.closerange(3, 5)
        if lang is None:
            os.execv(sys.executable, [sys.executable, WORK + "/solution.py"])
        os.setsid()
        lang["limit_run_memory"](job["lang"])
        argv = job["lang"]["run"]
        os.execvpe(argv[0], argv, lang["language_env"](job["lang"]))
    if lang is None:
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    else:
        code, timed_out, took = lang["wait_with_limit"](pid, job.get("run_timeout_s"))
        extra["program"] = {"timed_out": timed_out, "duration_s": round(took, 4)}
    cap = int(job.get("fetch_cap") or 0)
    files: dict[str, str] = {}
    for rel in job.get("fetch_files") or []:
        path = os.path.normpath(os.path.join(WORK, str(rel)))
        if not path.startswith(FETCH_ROOTS):
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read(cap + 1)
        except OSError:
            continue
        if len(data) <= cap:
            files[str(rel)] = binascii.b2a_base64(data, newline=False).decode()
    _send({"files": files, **extra})
    if code < 0:
        import signal

        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP keep their default anyway
        os.kill(os.getpid(), -code)
    os._exit(code)


def _language_program(job: dict[str, Any]) -> dict[str, Any] | None:
    """compiled.py's functions for a job in another language than Python, else None."""
    if not job.get("lang") or job["lang"].get("name") == "python":
        return None
    scope: dict[str, Any] = {"__name__": "compiled"}
    exec(compile(COMPILED_HARNESS, "compiled.py", "exec"), scope)
    return scope


def _serve_cases(job: dict[str, Any]) -> None:
    """Run solution.py once per case the judge sends; answer with what it wrote."""
    import subprocess

    argv, options = [sys.executable, WORK + "/solution.py"], {}
    lang = _language_program(job)
    if lang is not None:
        built = lang["compile_program"](job["lang"], WORK)
        if lang["compile_failed"](built):
            _send({"ready": True, "compile_failed": built})
            return
        argv = job["lang"]["run"]
        options = {"env": lang["language_env"](job["lang"]), "start_new_session": True,
                   "preexec_fn": lambda: lang["limit_run_memory"](job["lang"])}  # fmt: skip
    _send({"ready": True})
    while True:
        msg = _recv()
        answer: dict[str, Any] = {"timed_out": False}
        try:
            done = subprocess.run(
                argv,
                input=str(msg.get("stdin", "")).encode(),
                capture_output=True,
                timeout=float(msg.get("timeout_s", 2.0)),
                check=False,
                **options,
            )
            answer.update(
                stdout=done.stdout[: 4 << 20].decode(errors="replace"),
                stderr=done.stderr[-TRACEBACK_CHARS:].decode(errors="replace"),
                exit=done.returncode,
            )
        except subprocess.TimeoutExpired:
            answer.update(timed_out=True, exit=None)
        _send({"ret": answer})


def _limit_cpu(job: dict[str, Any]) -> None:
    """The candidate's own CPU-time limit (a backstop under the judge's wall-clock one)."""
    import resource

    seconds = int(float(job.get("timeout_s") or 0)) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def main() -> None:
    global _req, _resp
    _req = os.fdopen(3, "rb", buffering=0)
    _resp = os.fdopen(4, "wb", buffering=0)
    job = _recv()
    _limit_cpu(job)
    os.makedirs(WORK + "/.tmp", exist_ok=True)
    if job.get("setup"):
        code = _run_setup(job["setup"])
        if code != 0:
            _send({"setup_failed": code})
            return
    for rel, content in (job.get("files") or {}).items():
        path = os.path.normpath(os.path.join(WORK, rel))
        if path.startswith(WORK + "/"):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(binascii.a2b_base64(content or ""))
    source = (job.get("lang") or {}).get("source") or "solution.py"
    with open(WORK + "/" + os.path.basename(source), "w") as fh:
        fh.write(job["code"])
    if job["mode"] == "run":
        _run_program(job)
    if job["mode"] == "io":
        _serve_cases(job)
        return
    try:
        module = _load_solution(job["code"])
    except BaseException as exc:
        _send({"solution_error": _raised(exc)})
        return
    names = [[k, _encode_global(v)] for k, v in vars(module).items() if not k.startswith("__")]
    _send({"manifest": names, "signals": sorted(_signals)})
    while True:
        msg = _recv()
        try:
            answer = _serve_one(msg)
        except BaseException as exc:
            answer = {"raised": _raised(exc)}
        answer["signals"] = sorted(_signals)
        _send(answer)


if __name__ == "__main__":  # started as a program; in the zygote, a copy of it calls main
    main()
