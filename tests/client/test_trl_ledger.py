"""The TRL reward's per-step figures from job cost reports (the shape GET /v1/jobs/{id}/cost
answers; the live path is tests/trainer/test_grpo_ladder.py)."""

from __future__ import annotations

import math

from verifier_service.client.trl import ledger_metrics


def _tier(calls: int, hits: int, escalations: int, units: float) -> dict[str, float]:
    return {"calls": calls, "cache_hits": hits, "audits": 0, "escalations": escalations,
            "cost_units": units, "cpu_s": 0.0, "wall_s": 0.0}  # fmt: skip


def test_two_jobs_add_up_and_escalation_is_the_share_past_the_first_tier() -> None:
    one = {
        "items": 8,
        "cost_units": 0.105,
        "every_tier_cost_units": 0.808,
        "tiers": {"chem.fast": _tier(5, 3, 0, 0.005), "chem.surrogate": _tier(1, 1, 2, 0.1)},
    }
    two = {"items": 8, "cost_units": 0.008, "every_tier_cost_units": 0.808,
           "tiers": {"chem.fast": _tier(8, 0, 0, 0.008)}}  # fmt: skip
    m = ledger_metrics([one, two])
    assert m["items"] == 16
    assert math.isclose(m["cost_units"], 0.113)
    assert math.isclose(m["cost_units_per_item"], 0.113 / 16)
    assert math.isclose(m["cost_vs_every_tier"], 0.113 / 1.616)
    assert m["cache_hits"] == 4
    assert m["escalated_frac"] == 2 / 16
    assert m["escalated_frac/chem.surrogate"] == 2 / 16
    assert m["escalated_frac/chem.fast"] == 0
    assert m["calls/chem.fast"] == 13
    # Each tier's own charge: what a lab step cost, apart from the cheap tiers below it.
    assert math.isclose(m["cost_units/chem.fast"], 0.013)
    assert math.isclose(m["cost_units/chem.surrogate"], 0.1)
    assert m["cache_hits/chem.surrogate"] == 1


def test_no_jobs_no_division_by_zero() -> None:
    m = ledger_metrics([])
    assert m["items"] == 0
    assert m["escalated_frac"] == 0
    assert m["cost_vs_every_tier"] == 0
