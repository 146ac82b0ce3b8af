"""CEL gates: each escalation style on realistic verdicts, and save-time type checking."""

from __future__ import annotations

import time

import pytest

from tiers.base import Verdict, VerdictStatus
from verifier_service.policies.gates import (
    GateCompileError,
    GateContext,
    GateEvaluationError,
    audit_draw,
    check_expr,
    compile_expr,
    decide_step,
    select_top,
)
from verifier_service.policies.loader import (
    EXAMPLES_DIR,
    PolicyValidationError,
    load_policy_file,
    parse_policy,
)

KNOWN_TIERS = {"schema", "chem.fast", "chem.surrogate", "chem.dft", "code.sandbox", "human"}


def _verdict(
    tier: str,
    status: str = "passed",
    score: float | None = None,
    uncertainty: float | None = None,
    **components: float,
) -> Verdict:
    return Verdict(
        status=VerdictStatus(status),
        score=score,
        uncertainty=uncertainty,
        components=components,
        tier=tier,
        tier_version="1",
    )


def _ctx(*verdicts: Verdict, audit: float = 0.5, **metadata: object) -> GateContext:
    return GateContext.build(
        kind="molecule", verdicts={v.tier: v for v in verdicts}, metadata=metadata, audit=audit
    )


FAST_OK = _verdict("chem.fast", score=0.8, qed=0.71, sa_score=2.4, alerts_pains=0.0)
FAST_BAD = _verdict("chem.fast", status="failed", score=0.0)


def test_require_pass() -> None:
    gate = compile_expr("verdicts['chem.fast'].status == 'passed'", expect="bool")
    assert gate.evaluate_bool(_ctx(FAST_OK)) is True
    assert gate.evaluate_bool(_ctx(FAST_BAD)) is False


def test_a_status_gate_gives_each_item_its_own_answer_though_it_is_remembered() -> None:
    # Expressions that read only statuses remember their value per status read; the answers
    # must still follow each item's own verdicts, in any order, and a missing tier still fails.
    gate = compile_expr(
        "'chem.surrogate' in verdicts || verdicts['chem.fast'].status == 'passed'", expect="bool"
    )
    assert gate.discrete == (("chem.fast", "status"), ("chem.surrogate", ""))
    surrogate = _verdict("chem.surrogate", score=0.5)
    for _ in range(3):
        assert gate.evaluate_bool(_ctx(FAST_BAD)) is False
        assert gate.evaluate_bool(_ctx(FAST_OK)) is True
        assert gate.evaluate_bool(_ctx(FAST_BAD, surrogate)) is True
        with pytest.raises(GateEvaluationError, match=r"chem\.fast"):
            gate.evaluate_bool(_ctx(surrogate.model_copy(update={"tier": "other"})))
    has_score = compile_expr("verdicts['chem.surrogate'].has_score", expect="bool")
    assert has_score.evaluate_bool(_ctx(surrogate)) is True
    no_score = _verdict("chem.surrogate", score=float("nan"))
    assert has_score.evaluate_bool(_ctx(no_score)) is False


def test_a_status_gate_builds_a_cel_environment_once_per_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[object] = []
    real = GateContext.cel_env

    def counted(self: GateContext, *args: object, **kwargs: object) -> object:
        built.append(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GateContext, "cel_env", counted)
    gate = compile_expr("verdicts['schema'].status != 'failed'", expect="bool")
    for i in range(50):
        status = ("passed", "failed")[i % 2]
        assert gate.evaluate_bool(_ctx(_verdict("schema", status, score=i / 50))) is (i % 2 == 0)
    assert len(built) == 2
    # A score, a component or another variable may differ for every item: not remembered.
    for expr in (
        "verdicts['schema'].score > 0.5",
        "verdicts['schema'].components.x > 0.5",
        "verdicts['schema'].status == 'passed' && audit < 0.5",
        "verdicts.exists(t, verdicts[t].status == 'failed')",
        # one `verdicts` both a key test and a status read; the other a score
        "verdicts['x'].score > 0.5 || 'a' in verdicts['schema'].status",
    ):
        assert compile_expr(expr, expect="bool").discrete is None


def test_threshold_on_a_component() -> None:
    gate = compile_expr("verdicts['chem.fast'].components.qed > 0.6", expect="bool")
    assert gate.evaluate_bool(_ctx(FAST_OK)) is True
    low = _verdict("chem.fast", score=0.5, qed=0.4)
    assert gate.evaluate_bool(_ctx(low)) is False


@pytest.mark.parametrize(
    ("score", "uncertainty", "climbs"),
    [(0.78, 0.05, True), (0.60, 0.05, False), (0.60, 0.15, True), (0.95, 0.01, False)],
)
def test_uncertainty_band(score: float, uncertainty: float, climbs: bool) -> None:
    gate = compile_expr(
        "abs(verdicts['chem.surrogate'].score - 0.8)"
        " < 2.0 * verdicts['chem.surrogate'].uncertainty",
        expect="bool",
    )
    surrogate = _verdict("chem.surrogate", score=score, uncertainty=uncertainty)
    assert gate.evaluate_bool(_ctx(FAST_OK, surrogate)) is climbs


def test_missing_score_reads_zero_with_has_score_false() -> None:
    errored = _verdict("chem.surrogate", status="error")
    ctx = _ctx(FAST_OK, errored)
    assert (
        compile_expr("verdicts['chem.surrogate'].has_score", expect="bool").evaluate_bool(ctx)
        is False
    )
    assert (
        compile_expr("verdicts['chem.surrogate'].score", expect="number").evaluate_number(ctx)
        == 0.0
    )
    nan = _verdict("chem.surrogate", score=float("nan"))
    has = compile_expr("verdicts['chem.surrogate'].has_score", expect="bool")
    assert has.evaluate_bool(_ctx(nan)) is False


def test_select_top_k_and_fraction() -> None:
    scores = [0.2, 0.9, 0.5, 0.9, 0.1, 0.7, 0.3, 0.8]
    assert select_top(scores, top_k=2) == [False, True, False, True, False, False, False, False]
    # 0.25 of 8 = 2; ties broken by index: the first 0.9 wins a tie for the last place.
    assert select_top(scores, top_fraction=0.25) == select_top(scores, top_k=2)
    assert select_top([0.5, 0.5, 0.5], top_k=1) == [True, False, False]
    assert sum(select_top([0.1] * 5, top_fraction=0.3)) == 2  # 1.5 rounds up
    assert sum(select_top([0.1] * 3, top_fraction=0.01)) == 1  # at least one
    assert select_top([], top_k=3) == []
    with pytest.raises(ValueError, match="exactly one"):
        select_top(scores, top_k=1, top_fraction=0.5)


def test_group_top_fraction_picks_the_best_quarter_of_a_grpo_group() -> None:
    scores = [0.31, 0.92, 0.55, 0.74, 0.12, 0.88, 0.47, 0.66]
    contexts = [
        _ctx(FAST_OK, _verdict("chem.surrogate", score=s, uncertainty=0.02)) for s in scores
    ]
    decisions = decide_step(
        contexts,
        gate="verdicts['chem.surrogate'].status == 'passed'",
        group_by="verdicts['chem.surrogate'].score",
        top_fraction=0.25,
    )
    assert [d.climb for d in decisions] == [s in (0.92, 0.88) for s in scores]
    assert decisions[1].rank == 0
    assert decisions[5].rank == 1
    assert {d.reason for d in decisions if not d.climb} == {"not_top"}


def test_group_rank_is_visible_to_the_gate() -> None:
    contexts = [_ctx(_verdict("chem.surrogate", score=s)) for s in (0.1, 0.9, 0.5)]
    decisions = decide_step(
        contexts,
        gate="group.rank == 0 && group.size == 3",
        group_by="verdicts['chem.surrogate'].score",
        top_k=3,
    )
    assert [d.climb for d in decisions] == [False, True, False]


def test_group_selection_ranks_only_gate_passers() -> None:
    contexts = [
        _ctx(_verdict("chem.surrogate", status=st, score=s))
        for st, s in [("failed", 0.99), ("passed", 0.5), ("passed", 0.7)]
    ]
    decisions = decide_step(
        contexts,
        gate="verdicts['chem.surrogate'].status == 'passed'",
        group_by="verdicts['chem.surrogate'].score",
        top_k=1,
    )
    assert [(d.climb, d.reason) for d in decisions] == [
        (False, "gate_false"),
        (False, "not_top"),
        (True, "gate"),
    ]


def test_audit_draw_is_deterministic_and_uniform() -> None:
    assert audit_draw("abc", 1) == audit_draw("abc", 1)
    assert audit_draw("abc", 1) != audit_draw("abc", 2)
    draws = [audit_draw(f"item-{i}", 1) for i in range(10_000)]
    assert all(0.0 <= d < 1.0 for d in draws)
    assert 0.45 < sum(draws) / len(draws) < 0.55


def test_audit_sampling_sends_about_the_configured_fraction_regardless_of_gate() -> None:
    contexts = [_ctx(FAST_BAD, audit=audit_draw(f"mol-{i}", 1)) for i in range(10_000)]
    decisions = decide_step(
        contexts, gate="verdicts['chem.fast'].status == 'passed'", audit_fraction=0.05
    )
    audited = sum(d.climb for d in decisions)
    assert {d.reason for d in decisions if d.climb} == {"audit"}
    assert 400 <= audited <= 600  # 5% of 10k, +-~4.5 sigma
    again = decide_step(
        contexts, gate="verdicts['chem.fast'].status == 'passed'", audit_fraction=0.05
    )
    assert again == decisions


def test_audit_variable_in_a_gate() -> None:
    gate = compile_expr("audit < 0.1", expect="bool")
    assert gate.evaluate_bool(_ctx(audit=0.05)) is True
    assert gate.evaluate_bool(_ctx(audit=0.5)) is False


def test_item_metadata_is_readable() -> None:
    gate = compile_expr("has(item.metadata.round) && item.metadata.round > 2", expect="bool")
    assert gate.evaluate_bool(_ctx(round=3)) is True
    assert gate.evaluate_bool(_ctx()) is False
    check_expr("item.metadata.tag == 'x' && item.kind == 'molecule'", expect="bool", tiers=[])


def test_runtime_error_names_the_expression() -> None:
    gate = compile_expr("verdicts['chem.fast'].components.qed > 0.5", expect="bool")
    no_qed = _verdict("chem.fast", score=0.3)
    with pytest.raises(GateEvaluationError, match=r"components\.qed"):
        gate.evaluate_bool(_ctx(no_qed))


@pytest.mark.parametrize(
    ("expr", "tiers", "message"),
    [
        ("verdicts['chem.fast'].score >", ["chem.fast"], "syntax error at line 1"),
        (
            "verdict['chem.fast'].score > 0.5",
            ["chem.fast"],
            "unknown variable 'verdict' (did you mean 'verdicts'?)",
        ),
        ("verdicts['chem.fast'].score", ["chem.fast"], "must evaluate to a bool"),
        ("verdicts['chem.fast'].status > 1", ["chem.fast"], "type error"),
        ("verdicts['chem.dft'].score > 0.5", ["chem.fast"], "refers to tier 'chem.dft'"),
        ("verdicts['chem.fast'].sore > 0.5", ["chem.fast"], "not there"),
        ("sqrt(audit) > 0.5", [], "unknown function 'sqrt'"),
        ("", [], "empty expression"),
    ],
)
def test_type_check_failures(expr: str, tiers: list[str], message: str) -> None:
    with pytest.raises(GateCompileError) as info:
        check_expr(expr, expect="bool", tiers=tiers)
    assert message in info.value.msg


def test_number_expressions_are_checked_as_numbers() -> None:
    check_expr("verdicts['chem.fast'].score * 2.0", expect="number", tiers=["chem.fast"])
    with pytest.raises(GateCompileError, match="a number"):
        check_expr("verdicts['chem.fast'].status", expect="number", tiers=["chem.fast"])


def test_comprehensions_are_not_unknown_variables() -> None:
    compiled = check_expr(
        "verdicts.all(t, verdicts[t].status == 'passed')", expect="bool", tiers=["chem.fast"]
    )
    assert compiled.evaluate_bool(_ctx(FAST_OK)) is True
    assert compiled.evaluate_bool(_ctx(FAST_OK, FAST_BAD)) is False


def _policy_errors(ladder_yaml: str) -> dict[str, str]:
    with pytest.raises(PolicyValidationError) as info:
        parse_policy("name: t\nladders:\n  molecule:\n" + ladder_yaml, known_tiers=KNOWN_TIERS)
    return {e["loc"]: e["msg"] for e in info.value.errors}


def test_policy_rejects_a_gate_on_a_later_tier() -> None:
    errors = _policy_errors(
        "    - tier: chem.fast\n"
        "    - tier: chem.surrogate\n"
        "      gate: \"verdicts['chem.dft'].score > 0.5\"\n"
        "    - tier: chem.dft\n"
    )
    assert "refers to tier 'chem.dft', which is not earlier" in errors["ladders.molecule[1].gate"]


def test_policy_rejects_verdicts_in_the_first_gate() -> None:
    errors = _policy_errors('    - tier: chem.fast\n      gate: "size(verdicts) == 0"\n')
    assert "first step" in errors["ladders.molecule[0].gate"]
    parse_policy(
        'name: t\nladders:\n  molecule:\n    - tier: chem.fast\n      gate: "audit < 0.5"\n',
        known_tiers=KNOWN_TIERS,
    )


def test_policy_error_locations_for_gates_and_groups() -> None:
    errors = _policy_errors(
        "    - tier: chem.fast\n"
        "    - tier: chem.surrogate\n"
        "      gate: \"verdict['chem.fast'].score > 0.5\"\n"
        "      group: {top_k: 2, by: \"verdicts['chem.fast'].status\"}\n"
    )
    assert (
        errors["ladders.molecule[1].gate"]
        == "unknown variable 'verdict' (did you mean 'verdicts'?)"
    )
    assert "a number" in errors["ladders.molecule[1].group.by"]


def test_group_needs_exactly_one_of_k_and_fraction() -> None:
    errors = _policy_errors(
        "    - tier: chem.fast\n"
        "    - tier: chem.surrogate\n"
        "      group: {top_k: 2, top_fraction: 0.5, by: \"verdicts['chem.fast'].score\"}\n"
    )
    assert "exactly one" in errors["ladders.molecule[1].group"]


def test_gate_evaluation_speed() -> None:
    gate = compile_expr(
        "verdicts['chem.surrogate'].status == 'passed' && abs(verdicts['chem.surrogate'].score "
        "- 0.8) < 2.0 * verdicts['chem.surrogate'].uncertainty",
        expect="bool",
    )
    surrogate = _verdict("chem.surrogate", score=0.78, uncertainty=0.05, a=1.0)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        gate.evaluate_bool(_ctx(FAST_OK, surrogate))  # a fresh context per item
    per_item = (time.perf_counter() - start) / n
    ctx = _ctx(FAST_OK, surrogate)
    start = time.perf_counter()
    for _ in range(n):
        gate.evaluate_bool(ctx)
    per_eval = (time.perf_counter() - start) / n
    # Generous bounds for a shared CI machine; typical: ~10-20 us per item, ~2 us per eval.
    assert per_item < 500e-6
    assert per_eval < 100e-6


def test_drug_likeness_dft_step_combines_band_and_group() -> None:
    doc = load_policy_file(EXAMPLES_DIR / "drug-likeness.yaml", known_tiers=KNOWN_TIERS)
    step = doc.ladder_for("molecule")[2]
    assert step.group is not None
    # (surrogate score, uncertainty): confident-high, uncertain-near-threshold, confident-low...
    group = [(0.95, 0.01), (0.70, 0.08), (0.50, 0.02), (0.85, 0.02), (0.60, 0.01),
             (0.90, 0.03), (0.40, 0.05), (0.30, 0.01)]  # fmt: skip
    contexts = [_ctx(FAST_OK, _verdict("chem.surrogate", score=s, uncertainty=u)) for s, u in group]
    decisions = decide_step(
        contexts, gate=step.gate, group_by=step.group.by,
        top_k=step.group.top_k, top_fraction=step.group.top_fraction,
    )  # fmt: skip
    # Gate passes 0.95, 0.70 (band), 0.85, 0.90; the top quarter of those 4 is 1: 0.95.
    assert [d.climb for d in decisions] == [True] + [False] * 7
    assert [d.reason for d in decisions][:4] == ["gate", "not_top", "gate_false", "not_top"]
