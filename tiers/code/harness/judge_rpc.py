"""The judge's side of the calls into the candidate's process (runs in the test runner).

The tests run here, under the judge's uid, where the candidate's code cannot read or change
them. The solution's names are proxies: calling one sends plain data to the candidate's process
(harness/candidate.py) and decodes the answer into values of builtin types made here, so a
comparison in a test runs the judge's own `==` on plain values. An object that is not plain
data stays in the candidate's process as a handle: its methods, items, length and iteration
are served by the candidate, but comparing or hashing it raises OpaqueValueError, and the
verdict says so, instead of letting the candidate's object decide.
The runner executes this text in the test runner's globals before the test program.
"""

from __future__ import annotations

import binascii
import builtins
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MONITOR: set[str] = set()  # hack-monitor signals seen by the judge (and reported by the candidate)
_RPC = {"req": -1, "resp": -1, "gone": False}
_SAFE_BASES = {
    name: obj
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, Exception)
}
_EXC_CLASSES: dict[tuple[str, str], type] = {}


class OpaqueValueError(Exception):
    """A test compared a value the judge cannot decode as plain data."""


class CandidateGoneError(Exception):
    """The candidate's process ended (exited early, crashed or was killed)."""


class TestCallbackError(Exception):
    """A test passed the candidate something that cannot cross to its process."""


def connect(req_fd: int, resp_fd: int) -> None:
    _RPC["req"], _RPC["resp"] = req_fd, resp_fd


def _read_exact(size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(int(_RPC["resp"]), size - len(data))
        if not chunk:
            _RPC["gone"] = True
            MONITOR.add("exited_early")
            raise CandidateGoneError("the candidate's process ended before the tests did")
        data += chunk
    return data


def receive() -> dict[str, Any]:
    if _RPC["gone"]:
        raise CandidateGoneError("the candidate's process ended before the tests did")
    size = int.from_bytes(_read_exact(4), "big")
    if size > 64 * 1024 * 1024:
        raise CandidateGoneError("the candidate sent an oversized answer")
    msg = json.loads(_read_exact(size))
    if not isinstance(msg, dict):
        raise CandidateGoneError("the candidate sent a malformed answer")
    for signal in msg.get("signals") or []:
        MONITOR.add("candidate:" + str(signal)[:40])
    return msg


def send(obj: dict[str, Any]) -> None:
    if _RPC["gone"]:
        raise CandidateGoneError("the candidate's process ended before the tests did")
    data = json.dumps(obj).encode()
    try:
        os.write(int(_RPC["req"]), len(data).to_bytes(4, "big") + data)
    except BrokenPipeError:
        _RPC["gone"] = True
        MONITOR.add("exited_early")
        raise CandidateGoneError("the candidate's process ended before the tests did") from None


def exception_class(qualname: str, base: str) -> type:
    """The judge's class for a candidate exception: builtin ones are the builtins themselves;
    others a class made here under the nearest builtin Exception (never a skip, exit or other
    class that could change how a test ends)."""
    safe = _SAFE_BASES.get(base, Exception)
    if qualname == base and qualname in _SAFE_BASES:
        return safe
    key = (qualname, safe.__name__)
    if key not in _EXC_CLASSES:
        _EXC_CLASSES[key] = type(qualname.rpartition(".")[2], (safe,), {"__module__": "solution"})
    return _EXC_CLASSES[key]


class Record:
    """A dataclass instance or enum member of the candidate's, as plain data: equal to another
    when the class name and the fields are equal (what a generated __eq__ compares)."""

    __slots__ = ("fields", "handle", "kind")

    def __init__(self, kind: str, fields: tuple[tuple[str, Any], ...], handle: Any = None) -> None:
        self.kind = kind
        self.fields = fields
        self.handle = handle  # the candidate's object, passed back when a test passes this on

    def __eq__(self, other: object) -> bool:
        if type(other) is not Record:
            return NotImplemented
        return self.kind == other.kind and self.fields == other.fields

    def __hash__(self) -> int:
        return hash((self.kind, self.fields))

    def __getattr__(self, name: str) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        raise AttributeError(name)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields)
        return f"{self.kind}({inner})"


def decode(value: Any) -> Any:
    """Judge-side values of builtin types from the candidate's plain data."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is list:
        return [decode(v) for v in value]
    if type(value) is not dict or len(value) < 1:
        raise CandidateGoneError("the candidate sent a malformed value")
    if "$h" in value:
        if "exc" in value:
            return exception_class(str(value["exc"][0]), str(value["exc"][1]))
        name = str(value.get("module"))
        if name.partition(".")[0] in getattr(sys, "stdlib_module_names", ()):
            try:
                return __import__(name)  # the judge's own copy of a standard module
            except ImportError:
                pass
        return Handle(int(value["$h"]), str(value.get("type")))
    tag, body = next(iter(value.items()))
    if tag == "$t":
        return tuple(decode(v) for v in body)
    if tag == "$d":
        return {decode(k): decode(v) for k, v in body}
    if tag in ("$s", "$fs"):
        return (set if tag == "$s" else frozenset)(decode(v) for v in body)
    if tag in ("$b", "$ba"):
        data = binascii.a2b_base64(str(body))
        return data if tag == "$b" else bytearray(data)
    if tag == "$f":
        return float(str(body))
    if tag == "$c":
        return complex(float(decode(body[0])), float(decode(body[1])))
    if tag == "$r":
        return range(int(body[0]), int(body[1]), int(body[2]))
    if tag == "$e":
        return Record(str(body[0]), (("name", str(body[1])),))
    if tag == "$dc":
        fields = tuple((str(k), decode(v)) for k, v in value["f"])
        return Record(str(body), fields, value.get("h"))
    if tag == "$num":
        import decimal
        import fractions

        make = decimal.Decimal if body[0] == "Decimal" else fractions.Fraction
        return make(str(body[1]))
    raise CandidateGoneError(f"the candidate sent an unknown tag {tag!r}")


def encode(value: Any, callbacks: dict[int, Any]) -> Any:
    """A test's value as plain data for the candidate (test functions become callbacks)."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if value == value and abs(value) != float("inf") else {"$f": repr(value)}
    if kind is list:
        return [encode(v, callbacks) for v in value]
    if kind is tuple:
        return {"$t": [encode(v, callbacks) for v in value]}
    if kind is dict:
        return {"$d": [[encode(k, callbacks), encode(v, callbacks)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"$s" if kind is set else "$fs": [encode(v, callbacks) for v in value]}
    if kind in (bytes, bytearray):
        text = binascii.b2a_base64(bytes(value), newline=False).decode()
        return {"$b" if kind is bytes else "$ba": text}
    if kind is complex:
        return {"$c": [value.real, value.imag]}
    if kind is range:
        return {"$r": [value.start, value.stop, value.step]}
    if kind is Handle:
        return {"$h": value._vs_id}
    if kind is Record and value.handle is not None:
        return {"$h": value.handle}
    if kind is Record:
        return {"$dc": value.kind, "f": [[k, encode(v, callbacks)] for k, v in value.fields]}
    if callable(value):
        callbacks[id(value)] = value
        return {"$cb": id(value)}
    raise TestCallbackError(f"a {kind.__name__} of the tests cannot be passed to the candidate")


def request(msg: dict[str, Any], callbacks: dict[int, Any] | None = None) -> Any:
    """Send one operation; serve the candidate's calls of test callbacks; return the value."""
    send(msg)
    while True:
        answer = receive()
        if "cb" in answer and callbacks is not None and answer["cb"] in callbacks:
            func = callbacks[answer["cb"]]
            try:
                args = [decode(a) for a in answer.get("args") or []]
                kwargs = {str(k): decode(v) for k, v in answer.get("kwargs") or []}
                reply: dict[str, Any] = {"ret": encode(func(*args, **kwargs), callbacks)}
            except Exception as exc:
                reply = {"raised": type(exc).__name__}
            send(reply)
            continue
        if "raised" in answer:
            info = answer["raised"]
            klass = exception_class(str(info.get("type")), str(info.get("base")))
            args = []
            for arg in info.get("args") or []:
                try:
                    args.append(decode(arg))
                except CandidateGoneError:
                    args.append(str(arg))
            raised = klass(*args)
            if info.get("errno") is not None and isinstance(raised, OSError):
                raised.errno = int(info["errno"])
            raised.__notes__ = ["raised in the candidate's code:\n" + str(info.get("traceback"))]
            raise raised
        if "ret" not in answer:
            raise CandidateGoneError("the candidate sent a malformed answer")
        return answer


def _opaque(self: Handle, *_: Any) -> Any:
    MONITOR.add("opaque_compare")
    raise OpaqueValueError(
        f"the candidate returned a {self._vs_type} that is not plain data; the judge does not "
        "let the candidate's own code decide a comparison"
    )


class Handle:
    """An object that stays in the candidate's process."""

    __slots__ = ("_vs_id", "_vs_type")

    def __init__(self, key: int, type_name: str) -> None:
        object.__setattr__(self, "_vs_id", key)
        object.__setattr__(self, "_vs_type", type_name)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _opaque

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        callbacks: dict[int, Any] = {}
        plain = [encode(a, callbacks) for a in args]
        named = [[k, encode(v, callbacks)] for k, v in kwargs.items()]
        answer = request(
            {"op": "call", "h": self._vs_id, "args": plain, "kwargs": named}, callbacks
        )
        for index, new in answer.get("mut") or []:
            _update_in_place(args[int(index)], decode(new))
        return decode(answer["ret"])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return decode(request({"op": "getattr", "h": self._vs_id, "name": name})["ret"])

    def __setattr__(self, name: str, value: Any) -> None:
        request({"op": "setattr", "h": self._vs_id, "name": name, "value": encode(value, {})})

    def __getitem__(self, key: Any) -> Any:
        return decode(request({"op": "getitem", "h": self._vs_id, "key": encode(key, {})})["ret"])

    def __setitem__(self, key: Any, value: Any) -> None:
        msg = {
            "op": "setitem",
            "h": self._vs_id,
            "key": encode(key, {}),
            "value": encode(value, {}),
        }
        request(msg)

    def __contains__(self, value: Any) -> bool:
        # `expected in obj` would let the candidate's object decide on the expected value.
        return bool(_opaque(self))

    def __iter__(self) -> Any:
        return decode(request({"op": "iter", "h": self._vs_id})["ret"])

    def __next__(self) -> Any:
        return decode(request({"op": "next", "h": self._vs_id})["ret"])

    def _plain(self, op: str, kind: type) -> Any:
        value = decode(request({"op": op, "h": self._vs_id})["ret"])
        if type(value) is not kind:
            raise OpaqueValueError(f"{op}() of a {self._vs_type} gave a {type(value).__name__}")
        return value

    def __len__(self) -> int:
        return int(self._plain("len", int))

    def __bool__(self) -> bool:
        return bool(self._plain("bool", bool))

    def __str__(self) -> str:
        return str(self._plain("str", str))

    def __repr__(self) -> str:
        return f"<{self._vs_type} of the candidate>"


def _update_in_place(target: Any, new: Any) -> None:
    if type(target) in (list, bytearray) and type(new) is type(target):
        target[:] = new
    elif type(target) in (dict, set) and type(new) is type(target):
        target.clear()
        target.update(new)


def start_candidate(job: dict[str, Any]) -> dict[str, Any]:
    """Hand the candidate its job; return its namespace of proxies, or what went wrong."""
    send(job)
    answer = receive()
    if "manifest" not in answer:
        return answer
    names = {}
    for name, value in answer["manifest"]:
        try:
            names[str(name)] = decode(value)
        except CandidateGoneError:
            continue
    return {"names": names}
