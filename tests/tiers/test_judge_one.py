"""The per-item guard every tier's batch loop uses."""

from __future__ import annotations

from tiers.base import Cost, Verdict, VerdictStatus, judge_one


def test_a_crash_on_one_item_is_an_error_verdict_with_its_message() -> None:
    def boom() -> Verdict:
        raise KeyError("atoms")

    verdict = judge_one("chem.fast", "1.0.0", boom)
    assert verdict.status == VerdictStatus.error
    assert verdict.reason == "internal_error"
    assert verdict.feedback == "chem.fast failed on this item: KeyError: 'atoms'"
    assert (verdict.tier, verdict.tier_version) == ("chem.fast", "1.0.0")


def test_cost_adds_the_cpu_a_child_process_reported() -> None:
    def busy() -> Verdict:
        sum(i * i for i in range(200_000))
        return Verdict(
            status=VerdictStatus.passed, score=1.0, tier="t", tier_version="1", cost=Cost(cpu_s=2.5)
        )

    verdict = judge_one("t", "1", busy)
    assert verdict.cost.cpu_s > 2.5
    assert 0 < verdict.cost.wall_s < 2.5
