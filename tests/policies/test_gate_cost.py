"""A CEL gate's cost is bounded before it runs: too deep or too costly an expression is
refused at validation, fast, with the limit named at its field; at run time, a gate that walks
the item's data walks at most MAX_COLLECTION elements, or the item ends with the reason.

Before: six nested `map` comprehensions (a million elements) were accepted after 39 s, and the
interpreter held the GIL the whole time (the API, /healthz included, did not answer)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from support import Service

from verifier_service.policies.gate_cost import (
    MAX_COLLECTION,
    MAX_COMPREHENSION_NESTING,
    MAX_COST,
    MAX_DOCUMENT_COST,
    MAX_EXPRESSION_CHARS,
    check_cost,
)
from verifier_service.policies.gates import (
    GateCompileError,
    GateContext,
    GateEvaluationError,
    check_expr,
    compile_expr,
)
from verifier_service.policies.service import InvalidPolicyError, validate_document

TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def nested_maps(depth: int) -> str:
    """`depth` nested maps over ten elements: 10**depth elements in all."""
    body = "1"
    for level in range(depth):
        body = f"{TEN}.map(x{level}, {body})"
    return f"size({body}) > 0"


def _refusal(expr: str) -> str:
    started = time.perf_counter()
    with pytest.raises(GateCompileError) as caught:
        check_expr(expr, expect="bool", tiers=["schema"])
    assert time.perf_counter() - started < 1.0
    return caught.value.msg


def test_six_nested_maps_are_refused_fast_naming_the_limit() -> None:
    message = _refusal(nested_maps(6))
    assert f"the limit is {MAX_COMPREHENSION_NESTING}" in message
    assert "nest" in message


def test_a_comprehension_over_a_large_literal_is_refused_by_its_cost() -> None:
    big = "[" + ", ".join(["1"] * 1000) + "]"
    message = _refusal(f"{big}.map(x, [1, 2, 3, 4, 5]).size() > 0")
    assert f"the limit is {MAX_COST:,}" in message


def test_too_long_and_too_deep_expressions_are_refused() -> None:
    assert f"the limit is {MAX_EXPRESSION_CHARS}" in _refusal("1 == 1 && " * 500 + "true")
    assert "brackets nest" in _refusal("(" * 40 + "true" + ")" * 40)


@pytest.mark.parametrize(
    "gate",
    [
        "item.metadata.tags.exists(t, t == 'urgent')",
        "verdicts.all(t, verdicts[t].status == 'passed')",
        "verdicts.exists(t, verdicts[t].components.exists(c, verdicts[t].components[c] > 0.5))",
        "size(item.metadata.scores.filter(s, s > 0.5)) >= 2",
        "['a', 'b', 'c'].exists(k, k in item.metadata)",
        "verdicts['schema'].score > 0.5 && audit < 0.1",
    ],
)
def test_gates_people_write_stay_within_the_limits(gate: str) -> None:
    assert check_cost(gate).cost <= MAX_COST
    check_expr(gate, expect="bool", tiers=["schema"])


def test_the_worst_accepted_expressions_run_in_milliseconds() -> None:
    data = GateContext.build(
        kind="text",
        metadata={"a": list(range(MAX_COLLECTION)), "b": list(range(MAX_COLLECTION))},
    )
    worst = [
        "[" + ", ".join(["1"] * 40) + "].map(x, [" + ", ".join(["1"] * 40) + "]).size() > 0",
        "item.metadata.a.filter(x, x > 1).size() > 0",
        "item.metadata.a.exists(x, item.metadata.b.exists(y, y == x + 1000))",
    ]
    for expr in worst:
        compiled = compile_expr(expr, expect="bool")
        started = time.perf_counter()
        compiled.evaluate_bool(data)
        assert time.perf_counter() - started < 0.5, expr


def test_a_gate_walking_more_data_than_the_limit_fails_with_its_reason() -> None:
    gate = compile_expr("item.metadata.tags.exists(t, t == 'x')", expect="bool")
    small = GateContext.build(kind="text", metadata={"tags": ["y"] * MAX_COLLECTION})
    assert gate.evaluate_bool(small) is False
    large = GateContext.build(kind="text", metadata={"tags": ["y"] * 100_000})
    started = time.perf_counter()
    with pytest.raises(GateEvaluationError) as caught:
        gate.evaluate_bool(large)
    assert time.perf_counter() - started < 0.5
    assert "100000 elements" in str(caught.value)
    assert f"at most {MAX_COLLECTION}" in str(caught.value)
    # A gate that only looks the data up (no comprehension) reads it whatever its size.
    plain = compile_expr("'x' in item.metadata.tags", expect="bool")
    assert plain.evaluate_bool(large) is False


def test_a_policy_of_many_costly_expressions_is_refused_as_a_whole() -> None:
    costly = "[" + ", ".join(["1"] * 40) + "].map(x, [" + ", ".join(["1"] * 40) + "]).size() > 0"
    assert 20 * check_cost(costly).cost > MAX_DOCUMENT_COST  # each alone is accepted
    penalties = [{"when": costly, "value": 0.1, "reason": f"p{i}"} for i in range(20)]
    document = {
        "name": "costly",
        "ladders": {"json": [{"tier": "schema"}]},
        "reward": {"json": {"penalties": penalties}},
    }
    started = time.perf_counter()
    with pytest.raises(InvalidPolicyError) as caught:
        validate_document(document)
    assert time.perf_counter() - started < 5
    messages = [e["msg"] for e in caught.value.extra["errors"]]
    assert any("in all" in m for m in messages), messages


def test_validating_the_nested_gate_is_refused_fast_while_the_api_answers(
    live_service: Service,
) -> None:
    document = {
        "name": "nested-gate",
        "ladders": {"json": [{"tier": "schema", "gate": nested_maps(6)}]},
    }
    stop = threading.Event()
    health: list[float] = []

    def probe() -> None:
        with httpx.Client(base_url=live_service.base_url, timeout=30) as client:
            while not stop.is_set():
                started = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                health.append(time.perf_counter() - started)
                time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        time.sleep(0.3)
        with live_service.client() as client:
            started = time.perf_counter()
            response = client.post("/v1/policies/validate", json={"document": document})
            took = time.perf_counter() - started
        time.sleep(0.3)
    finally:
        stop.set()
        prober.join()
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["loc"] == "ladders.json[0].gate"
    assert f"the limit is {MAX_COMPREHENSION_NESTING}" in error["msg"]
    print(f"\nvalidation refused in {took * 1000:.0f} ms; /healthz max {max(health) * 1000:.0f} ms")
    assert took < 1.0
    assert len(health) >= 10
    assert max(health) < 1.0


def test_an_item_whose_data_is_too_large_for_a_gate_ends_with_the_reason(
    live_service: Service,
) -> None:
    name = f"tags-gate-{time.time_ns()}"
    gate = "!item.metadata.tags.exists(t, t == 'skip')"
    document = {"name": name, "ladders": {"json": [{"tier": "schema", "gate": gate}]}}
    schema = {"type": "object"}

    def item(tags: int) -> dict[str, object]:
        payload = {"tool": "search", "n": time.time_ns()}
        return {"kind": "json", "payload": payload, "reference": {"schema": schema},
                "metadata": {"tags": [f"t{i}" for i in range(tags)]}}  # fmt: skip

    with live_service.client(timeout=60) as client:
        saved = client.post("/v1/policies", json={"document": document})
        assert saved.status_code == 201, saved.text
        started = time.perf_counter()
        response = client.post(
            "/v1/rewards",
            json={"policy": name, "items": [item(3), item(MAX_COLLECTION + 1)], "wait_s": 30},
        )
        took = time.perf_counter() - started
    assert response.status_code == 200, response.text
    small, large = (i["reward"] for i in response.json()["items"])
    assert small["status"] == "scored"
    assert large["status"] == "infra_error"
    assert f"at most {MAX_COLLECTION}" in large["reason"]
    assert took < 10
