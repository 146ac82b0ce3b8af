"""A request's JSON Schemas are checked against their meta-schema once per distinct schema."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from tiers import schema as schema_tier
from tiers.schema import check_schema

TOOL = {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}}}


def counting(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    checked: list[dict[str, Any]] = []
    real = schema_tier._schema_problem

    def problem(schema: dict[str, Any]) -> str | None:
        checked.append(schema)
        return real(schema)

    monkeypatch.setattr(schema_tier, "_schema_problem", problem)
    monkeypatch.setattr(schema_tier, "_SCHEMA_PROBLEMS", {})
    return checked


def test_a_schema_sent_many_times_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = counting(monkeypatch)
    for _ in range(50):
        check_schema(TOOL)
    # the same schema with its keys in another order is the same schema
    reordered = {"properties": {"tool": {"type": "string"}}, "required": ["tool"], "type": "object"}
    check_schema(reordered)
    assert len(checked) == 1


def test_an_invalid_schema_is_refused_every_time_with_where_it_is_wrong(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = counting(monkeypatch)
    bad = {"type": "object", "properties": {"tool": {"type": "strung"}}}
    for _ in range(3):
        with pytest.raises(ValueError, match="invalid JSON Schema at properties/tool/type"):
            check_schema(bad)
    assert len(checked) == 1
    check_schema(TOOL)  # a different schema gets its own check
    assert len(checked) == 2


def test_a_schema_that_is_not_plain_json_is_checked_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = counting(monkeypatch)
    from_yaml = {"type": "string", "const": date(2026, 1, 1)}  # a YAML policy's date
    check_schema(from_yaml)
    check_schema(from_yaml)
    assert len(checked) == 2
    with pytest.raises(ValueError, match="invalid JSON Schema"):
        check_schema({"type": "strung", "const": date(2026, 1, 1)})


def test_the_remembered_answers_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    counting(monkeypatch)
    monkeypatch.setattr(schema_tier, "_SCHEMA_PROBLEMS_MAX", 10)
    for n in range(25):
        check_schema({"type": "object", "maxProperties": n})
    assert len(schema_tier._SCHEMA_PROBLEMS) <= 10
