"""The `schema` tier: JSON Schema validation of structured actions and tool calls."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache, partial
from typing import Any, ClassVar

import re2
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from referencing.exceptions import Unresolvable

from tiers.base import Candidate, Verdict, VerdictStatus, judge_one, stable_json
from tiers.schema_bounds import (
    VALIDATION_TIME_LIMIT_S,
    SchemaTooCostly,
    bounded,
    reference_loop,
    regex_problem,
    time_limit,
)

MAX_REPORTED_ERRORS = 20


class SchemaConfig(BaseModel):
    """Policy config of the schema tier."""

    model_config = ConfigDict(extra="forbid")

    schema_: dict[str, Any] | None = Field(
        default=None,
        alias="schema",
        description="Schema used when the item brings none in reference.schema.",
    )


def check_schema(schema: Any) -> None:
    """Raise ValueError saying what is wrong if `schema` is not a valid JSON Schema.

    A batch of tool calls usually brings one schema hundreds of times, and checking it
    against its meta-schema costs a third of a millisecond: the answer is kept per schema
    text (a schema that is not plain JSON is checked every time)."""
    if not isinstance(schema, dict):
        raise ValueError(f"a JSON Schema must be an object, got {type(schema).__name__}")
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        problem = _schema_problem(schema)
    else:
        problem = _known_schema_problem(text, schema)
    if problem is not None:
        raise ValueError(problem)


def _schema_problem(schema: dict[str, Any]) -> str | None:
    cls = validator_for(schema, default=Draft202012Validator)
    # The class's check_schema, with the `regex` format checked by RE2.
    meta = validator_for(cls.META_SCHEMA, default=cls)
    checker = meta(cls.META_SCHEMA, format_checker=bounded(cls).FORMAT_CHECKER)
    for exc in checker.iter_errors(schema):
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        message = exc.message
        if exc.validator == "format" and isinstance(exc.instance, str):
            message = regex_problem(exc.instance) or message
        return f"invalid JSON Schema at {where}: {message}"
    loop = reference_loop(schema)
    if loop is not None:
        return (
            f"invalid JSON Schema at {loop}: it refers back to itself without descending into "
            "the value (a `$ref` loop: validating anything against it never ends)"
        )
    return None


_SCHEMA_PROBLEMS: dict[str, str | None] = {}
_SCHEMA_PROBLEMS_MAX = 1024


def _known_schema_problem(text: str, schema: dict[str, Any]) -> str | None:
    """`_schema_problem` of a schema given with its JSON text, remembered by that text."""
    try:
        return _SCHEMA_PROBLEMS[text]
    except KeyError:
        pass
    problem = _schema_problem(schema)
    if len(_SCHEMA_PROBLEMS) >= _SCHEMA_PROBLEMS_MAX:
        _SCHEMA_PROBLEMS.clear()  # many distinct schemas: start over rather than grow
    _SCHEMA_PROBLEMS[text] = problem
    return problem


@lru_cache(maxsize=1024)
def _validator(schema_text: str) -> Validator:
    schema = json.loads(schema_text)
    cls = bounded(validator_for(schema, default=Draft202012Validator))
    validator: Validator = cls(schema)
    return validator


def _json_path(path: Sequence[Any]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class SchemaTier:
    """Validates `json` candidates against the item's (or the policy's) JSON Schema."""

    name: ClassVar[str] = "schema"
    version: ClassVar[str] = "1"
    queue: ClassVar[str] = "tier.fast"
    cost_class: ClassVar[float] = 0.0001
    kinds: ClassVar[frozenset[str]] = frozenset({"json"})
    #: Its canonical payload is the candidate's JSON text: a cache key costs no more to derive
    #: than to look up, so the per-process key memo does not keep this tier's keys.
    cheap_canonical_payload: ClassVar[bool] = True

    def validate_config(self, config: Mapping[str, Any]) -> None:
        try:
            parsed = SchemaConfig.model_validate(dict(config))
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        if parsed.schema_ is not None:
            check_schema(parsed.schema_)

    def canonical_payload(self, item: Candidate) -> str:
        schema = (item.reference or {}).get("schema")
        return stable_json({"payload": item.payload, "schema": schema})

    def verify_batch(self, items: Sequence[Candidate], config: Mapping[str, Any]) -> list[Verdict]:
        default_schema = config.get("schema")
        return [
            judge_one(self.name, self.version, partial(self._verify, item, default_schema))
            for item in items
        ]

    def _verdict(self, **fields: Any) -> Verdict:
        return Verdict(tier=self.name, tier_version=self.version, **fields)

    def _unusable_schema(self, from_item: bool, reason: str, feedback: str) -> Verdict:
        if not from_item:
            return self._verdict(status=VerdictStatus.error, reason=reason, feedback=feedback)
        return self._verdict(
            status=VerdictStatus.failed,
            score=0.0,
            components={"errors": 1.0},
            reason=reason,
            feedback=feedback,
        )

    def _verify(self, item: Candidate, default_schema: Any) -> Verdict:
        schema = (item.reference or {}).get("schema", default_schema)
        if schema is None:
            return self._verdict(
                status=VerdictStatus.error,
                reason="no_schema",
                feedback="no JSON Schema: give reference.schema on the item "
                "or `schema` in the policy's config of the schema tier",
            )
        # The API checks an item's schema before it takes it; one found unusable only here (sent
        # before a check was added, or a loop the checks' probes did not reach) is the trainer's
        # input, a scored failure that says why. The policy's schema is the operator's: an error.
        from_item = "schema" in (item.reference or {})
        try:
            check_schema(schema)
        except ValueError as exc:
            return self._unusable_schema(from_item, "invalid_schema", str(exc))
        validator = _validator(stable_json(schema))
        try:
            with time_limit():
                errors = sorted(
                    validator.iter_errors(item.payload), key=lambda e: [str(p) for p in e.path]
                )
        except SchemaTooCostly:
            return self._unusable_schema(
                from_item,
                "schema_too_costly",
                f"the JSON Schema could not check this payload within {VALIDATION_TIME_LIMIT_S} s",
            )
        except RecursionError:
            return self._unusable_schema(
                from_item,
                "invalid_schema",
                "the JSON Schema refers to itself without end (a `$ref` loop)",
            )
        except (re2.error, Unresolvable) as exc:
            return self._unusable_schema(
                from_item, "invalid_schema", f"the JSON Schema cannot be used: {exc}"[:1000]
            )
        if not errors:
            return self._verdict(status=VerdictStatus.passed, score=1.0, components={"errors": 0.0})
        lines = [
            f"at {_json_path(list(e.absolute_path))}: {e.message}"
            for e in errors[:MAX_REPORTED_ERRORS]
        ]
        if len(errors) > MAX_REPORTED_ERRORS:
            lines.append(f"... and {len(errors) - MAX_REPORTED_ERRORS} more errors")
        return self._verdict(
            status=VerdictStatus.failed,
            score=0.0,
            components={"errors": float(len(errors))},
            reason="schema_violation",
            feedback="\n".join(lines),
        )
