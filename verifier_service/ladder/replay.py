"""Replay: run a draft policy over stored items of past jobs and compare it with the active one.

Each ladder is simulated step by step over the chosen items, with GRPO groups decided together,
using verdicts already known for the exact (tier, version, config, payload): the verdict cache and
the items' own stored verdicts. With `compute_missing`, verdicts nobody has yet are computed by
the tiers in this process; otherwise such items stop where the verdict is missing, and the
report counts them. Budgets and deadlines are not simulated.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from tiers.base import Candidate, Verdict, charged_units
from tiers.registry import get_tier
from verifier_service.ladder import repository as ladder_repository
from verifier_service.ladder.execute import cache_key, candidate_of
from verifier_service.ladder.models import Item
from verifier_service.policies.gates import (
    GateContext,
    GateEvaluationError,
    StepDecision,
    audit_draw,
    decide_step,
)
from verifier_service.policies.schemas import PolicyDocument
from verifier_service.scoring.compose import compose_reward


class VersionReplay(BaseModel):
    """How one policy scores the replayed items."""

    escalations: dict[str, int] = Field(description="Items that reached each tier.")
    cost_units: float = Field(description="Cost units of the tier calls this policy makes.")
    cost_by_tier: dict[str, float] = Field(
        default_factory=dict,
        description="Cost units of each tier's calls (each ladder step's): a verdict's own "
        "`cost_units` where the tier measured it (a judge's tokens at its endpoint's price), "
        "else the tier's cost class, as the cost ledger charges a call.",
    )
    mean_reward: float | None
    scored: int
    unavailable: int = Field(description="Items stopped at a verdict nobody has computed.")


class ChangedItem(BaseModel):
    """An item whose reward differs between the draft and the active policy."""

    job_id: str
    index: int
    active: float | None
    draft: float | None
    delta: float | None


class ReplayReport(BaseModel):
    """The draft against the active version over the same stored items."""

    items: int
    active_version: int | None
    draft: VersionReplay
    active: VersionReplay | None
    rank_correlation: float | None = Field(description="Spearman correlation of the rewards.")
    most_changed: list[ChangedItem]


@dataclass
class _Sim:
    item: Item
    candidate: Candidate
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    active: bool = True
    unavailable: bool = False


class _VerdictSource:
    """Known verdicts by cache key; computes missing ones when allowed (and remembers them)."""

    def __init__(self, session: Session, items: Sequence[Item], compute: bool) -> None:
        self.session = session
        self.compute = compute
        self.known: dict[str, Verdict] = {}
        stored = ladder_repository.verdicts_for(session, [i.id for i in items])
        for records in stored.values():
            for record in records:
                if record.cache_key and record.status in ("passed", "failed"):
                    self.known[record.cache_key] = ladder_repository.to_verdict(record)
        self.tier_calls = 0

    def get(
        self, tier_name: str, config: dict[str, object], sims: list[_Sim]
    ) -> list[Verdict | None]:
        tier = get_tier(tier_name)
        keys = [
            cache_key(tier.name, tier.version, config, tier.canonical_payload(s.candidate))
            for s in sims
        ]
        missing = [k for k in set(keys) if k not in self.known]
        if missing:
            self.known.update(ladder_repository.cached_verdicts(self.session, missing))
        missing = [k for k in dict.fromkeys(keys) if k not in self.known]
        if missing and self.compute:
            by_key = {k: s.candidate for k, s in zip(keys, sims, strict=True)}
            fresh = tier.verify_batch([by_key[k] for k in missing], config)
            self.tier_calls += len(missing)
            for key, verdict in zip(missing, fresh, strict=True):
                self.known[key] = verdict
        return [self.known.get(k) for k in keys]


def _simulate(
    doc: PolicyDocument, items: Sequence[Item], source: _VerdictSource
) -> tuple[dict[str, float | None], VersionReplay]:
    sims = [_Sim(i, candidate_of(i)) for i in items if i.kind in doc.ladders]
    escalations: dict[str, int] = defaultdict(int)
    cost_by_tier: dict[str, float] = defaultdict(float)
    depth = max((len(doc.ladder_for(s.item.kind)) for s in sims), default=0)
    for index in range(depth):
        groups: dict[tuple[str, str, str], list[_Sim]] = defaultdict(list)
        for sim in sims:
            ladder = doc.ladder_for(sim.item.kind)
            if sim.active and index < len(ladder):
                key = sim.item.group_key if ladder[index].group else None
                groups[(sim.item.kind, sim.item.job_id, key or sim.item.id)].append(sim)
        climbing: dict[tuple[str, int], list[_Sim]] = defaultdict(list)
        for (kind, _, _), members in groups.items():
            step = doc.ladder_for(kind)[index]
            contexts = [
                GateContext.build(
                    kind=kind,
                    verdicts=m.verdicts,
                    metadata=m.item.candidate.get("metadata") or {},
                    audit=audit_draw(m.item.content_hash, index),
                )
                for m in members
            ]
            decisions: Sequence[StepDecision | None]
            try:
                decisions = decide_step(
                    contexts,
                    gate=step.gate,
                    audit_fraction=step.audit_fraction,
                    group_by=step.group.by if step.group else None,
                    top_k=step.group.top_k if step.group else None,
                    top_fraction=step.group.top_fraction if step.group else None,
                )
            except GateEvaluationError:
                decisions = [None] * len(members)
            for m, decision in zip(members, decisions, strict=True):
                if decision is None or not decision.climb:
                    m.active = False
                else:
                    climbing[(kind, index)].append(m)
        for (kind, _), members in climbing.items():
            step = doc.ladder_for(kind)[index]
            verdicts = source.get(step.tier, dict(step.config), members)
            tier_cost = get_tier(step.tier).cost_class
            seen: set[str] = set()
            for m, verdict in zip(members, verdicts, strict=True):
                if verdict is None:
                    m.active, m.unavailable = False, True
                    continue
                escalations[step.tier] += 1
                if m.item.content_hash not in seen:  # a duplicate rides on the first's call
                    cost_by_tier[step.tier] += charged_units(tier_cost, verdict.components)
                    seen.add(m.item.content_hash)
                m.verdicts[step.tier] = verdict
                if verdict.status not in ("passed", "failed"):
                    m.active = False
    values: dict[str, float | None] = {}
    for sim in sims:
        order = [s.tier for s in doc.ladder_for(sim.item.kind)]
        ctx = GateContext.build(
            kind=sim.item.kind,
            verdicts=sim.verdicts,
            metadata=sim.item.candidate.get("metadata") or {},
        )
        try:
            composed = compose_reward(doc.reward_for(sim.item.kind), sim.verdicts, ctx, order=order)
            values[sim.item.id] = composed.value
        except GateEvaluationError:
            values[sim.item.id] = None
    scored = [v for v in values.values() if v is not None]
    return values, VersionReplay(
        escalations=dict(escalations),
        cost_units=sum(cost_by_tier.values()),
        cost_by_tier=dict(cost_by_tier),
        mean_reward=sum(scored) / len(scored) if scored else None,
        scored=len(scored),
        unavailable=sum(s.unavailable for s in sims),
    )


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when undefined."""
    if len(a) < 2:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return None if va == 0 or vb == 0 else cov / (va * vb)


def replay(
    session: Session,
    draft: PolicyDocument,
    active: PolicyDocument | None,
    active_version: int | None,
    items: Sequence[Item],
    *,
    compute_missing: bool,
    top_n: int = 10,
) -> ReplayReport:
    source = _VerdictSource(session, items, compute_missing)
    draft_values, draft_report = _simulate(draft, items, source)
    active_values: dict[str, float | None] = {}
    active_report = None
    if active is not None:
        active_values, active_report = _simulate(active, items, source)
    both = [
        (i, draft_values[i.id], active_values[i.id])
        for i in items
        if draft_values.get(i.id) is not None and active_values.get(i.id) is not None
    ]
    correlation = spearman([d for _, d, _ in both], [a for _, _, a in both])  # type: ignore[misc]
    changed = sorted(
        (
            ChangedItem(
                job_id=i.job_id,
                index=i.index,
                active=active_values.get(i.id),
                draft=draft_values.get(i.id),
                delta=(d - a) if d is not None and a is not None else None,
            )
            for i in items
            for d, a in [(draft_values.get(i.id), active_values.get(i.id))]
            if d != a
        ),
        key=lambda c: -abs(c.delta) if c.delta is not None else -math.inf,
    )
    return ReplayReport(
        items=len(items),
        active_version=active_version,
        draft=draft_report,
        active=active_report,
        rank_correlation=correlation,
        most_changed=changed[:top_n],
    )
