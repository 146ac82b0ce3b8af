"""A trainer's JSON Schema cannot stall the process that checks it (issue 36, items 1 and 4).

Its regexes run on RE2 (linear time), a validation stops at its time limit, and a schema that
loops or fans out is refused when it is checked, with where and why.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tiers.base import Candidate, VerdictStatus
from tiers.schema import SchemaTier, check_schema
from tiers.schema_bounds import VALIDATION_TIME_LIMIT_S

#: 26 `a`s and a `!` against `^(a+)+$`: Python's `re` backtracks 2^26 ways (seconds; each
#: extra `a` doubles it, and 40 of them froze the API), RE2 answers at once.
HOSTILE = "a" * 26 + "!"


def _verdict(payload: dict[str, Any], schema: dict[str, Any]) -> Any:
    item = Candidate(kind="json", payload=payload, reference={"schema": schema})
    started = time.monotonic()
    [verdict] = SchemaTier().verify_batch([item], {})
    return verdict, time.monotonic() - started


def test_a_backtracking_pattern_is_answered_at_once() -> None:
    schema = {"properties": {"q": {"pattern": "^(a+)+$"}}}
    check_schema(schema)  # valid: RE2 runs it in linear time
    verdict, elapsed = _verdict({"q": HOSTILE}, schema)
    assert elapsed < 0.5, elapsed
    assert verdict.status == VerdictStatus.failed
    assert "$.q" in verdict.feedback
    assert "does not match" in verdict.feedback


def test_pattern_properties_and_unevaluated_properties_use_re2_too() -> None:
    # jsonschema matches property names in three more places (patternProperties,
    # additionalProperties, unevaluatedProperties): each must be on RE2 as well.
    schema = {"patternProperties": {"^(a+)+$": {"type": "integer"}}}
    for extra in ({"additionalProperties": False}, {"unevaluatedProperties": False}):
        verdict, elapsed = _verdict({HOSTILE: 1}, {**schema, **extra})
        assert elapsed < 0.5, (extra, elapsed)
        assert verdict.status == VerdictStatus.failed, extra
    verdict, elapsed = _verdict({"aaaa": "x"}, schema)
    assert elapsed < 0.5
    assert "'x' is not of type 'integer'" in verdict.feedback


def test_a_draft_7_schema_uses_re2() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"q": {"pattern": "^(a+)+$"}},
    }
    verdict, elapsed = _verdict({"q": HOSTILE}, schema)
    assert elapsed < 0.5, elapsed
    assert verdict.status == VerdictStatus.failed


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"properties": {"q": {"pattern": "^(?=a)b"}}}, "properties/q/pattern"),
        ({"patternProperties": {"(a)\\1": {}}}, "patternProperties"),
        ({"properties": {"q": {"pattern": "(unclosed"}}}, "properties/q/pattern"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_with_where_and_why(
    schema: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError, match="RE2 syntax") as refused:
        check_schema(schema)
    assert f"invalid JSON Schema at {where}" in str(refused.value)


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        # passed the meta-schema, then every item ended infra_error (RecursionError)
        ({"$ref": "#"}, "$ref"),
        (
            {
                "$defs": {
                    "a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/b"}]},
                    "b": {"allOf": [{"not": {"$ref": "#/$defs/a"}}]},
                },
                "properties": {"x": {"$ref": "#/$defs/a"}},
            },
            "/$ref",
        ),
        (
            {
                "$id": "https://example.com/root",
                "$defs": {"t": {"$id": "tool", "if": {"$ref": "tool"}}},
            },
            "$defs/t/if/$ref",
        ),
    ],
)
def test_a_reference_loop_is_refused_when_checked(schema: dict[str, Any], where: str) -> None:
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"a `\$ref` loop") as refused:
        check_schema(schema)
    assert where in str(refused.value)
    assert time.monotonic() - started < 0.5


def test_recursion_that_descends_into_the_value_is_a_valid_schema() -> None:
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"items": {"$ref": "#"}}},
    }
    check_schema(tree)
    verdict, _ = _verdict({"name": "a", "children": [{"name": "b", "children": [{}]}]}, tree)
    assert verdict.status == VerdictStatus.passed


def _fan_out(levels: int) -> dict[str, Any]:
    """A small schema whose references branch in two at each level, ending in `false`:
    2^levels evaluations for any value."""
    defs = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"not": {}}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def test_references_that_fan_out_stop_at_the_time_limit_as_a_scored_failure() -> None:
    # Checking a schema is linear in its size (it runs on the API's event loop); what a
    # validation costs shows when it runs, and stops at the time limit.
    started = time.monotonic()
    check_schema(_fan_out(40))
    assert time.monotonic() - started < 0.5
    verdict, elapsed = _verdict({"a": 1}, _fan_out(40))
    assert elapsed < VALIDATION_TIME_LIMIT_S + 2, elapsed
    assert verdict.status == VerdictStatus.failed
    assert verdict.score == 0.0
    assert verdict.reason == "schema_too_costly"
    assert "within" in verdict.feedback


def test_a_loop_sent_before_the_check_is_a_scored_failure_at_verify_time() -> None:
    verdict, _ = _verdict({"a": 1}, {"properties": {"a": {"$ref": "#"}}, "allOf": [{"$ref": "#"}]})
    assert verdict.status == VerdictStatus.failed
    assert verdict.score == 0.0
    assert verdict.reason == "invalid_schema"
    assert "loop" in verdict.feedback


def test_unique_items_over_many_objects_is_linear() -> None:
    # jsonschema compares every pair of objects: 12.5 million comparisons for 5,000.
    schema = {"properties": {"rows": {"uniqueItems": True}}}
    rows = [{"id": i, "tags": [i, str(i)]} for i in range(5000)]
    verdict, _ = _verdict({"rows": rows}, schema)
    # Passed, not schema_too_costly: the check ended within its 1 s deadline (the pairwise
    # comparison ran into it). No timed assert of our own: a loaded machine is not a slow check.
    assert verdict.status == VerdictStatus.passed
    verdict, _ = _verdict({"rows": [*rows, {"tags": [4, "4"], "id": 4.0}]}, schema)
    assert verdict.status == VerdictStatus.failed  # 4.0 == 4 and key order plays no part
    verdict, _ = _verdict({"rows": [1, True]}, schema)
    assert verdict.status == VerdictStatus.passed  # true is not 1 in JSON Schema


def test_a_lone_surrogate_is_matched_or_refused_never_a_crash() -> None:
    # JSON can carry "\ud800"; RE2 reads UTF-8, which cannot hold it (it ended internal_error).
    schema = {
        "properties": {"q": {"pattern": "^a"}},
        "patternProperties": {"^x": {"type": "string"}},
    }
    verdict, _ = _verdict({"q": "a\ud800", "x\ud800": "s"}, schema)
    assert verdict.status == VerdictStatus.passed
    verdict, _ = _verdict({"x\ud800": 1}, schema)
    assert verdict.status == VerdictStatus.failed
    with pytest.raises(ValueError, match="lone surrogate"):
        check_schema({"properties": {"q": {"pattern": "x\ud800"}}})
