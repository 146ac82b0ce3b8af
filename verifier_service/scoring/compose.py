"""Compose a reward from verdicts: components -> transforms -> aggregator, gates, penalties.

A component whose tier has no usable verdict (the item did not climb that far, the tier erred,
or the value is NaN/inf) is *missing*: it is left out and the weights renormalise over what is
present, so a lower-fidelity reward is still well defined and says which parts it lacks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tiers.base import Verdict, VerdictStatus
from verifier_service.policies.gates import GateContext, compile_expr
from verifier_service.policies.schemas import ComponentSpec, RewardSpec, TrajectorySpec
from verifier_service.scoring.aggregators import aggregate
from verifier_service.scoring.transforms import apply_transform

# Statuses whose numbers mean something about the item; error/pending verdicts carry none.
_JUDGED = frozenset({VerdictStatus.passed, VerdictStatus.failed})


@dataclass
class ComposedReward:
    """One item's reward and how it was made.

    ``value`` is None only when no component could be computed and no hard gate failed: the
    caller reports that as pending or infra_error, never as 0.
    """

    value: float | None
    components: dict[str, float] = field(default_factory=dict)  # transformed, by component name
    raw: dict[str, float] = field(default_factory=dict)  # before transforms
    gated_by: str | None = None  # reason of the hard gate that zeroed the reward
    penalties: list[str] = field(default_factory=list)  # reasons of applied penalties
    missing: list[str] = field(default_factory=list)  # components with no usable verdict
    skipped_checks: list[str] = field(default_factory=list)  # gates/penalties on absent tiers
    provenance: list[str] = field(default_factory=list)  # tiers whose verdicts were used
    fidelity: str | None = None  # highest tier (in ladder order) that contributed


def _raw_value(spec: ComponentSpec, verdict: Verdict | None) -> float | None:
    if verdict is None or verdict.status not in _JUDGED:
        return None
    raw = verdict.score if spec.component == "score" else verdict.components.get(spec.component)
    if raw is None:
        return None
    raw = float(raw)
    return raw if math.isfinite(raw) else None


def compose_reward(
    spec: RewardSpec,
    verdicts: Mapping[str, Verdict],
    ctx: GateContext,
    *,
    order: Sequence[str] | None = None,
) -> ComposedReward:
    """The reward of one item from its verdicts (tier -> verdict).

    ``order`` is the ladder's tier order, used for ``fidelity`` and for the default reward (the
    score of the highest tier that scored); without it the mapping's order is taken as the
    ladder's. ``ctx`` is what hard gates and penalties read. A hard gate or penalty that names
    a tier with no verdict is skipped (listed in ``skipped_checks``). Raises
    ``GateEvaluationError`` when an expression fails on present data.
    """
    ladder = list(order) if order is not None else list(verdicts)
    rank = {tier: i for i, tier in enumerate(ladder)}
    out = ComposedReward(value=None)
    used: set[str] = set()

    if spec.components:
        values: list[float] = []
        weights: list[float] = []
        for comp in spec.components:
            raw = _raw_value(comp, verdicts.get(comp.tier))
            if raw is None:
                out.missing.append(comp.name)
                continue
            value = apply_transform(comp.transform, raw)
            out.raw[comp.name] = raw
            out.components[comp.name] = value
            if comp.weight > 0:
                values.append(value)
                weights.append(comp.weight)
                used.add(comp.tier)
        if values:
            out.value = aggregate(spec.aggregator, values, weights)
    else:
        for tier in reversed(ladder):
            verdict = verdicts.get(tier)
            score = _raw_value(ComponentSpec(name=tier, tier=tier), verdict)
            if score is not None:
                out.raw[tier] = score
                out.value = out.components[tier] = min(max(score, 0.0), 1.0)
                used.add(tier)
                break

    for gate in spec.hard_gates:
        expr = compile_expr(gate.when, expect="bool")
        if not expr.named_tiers <= verdicts.keys():
            out.skipped_checks.append(gate.reason)
        elif not expr.evaluate_bool(ctx):
            out.gated_by = gate.reason
            out.value = 0.0
            used |= expr.named_tiers
            break
        else:
            used |= expr.named_tiers

    if out.gated_by is None:
        total = 0.0
        for penalty in spec.penalties:
            expr = compile_expr(penalty.when, expect="bool")
            if not expr.named_tiers <= verdicts.keys():
                out.skipped_checks.append(penalty.reason)
            elif expr.evaluate_bool(ctx):
                out.penalties.append(penalty.reason)
                total += penalty.value
                used |= expr.named_tiers
        if total and out.value is not None:
            out.value = max(0.0, out.value - total)

    out.provenance = sorted(used, key=lambda t: (rank.get(t, len(rank)), t))
    out.fidelity = out.provenance[-1] if out.provenance else None
    return out


def combine_trajectory(
    spec: TrajectorySpec, step_values: Sequence[float | None], outcome: float | None
) -> float | None:
    """One number for a trajectory from its per-step rewards and its outcome reward.

    Steps without a reward (None or non-finite) are left out; ``discounted`` weighs step t by
    ``discount**t`` (t counted over all steps) and normalises. The step aggregate and the
    outcome combine as a weighted mean over whichever of the two exists; None if neither.
    """
    present = [
        (t, float(v)) for t, v in enumerate(step_values) if v is not None and math.isfinite(v)
    ]
    steps: float | None = None
    if present:
        vals = [v for _, v in present]
        if spec.step_aggregator == "mean":
            steps = aggregate("weighted_mean", vals, [1.0] * len(vals))
        elif spec.step_aggregator == "min":
            steps = min(vals)
        elif spec.step_aggregator == "last":
            steps = vals[-1]
        else:
            t0 = present[0][0]  # weights relative to the first step, so they never underflow
            steps = aggregate(
                "weighted_mean", vals, [spec.discount ** (t - t0) for t, _ in present]
            )
    if outcome is not None and not math.isfinite(outcome):
        outcome = None
    parts = [
        (value, weight)
        for value, weight in ((steps, spec.step_weight), (outcome, spec.outcome_weight))
        if value is not None and weight > 0
    ]
    if not parts:
        return None
    return aggregate("weighted_mean", [v for v, _ in parts], [w for _, w in parts])
