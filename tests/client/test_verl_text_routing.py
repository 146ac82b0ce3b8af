"""verl's text data sources reach the shipped policies that score them: GSM8K's `#### N` under
`gsm8k`, MATH's `\\boxed{}` under `math` (through the live service)."""

from __future__ import annotations

from typing import Any

from verifier_service.client.verl import compute_score, compute_score_batch, policy_for


def test_data_sources_map_to_policies_as_verl_routes_them() -> None:
    assert policy_for("openai/gsm8k", "default") == "gsm8k"
    assert policy_for("lighteval/MATH", "default") == "math"
    assert policy_for("numina_olympiads", "default") == "math"
    assert policy_for("aime_2024", "default") == "math"
    assert policy_for("my-own-set", "default") == "default"


def test_each_sample_is_scored_under_its_sources_policy(live_service: Any) -> None:
    outs = compute_score_batch(
        ["openai/gsm8k", "lighteval/MATH", "aime_2024", "openai/gsm8k"],
        ["She pays 3 * 4 = 12.\n#### 12", "So it is \\boxed{\\sqrt{8}}", "\\boxed{204}", "#### 13"],
        ["12", "2\\sqrt{2}", "204", "12"],
        kind="text",
        base_url=live_service.base_url,
        api_key=live_service.api_key,
    )
    # Under `math` the first would wait for people (no \boxed{}); under `gsm8k` the second
    # would be no number at all: each scored 1.0 only under its own source's policy.
    assert [o["score"] for o in outs] == [1.0, 1.0, 1.0, 0.0]
    assert all(o["scored"] == 1.0 for o in outs)
    assert [set(o) for o in outs] == [set(outs[0])] * 4


def test_a_named_policy_overrides_the_routing(live_service: Any) -> None:
    (out,) = compute_score_batch(
        ["lighteval/MATH"],
        ["\\boxed{\\sqrt{8}}"],
        ["2\\sqrt{2}"],
        kind="text",
        policy="gsm8k",
        base_url=live_service.base_url,
        api_key=live_service.api_key,
    )
    assert out["score"] == 0.0  # numeric: a radical is no number


def test_single_form_routes_too(live_service: Any) -> None:
    out = compute_score(
        "openai/gsm8k",
        "#### 1,234",
        "1234",
        kind="text",
        base_url=live_service.base_url,
        api_key=live_service.api_key,
    )
    assert out["score"] == 1.0
