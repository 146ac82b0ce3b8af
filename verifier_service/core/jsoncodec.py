"""JSON for the database's JSON columns: orjson, several times faster than the standard
library on the rows a batch writes and reads (items, verdicts, ledger details, events).

What orjson cannot encode (an integer beyond 64 bits, a type it does not know) goes through
the standard library as before; a stored value orjson cannot read (NaN, written by the
standard library before this module) is read by it too. orjson writes a float NaN or infinity
as null, as PostgreSQL's JSON type requires; the tiers and scoring keep such values out anyway.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:
        return json.dumps(value)


def loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
