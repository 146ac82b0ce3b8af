"""JSON Schema validation that a hostile schema cannot stall: RE2 regexes and a time limit.

A trainer sends its own schemas (`reference.schema`), so a schema is hostile input. Python's
`re` backtracks: `^(a+)+$` against 40 `a`s and a `!` runs for minutes inside one C call that
holds the GIL, so no other thread of the process (the API's event loop included) runs and
SIGTERM waits. Every regex a schema holds (`pattern`, `patternProperties`, the `regex` format)
runs on RE2 instead, in time linear in its input; a pattern RE2 does not take (lookaround,
backreferences) is an invalid schema. Everything else a validation does is Python code that
checks a deadline at each keyword, so a schema whose references fan out exponentially stops at
`VALIDATION_TIME_LIMIT_S` instead of running for ever.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import jsonschema._keywords
import jsonschema._legacy_keywords
import jsonschema._utils
import re2
import referencing.jsonschema
from jsonschema import FormatChecker, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing import Registry, Specification
from referencing.exceptions import Unresolvable

#: The longest one schema validation may run (a check at the API or a verdict in a worker);
#: honest tool-call schemas take well under a millisecond.
VALIDATION_TIME_LIMIT_S = 1.0

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # an invalid pattern is the caller's answer, not a log line


class SchemaTooCostly(Exception):
    """A validation ran past its time limit."""


@lru_cache(maxsize=4096)
def compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2 (re2.error, with RE2's reason, when RE2 cannot take it)."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except UnicodeEncodeError:
        raise re2.error("a lone surrogate (\\ud800-\\udfff) is no character") from None


def regex_problem(pattern: str) -> str | None:
    """Why RE2 refuses `pattern`, or None."""
    try:
        compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        return (
            f"{pattern!r} is not a regular expression this service runs ({text}; patterns are "
            "RE2 syntax: no lookaround or backreferences)"
        )
    return None


class _Re2Search:
    """What jsonschema's keyword modules call `re` for (`re.search` only), on RE2."""

    error = re2.error

    @staticmethod
    def search(pattern: str, string: str) -> Any:
        try:
            return compiled(pattern).search(string)
        except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"): RE2 reads UTF-8
            return compiled(pattern).search(string.encode(errors="replace").decode())


# jsonschema has no setting for its regex engine: `pattern`, `patternProperties`,
# `additionalProperties` and `unevaluatedProperties` (every draft) call `re.search` of these
# three modules. tests/tiers/test_schema_bounds.py fails if an upgrade moves those calls.
for _module in (jsonschema._keywords, jsonschema._utils, jsonschema._legacy_keywords):
    _module.re = _Re2Search  # type: ignore[attr-defined]


_DEADLINE = threading.local()


@contextmanager
def time_limit(seconds: float = VALIDATION_TIME_LIMIT_S) -> Iterator[None]:
    """Validations of this thread inside the block raise SchemaTooCostly after `seconds`."""
    previous = getattr(_DEADLINE, "at", None)
    _DEADLINE.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _DEADLINE.at = previous


def _check_deadline() -> None:
    at = getattr(_DEADLINE, "at", None)
    if at is not None and time.monotonic() > at:
        raise SchemaTooCostly(f"validating took longer than {VALIDATION_TIME_LIMIT_S} s")


Keyword = Callable[[Validator, Any, Any, dict[str, Any]], Any]


def _timed(keyword: Keyword) -> Keyword:
    def timed(validator: Validator, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        _check_deadline()
        for error in keyword(validator, value, instance, schema) or ():
            _check_deadline()
            yield error

    return timed


def _number_key(value: Any) -> Any:
    """A form of a JSON value that is equal for values JSON Schema calls equal (1 and 1.0),
    and hashable."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("n", int(value) if float(value).is_integer() else value)
    if isinstance(value, list):
        return ("a", tuple(_number_key(v) for v in value))
    if isinstance(value, dict):
        return ("o", tuple(sorted((k, _number_key(v)) for k, v in value.items())))
    return ("?", json.dumps(value, sort_keys=True, default=repr))


def _unique_items(validator: Validator, unique: Any, instance: Any, _: dict[str, Any]) -> Any:
    # jsonschema's own check compares every pair of objects: hours for 100,000 of them.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for index, element in enumerate(instance):
        if index % 256 == 0:
            _check_deadline()
        key = _number_key(element)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements"[:500])
            return
        seen.add(key)


def _regex_format(instance: object) -> bool:
    if isinstance(instance, str):
        compiled(instance)
    return True


# Keywords that apply a subschema to the same value: a chain of these that comes back to where it
# started never ends (`{"$ref": "#"}`); keywords that descend into the value's parts end with it.
_SAME_VALUE_ONE = ("not", "if", "then", "else")
_SAME_VALUE_MANY = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_MAP = ("dependentSchemas", "dependencies")
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")

_Edge = tuple[Any, Any, str]


def _same_value_edges(
    node: dict[str, Any], resolver: Any, spec: Specification[Any], path: str
) -> Iterator[_Edge]:
    for keyword in _REFERENCES:
        ref = node.get(keyword)
        if isinstance(ref, str):
            try:
                resolved = resolver.lookup(ref)
            except Unresolvable:
                continue  # found at verify time, a scored failure that names it
            yield resolved.contents, resolved.resolver, f"{path}/{keyword}"
    children: list[tuple[Any, str]] = [(node.get(k), f"{path}/{k}") for k in _SAME_VALUE_ONE]
    for keyword in _SAME_VALUE_MANY:
        if isinstance(node.get(keyword), list):
            children += [(c, f"{path}/{keyword}/{i}") for i, c in enumerate(node[keyword])]
    for keyword in _SAME_VALUE_MAP:
        if isinstance(node.get(keyword), dict):
            children += [(c, f"{path}/{keyword}/{k}") for k, c in node[keyword].items()]
    for child, where in children:
        if isinstance(child, dict):
            yield child, resolver.in_subresource(spec.create_resource(child)), where


def _subschemas(node: Any, resolver: Any, spec: Specification[Any], path: str) -> Iterator[_Edge]:
    """Every object in a schema document, with the resolver of its place (its `$id`s)."""
    stack = [(node, resolver, path)]
    while stack:
        node, resolver, path = stack.pop()
        if isinstance(node, dict):
            resolver = resolver.in_subresource(spec.create_resource(node))
            yield node, resolver, path
            stack.extend((v, resolver, f"{path}/{k}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, resolver, f"{path}/{i}") for i, v in enumerate(node))


def reference_loop(schema: dict[str, Any]) -> str | None:
    """Where a schema's references come back to a subschema without descending into the value
    (validating anything against it would never end), or None. Linear in the schema's size."""
    spec = referencing.jsonschema.specification_with(
        str(schema.get("$schema", "")), default=referencing.jsonschema.DRAFT202012
    )
    # Only the schema's own references: one to elsewhere is not followed (nor a loop through it).
    root = Registry().resolver_with_root(spec.create_resource(schema))
    done: set[int] = set()
    for start, resolver, path in _subschemas(schema, root, spec, ""):
        if id(start) in done:
            continue
        open_ids = {id(start)}
        stack = [(start, _same_value_edges(start, resolver, spec, path))]
        while stack:
            node, edges = stack[-1]
            edge = next(edges, None)
            if edge is None:
                stack.pop()
                open_ids.discard(id(node))
                done.add(id(node))
                continue
            child, child_resolver, where = edge
            if id(child) in open_ids:
                return where.lstrip("/") or "(root)"
            if id(child) not in done:
                open_ids.add(id(child))
                stack.append((child, _same_value_edges(child, child_resolver, spec, where)))
    return None


@lru_cache(maxsize=16)
def bounded(cls: type[Validator]) -> type[Validator]:
    """`cls` (a draft's validator class) with its keywords under the time limit, a linear
    `uniqueItems`, and the `regex` format checked by RE2."""
    keywords = {name: _timed(keyword) for name, keyword in cls.VALIDATORS.items()}
    if "uniqueItems" in keywords:
        keywords["uniqueItems"] = _timed(_unique_items)
    formats = FormatChecker(formats=())
    formats.checkers = dict(cls.FORMAT_CHECKER.checkers)
    formats.checks("regex", raises=re2.error)(_regex_format)
    bounded_cls: type[Validator] = extend(  # type: ignore[no-untyped-call]
        cls, keywords, format_checker=formats
    )
    return bounded_cls
