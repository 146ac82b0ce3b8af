"""What a JSON request body is checked for before it is parsed: each scan is linear and in C
(regexes, translate, map), so a body at the size limit costs milliseconds, not its parse.

- nesting depth (`json_depth`);
- how many elements its largest top-level array holds (`largest_array`: a body of 100,000 items
  is refused before the API builds 100,000 models);
- that it is UTF-8 (`utf8_problem`, with the byte offset);
- numbers the service cannot keep (`number_problem`): 1e309 or NaN would be stored as null,
  and an integer of more than 4,300 digits is refused by Python's parser without saying where.
"""

from __future__ import annotations

import json
import math
import re
import sys
from itertools import accumulate
from typing import Any

import numpy as np

_OPENERS = frozenset(b"[{")
_CLOSERS = frozenset(b"]}")
_STRUCTURE = frozenset(b"[]{},")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _OPENERS | _CLOSERS)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STRUCTURE)
_STEP = [1 if b in _OPENERS else -1 if b in _CLOSERS else 0 for b in range(256)]
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')

#: Longest integer literal accepted: Python's own limit on converting digits to an int.
MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300


def without_strings(body: bytes) -> bytes:
    """The body with its JSON strings (keys and values) taken out."""
    return _JSON_STRING.sub(b"", body)


def json_depth(bare: bytes) -> int:
    """How deep arrays and objects nest in a JSON text taken out of its strings
    (`without_strings`)."""
    brackets = bare.translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


_STEP_ARRAY = np.array(_STEP, dtype=np.int8)


def largest_array(bare: bytes, at_least: int) -> int:
    """At most how many elements the largest array at the top two levels of a JSON text taken
    out of its strings holds (the body itself, or a value of its top object: `items`); 0 when
    it cannot reach `at_least` (there are fewer commas than that). The text must nest at most
    127 levels (`json_depth`)."""
    structure = bare.translate(None, _NOT_STRUCTURE)
    if structure.count(b",") + 1 < at_least:
        return 0
    codes = np.frombuffer(structure, dtype=np.uint8)
    depth = np.cumsum(_STEP_ARRAY[codes], dtype=np.int8)  # the depth after each byte
    commas = codes == ord(",")
    most = int(np.count_nonzero(commas & (depth == 1))) + 1 if structure[:1] == b"[" else 0
    # Containers at depth 2 follow one another: a comma there belongs to the last one opened.
    opened = (depth == 2) & ((codes == ord("[")) | (codes == ord("{")))
    is_array = codes[opened] == ord("[")
    if is_array.any():
        container = np.cumsum(opened, dtype=np.int32)[commas & (depth == 2)]
        per_container = np.bincount(container, minlength=len(is_array) + 1)[1:]
        most = max(most, int(per_container[is_array].max()) + 1)
    return most


def utf8_problem(body: bytes) -> str | None:
    """Where and why `body` is not UTF-8, or None."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"the body is not valid UTF-8: byte 0x{body[exc.start]:02x} at offset {exc.start} "
            f"({exc.reason})"
        )
    return None


# Digits as 9s, exponents as `e` without their `+`: then a number that may not fit shows as a
# run of 309 digits (1e308 is about the largest double), an exponent of three digits or more
# (`e999`), or a constant JSON does not have, each found by a plain substring search.
_NUMBERS_PLAIN = bytes.maketrans(b"012345678E", b"999999999e")
_SUSPECTS = (b"9" * 309, b"e999", b"NaN", b"Infinity")


class _Refused:
    """Stands in for a number the body must not hold, saying why."""

    def __init__(self, why: str) -> None:
        self.why = why


def _float(text: str) -> float | _Refused:
    value = float(text)
    if math.isfinite(value):
        return value
    return _Refused(
        f"the number {text[:24]} is too large for a double (it would be stored as null)"
    )


def _int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return _Refused(f"an integer of {digits} digits; the limit is {MAX_INT_DIGITS}")
    return int(text)


def _constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a JSON number")


def _where(value: Any) -> tuple[str, str] | None:
    """The location (as the API's errors write it: body.items[0].payload) and reason of the
    first refused number in a parsed body."""
    stack: list[tuple[str, Any]] = [("body", value)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, _Refused):
            return loc, node.why
        if isinstance(node, dict):
            stack.extend((f"{loc}.{k}", v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((f"{loc}[{i}]", v) for i, v in reversed(list(enumerate(node))))
    return None


def number_problem(body: bytes, bare: bytes) -> tuple[str, str] | None:
    """The location and reason of the first number in a UTF-8 JSON body (`bare`: the same
    without its strings) that cannot be kept as sent (not finite as a double, NaN, an integer
    too long to read), or None."""
    plain = bare.translate(_NUMBERS_PLAIN, b"+")
    if not any(suspect in plain for suspect in _SUSPECTS):
        return None  # almost every body: no second parse
    try:
        parsed = json.loads(body, parse_float=_float, parse_int=_int, parse_constant=_constant)
    except ValueError:  # not JSON at all: the route's parser says where
        return None
    return _where(parsed)
