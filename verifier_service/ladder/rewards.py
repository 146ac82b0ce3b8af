"""Rewards from verdicts: an item's own reward, and a trajectory's from its steps' rewards.

Every branch ends in a Reward with a status: scored (the policy's output was judged, however
badly), pending (waiting on people), or infra_error (our fault, with the reason). Never a bare 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiers.base import VerdictStatus, charged_units
from tiers.registry import get_tier
from verifier_service.ladder.models import Item, VerdictRecord
from verifier_service.ladder.repository import to_verdict
from verifier_service.ladder.schemas import Reward, RewardCost, RewardStatus
from verifier_service.ladder.states import Stop, StopKind
from verifier_service.policies.gates import GateContext, GateEvaluationError
from verifier_service.policies.schemas import PolicyDocument
from verifier_service.scoring.compose import combine_trajectory, compose_reward


def _unscored(
    status: RewardStatus,
    reason: str,
    records: Sequence[VerdictRecord],
    cost: RewardCost,
    fidelity: str | None = None,
) -> Reward:
    return Reward(
        value=None,
        status=status,
        reason=reason,
        fidelity=fidelity,
        provenance=[r.id for r in records],
        cost=cost,
    )


def leaf_reward(
    doc: PolicyDocument,
    item: Item,
    records: Sequence[VerdictRecord],
    stop: Stop,
    context: GateContext,
    fallback: str | None = None,
) -> Reward:
    """An item's reward from its verdicts (in ladder order) and why it stopped climbing.

    `fallback` overrides the policy's `deadline_fallback` for this item (a deferred tier's own
    `on_deadline`): "infra_error", or anything else for the best lower-tier reward.
    """
    cost = RewardCost(
        cpu_s=sum(r.cpu_s for r in records if not r.cached),
        wall_s=sum(r.wall_s for r in records if not r.cached),
        cost_units=sum(
            charged_units(get_tier(r.tier).cost_class, r.components)
            for r in records
            if not r.cached
        ),
    )
    last = records[-1] if records else None
    if last is not None and last.status == VerdictStatus.error:
        detail = f" ({last.feedback[:300]})" if last.feedback else ""
        reason = f"{last.tier} could not judge the item: {last.reason or 'error'}{detail}"
        return _unscored(RewardStatus.infra_error, reason, records, cost, last.tier)
    if last is not None and last.status == VerdictStatus.pending:
        reason = f"waiting for {last.tier}"
        return _unscored(RewardStatus.pending, reason, records, cost, last.tier)
    if stop.kind in (StopKind.gate_error, StopKind.lost, StopKind.cancelled):
        return _unscored(RewardStatus.infra_error, str(stop), records, cost)
    deadline_fallback = fallback or doc.deadline_fallback
    if stop.kind == StopKind.deadline and deadline_fallback == "infra_error":
        reason = str(stop) if stop.detail else "deadline"
        reason += ": the job's deadline passed before the ladder finished"
        return _unscored(RewardStatus.infra_error, reason, records, cost)
    ladder = [s.tier for s in doc.ladder_for(item.kind)]
    verdicts = {r.tier: to_verdict(r) for r in records}
    try:
        composed = compose_reward(doc.reward_for(item.kind), verdicts, context, order=ladder)
    except GateEvaluationError as exc:
        return _unscored(
            RewardStatus.infra_error, f"reward expression failed: {exc}", records, cost
        )
    if composed.value is None:
        reason = (
            "no reward component could be computed from the verdicts "
            f"(missing: {', '.join(composed.missing) or 'all'})"
        )
        return _unscored(RewardStatus.infra_error, reason, records, cost)
    reasons = []
    if composed.gated_by:
        reasons.append(f"hard gate: {composed.gated_by}")
    reasons.extend(f"penalty: {p}" for p in composed.penalties)
    if stop.kind == StopKind.deadline:
        detail = f" ({stop.detail})" if stop.detail else ""
        reasons.append(f"deadline{detail}: best available reward (fidelity {composed.fidelity})")
    elif stop.kind != StopKind.finished:
        reasons.append(str(stop))
    if composed.missing and not composed.gated_by:
        reasons.append(f"components not reached: {', '.join(composed.missing)}")
    return Reward(
        value=composed.value,
        status=RewardStatus.scored,
        reason="; ".join(reasons) or None,
        components=composed.components,
        fidelity=composed.fidelity,
        provenance=[r.id for r in records],
        cost=cost,
    )


#: Parts of a trajectory (steps, outcome) its reason names when they were not scored.
TROUBLES_NAMED = 5


def trajectory_reward(doc: PolicyDocument, children: Sequence[Item]) -> Reward:
    """A trajectory's reward from its finished steps' and outcome's rewards."""
    rewards = [Reward.model_validate(c.reward) for c in children]
    steps = [r for c, r in zip(children, rewards, strict=True) if c.role == "step"]
    outcome = next((r for c, r in zip(children, rewards, strict=True) if c.role == "outcome"), None)
    cost = RewardCost(
        cpu_s=sum(r.cost.cpu_s for r in rewards),
        wall_s=sum(r.cost.wall_s for r in rewards),
        cost_units=sum(r.cost.cost_units for r in rewards),
    )
    step_values = [r.value for r in steps]
    outcome_value = outcome.value if outcome is not None else None
    common = {
        "step_rewards": step_values,
        "outcome_reward": outcome_value,
        "provenance": [v for r in rewards for v in r.provenance],
        "cost": cost,
    }
    troubled = [(i, r) for i, r in enumerate(rewards) if r.status != RewardStatus.scored]
    if troubled:
        worst = (
            RewardStatus.infra_error
            if any(r.status == RewardStatus.infra_error for _, r in troubled)
            else RewardStatus.pending
        )
        reason = "; ".join(
            f"{children[i].role} {children[i].index}: {r.reason}"
            for i, r in troubled[:TROUBLES_NAMED]
        )
        if len(troubled) > TROUBLES_NAMED:  # a long trajectory's reason stays readable
            reason += f"; and {len(troubled) - TROUBLES_NAMED} more parts not scored"
        return Reward(value=None, status=worst, reason=reason, **common)
    value = combine_trajectory(doc.trajectory, step_values, outcome_value)
    fidelities = [r.fidelity for r in rewards if r.fidelity]
    return Reward(
        value=value,
        status=RewardStatus.scored,
        fidelity=fidelities[-1] if fidelities else None,
        **common,
    )
