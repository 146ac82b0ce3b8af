"""Composing rewards from verdicts with the shipped policies: gates, penalties, missing tiers,
trajectories."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiers.base import Verdict, VerdictStatus
from verifier_service.policies.gates import GateContext, GateEvaluationError
from verifier_service.policies.loader import load_policy_file, parse_policy
from verifier_service.policies.schemas import PolicyDocument, RewardSpec, TrajectorySpec
from verifier_service.scoring.compose import combine_trajectory, compose_reward

KNOWN_TIERS = {"schema", "chem.fast", "chem.surrogate", "chem.dft", "code.sandbox", "human"}
POLICIES = Path(__file__).resolve().parents[2] / "policies"


def _policy(name: str) -> PolicyDocument:
    return load_policy_file(POLICIES / f"{name}.yaml", known_tiers=KNOWN_TIERS)


def _v(tier: str, status: str = "passed", score: float | None = None, unc: float | None = None,
       **components: float) -> Verdict:  # fmt: skip
    return Verdict(
        status=VerdictStatus(status), score=score, uncertainty=unc, components=components,
        tier=tier, tier_version="1",
    )  # fmt: skip


def _compose(
    spec: RewardSpec, *verdicts: Verdict, kind: str = "molecule", order: list[str] | None = None
):  # type: ignore[no-untyped-def]
    by_tier = {v.tier: v for v in verdicts}
    ctx = GateContext.build(kind=kind, verdicts=by_tier)
    return compose_reward(spec, by_tier, ctx, order=order)


ASPIRIN_FAST = _v(
    "chem.fast", score=0.55, qed=0.55, sa_score=1.6, logp=1.3, mw=180.2, tpsa=63.6,
    hbd=1.0, hba=3.0, alerts_pains=0.0,
)  # fmt: skip


def test_default_policy_molecule_reward_is_qed() -> None:
    spec = _policy("default").reward_for("molecule")
    reward = _compose(spec, ASPIRIN_FAST)
    assert reward.value == pytest.approx(0.55)
    assert reward.components == {"qed": pytest.approx(0.55)}
    assert reward.fidelity == "chem.fast"
    assert reward.provenance == ["chem.fast"]


def test_hard_gate_zeroes_an_invalid_molecule_with_a_reason() -> None:
    spec = _policy("default").reward_for("molecule")
    invalid = _v("chem.fast", status="failed", score=0.0)
    reward = _compose(spec, invalid)
    assert reward.value == 0.0
    assert reward.gated_by == "invalid molecule"
    assert reward.missing == ["qed"]


def test_drug_likeness_low_fidelity_reward_renormalises_over_present_components() -> None:
    spec = _policy("drug-likeness").reward_for("molecule")
    reward = _compose(spec, ASPIRIN_FAST, order=["chem.fast", "chem.surrogate", "chem.dft"])
    assert reward.missing == ["surrogate", "dft"]
    assert set(reward.components) == {"qed", "synthesizability", "logp"}
    c = reward.components
    expected = math.exp(
        (2 * math.log(c["qed"]) + math.log(c["synthesizability"]) + math.log(c["logp"])) / 4
    )
    assert reward.value == pytest.approx(expected)
    assert reward.fidelity == "chem.fast"


def test_drug_likeness_full_ladder_uses_every_tier() -> None:
    spec = _policy("drug-likeness").reward_for("molecule")
    order = ["chem.fast", "chem.surrogate", "chem.dft"]
    reward = _compose(
        spec, ASPIRIN_FAST, _v("chem.surrogate", score=0.8, unc=0.05), _v("chem.dft", score=0.9),
        order=order,
    )  # fmt: skip
    assert reward.missing == []
    assert reward.provenance == order
    assert reward.fidelity == "chem.dft"


def test_pains_penalty_is_subtracted_and_recorded() -> None:
    spec = _policy("drug-likeness").reward_for("molecule")
    clean = _compose(spec, ASPIRIN_FAST)
    flagged_fast = _v("chem.fast", **{**ASPIRIN_FAST.components, "alerts_pains": 1.0})
    flagged = _compose(spec, flagged_fast)
    assert flagged.penalties == ["PAINS substructure alert"]
    assert clean.value is not None
    assert flagged.value is not None
    assert flagged.value == pytest.approx(max(0.0, clean.value - 0.2))


def test_penalty_is_clipped_at_zero() -> None:
    spec = RewardSpec.model_validate(
        {"penalties": [{"when": "true", "value": 5.0, "reason": "always"}]}
    )
    reward = _compose(spec, _v("schema", score=0.4), kind="json")
    assert reward.value == 0.0
    assert reward.penalties == ["always"]


def test_checks_on_absent_tiers_are_skipped_not_failed() -> None:
    spec = RewardSpec.model_validate(
        {"hard_gates": [{"when": "verdicts['chem.dft'].score > 0.5", "reason": "dft"}]}
    )
    reward = _compose(spec, ASPIRIN_FAST)
    assert reward.gated_by is None
    assert reward.skipped_checks == ["dft"]


def test_runtime_error_in_a_check_is_raised() -> None:
    spec = RewardSpec.model_validate(
        {"penalties": [{"when": "verdicts['chem.fast'].components.nope > 0.0", "value": 1.0,
                        "reason": "x"}]}
    )  # fmt: skip
    with pytest.raises(GateEvaluationError):
        _compose(spec, ASPIRIN_FAST)


def test_non_finite_raw_value_is_missing_not_zero() -> None:
    spec = RewardSpec.model_validate(
        {"components": [
            {"name": "qed", "tier": "chem.fast", "component": "qed"},
            {"name": "sa", "tier": "chem.fast", "component": "sa_score",
             "transform": {"type": "linear", "low": 10, "high": 1}},
        ]}
    )  # fmt: skip
    reward = _compose(spec, _v("chem.fast", qed=float("nan"), sa_score=5.5))
    assert reward.missing == ["qed"]
    assert reward.value == pytest.approx(0.5)
    nothing = _compose(spec, _v("chem.fast", qed=float("inf"), sa_score=float("nan")))
    assert nothing.value is None
    assert nothing.missing == ["qed", "sa"]


def test_error_verdict_counts_as_missing() -> None:
    spec = _policy("code").reward_for("code")
    reward = _compose(spec, _v("code.sandbox", status="error", score=0.0), kind="code")
    assert reward.value is None
    assert reward.missing == ["tests_passed"]


def test_code_reward_is_fraction_of_tests() -> None:
    spec = _policy("code").reward_for("code")
    reward = _compose(spec, _v("code.sandbox", status="failed", score=0.75), kind="code")
    assert reward.value == pytest.approx(0.75)


def test_empty_components_take_the_highest_tier_that_scored() -> None:
    doc = parse_policy(
        {"name": "p", "ladders": {"molecule": [{"tier": "chem.fast"}, {"tier": "chem.surrogate"},
                                               {"tier": "chem.dft"}]}},
        known_tiers=KNOWN_TIERS,
    )  # fmt: skip
    spec = doc.reward_for("molecule")
    order = [s.tier for s in doc.ladder_for("molecule")]
    reward = _compose(
        spec, _v("chem.fast", score=0.3), _v("chem.surrogate", score=0.6),
        _v("chem.dft", status="error"), order=order,
    )  # fmt: skip
    assert reward.value == pytest.approx(0.6)
    assert reward.fidelity == "chem.surrogate"


@pytest.mark.parametrize(
    ("aggregator", "expected"),
    [("weighted_mean", 0.5), ("weighted_geometric_mean", 0.4), ("product", 0.16), ("min", 0.2)],
)
def test_each_aggregator_through_a_reward_spec(aggregator: str, expected: float) -> None:
    spec = RewardSpec.model_validate(
        {"aggregator": aggregator, "components": [
            {"name": "a", "tier": "chem.fast", "component": "a"},
            {"name": "b", "tier": "chem.fast", "component": "b"},
        ]}
    )  # fmt: skip
    assert _compose(spec, _v("chem.fast", a=0.2, b=0.8)).value == pytest.approx(expected)


def test_tool_call_trajectory_per_step_and_outcome() -> None:
    doc = _policy("tool-call")
    spec = doc.reward_for("json")
    steps = [
        _compose(spec, _v("schema", score=1.0), kind="json"),
        _compose(spec, _v("schema", status="failed", score=0.0), kind="json"),
        _compose(spec, _v("schema", score=1.0), kind="json"),
    ]
    step_values = [s.value for s in steps]
    assert step_values == [1.0, 0.0, 1.0]
    assert steps[1].gated_by == "tool call does not match its schema"
    outcome = _compose(spec, _v("schema", score=1.0), kind="json").value
    total = combine_trajectory(doc.trajectory, step_values, outcome)
    discounted = (1.0 + 0.0 + 0.81) / (1.0 + 0.9 + 0.81)
    assert total == pytest.approx(0.3 * discounted + 0.7 * 1.0)


@pytest.mark.parametrize(
    ("aggregator", "expected_steps"),
    [("mean", 0.5), ("min", 0.2), ("last", 0.8), ("discounted", (0.2 + 0.25 * 0.8) / 1.25)],
)
def test_step_aggregators(aggregator: str, expected_steps: float) -> None:
    spec = TrajectorySpec(
        step_weight=1.0, outcome_weight=0.0, step_aggregator=aggregator, discount=0.5
    )  # type: ignore[arg-type]
    # The None step is left out; `discounted` still counts its place: weights 1 and 0.5**2.
    assert combine_trajectory(spec, [0.2, None, 0.8], None) == pytest.approx(expected_steps)


def test_trajectory_missing_parts() -> None:
    spec = TrajectorySpec(step_weight=0.5, outcome_weight=0.5)
    assert combine_trajectory(spec, [], None) is None
    assert combine_trajectory(spec, [None, float("nan")], None) is None
    assert combine_trajectory(spec, [], 0.4) == pytest.approx(0.4)
    assert combine_trajectory(spec, [0.2, 0.4], None) == pytest.approx(0.3)
    assert combine_trajectory(spec, [0.2, 0.4], 1.0) == pytest.approx(0.65)


def test_long_discounted_trajectory_does_not_underflow() -> None:
    spec = TrajectorySpec(step_weight=1.0, outcome_weight=0.0, step_aggregator="discounted",
                          discount=0.1)  # fmt: skip
    values: list[float | None] = [None] * 2000 + [0.7]
    assert combine_trajectory(spec, values, None) == pytest.approx(0.7)


@given(
    steps=st.lists(st.one_of(st.none(), st.floats(min_value=0, max_value=1)), max_size=20),
    outcome=st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
    agg=st.sampled_from(["mean", "min", "last", "discounted"]),
)
def test_trajectory_reward_stays_in_unit_interval(
    steps: list[float | None], outcome: float | None, agg: str
) -> None:
    spec = TrajectorySpec(step_aggregator=agg, discount=0.9)  # type: ignore[arg-type]
    result = combine_trajectory(spec, steps, outcome)
    if all(s is None for s in steps) and outcome is None:
        assert result is None
    else:
        assert result is not None
        assert 0.0 <= result <= 1.0
