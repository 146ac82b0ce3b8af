"""Cost reports from the ledger: per tier, cache hits, escalations, and what the cascade saved."""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field
from sqlalchemy import ColumnElement
from sqlalchemy.orm import Session

from tiers.registry import UnknownTierError, get_tier
from verifier_service.ladder import repository
from verifier_service.ladder.models import CostLedgerEntry, Item, Job
from verifier_service.policies.service import resolve


class TierCost(BaseModel):
    """What one tier did and cost."""

    calls: int = Field(default=0, description="Items the tier really verified.")
    cache_hits: int = Field(default=0, description="Items answered from the verdict cache.")
    audits: int = Field(default=0, description="Items that climbed only by audit sampling.")
    escalations: int = Field(default=0, description="Items that climbed to this tier (step > 0).")
    cost_units: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0


class CostReport(BaseModel):
    """Cost of a job or a policy version, and the saving against running every tier."""

    items: int = Field(description="Items (ladder leaves: trajectory steps count one each).")
    tiers: dict[str, TierCost]
    cost_units: float = Field(description="Cost units charged.")
    every_tier_cost_units: float = Field(
        description="Cost units had every tier of the ladder verified every item."
    )
    saved_cost_units: float


def _report(
    session: Session, where: list[ColumnElement[bool]], items_where: list[ColumnElement[bool]]
) -> CostReport:
    tiers: dict[str, TierCost] = defaultdict(TierCost)
    for entry in repository.ledger_where(session, *where):
        cost = tiers[entry.tier]
        if entry.cached:
            cost.cache_hits += 1
        else:
            cost.calls += 1
        cost.audits += int(entry.audit)
        cost.escalations += int(entry.step > 0)
        cost.cost_units += entry.cost_units
        cost.cpu_s += entry.cpu_s
        cost.wall_s += entry.wall_s
    rows = repository.leaf_counts_by_version(session, *items_where)
    every = 0.0
    n_items = 0
    for name, version, kind, count in rows:
        n_items += count
        document = resolve(session, name, version).document
        ladder = document.ladder_for(kind) if kind in document.ladders else []
        for step in ladder:
            try:
                every += count * get_tier(step.tier).cost_class
            except UnknownTierError:
                continue
    spent = sum(t.cost_units for t in tiers.values())
    return CostReport(
        items=n_items,
        tiers=dict(tiers),
        cost_units=spent,
        every_tier_cost_units=every,
        saved_cost_units=every - spent,
    )


def job_cost(session: Session, job_id: str) -> CostReport:
    return _report(session, [CostLedgerEntry.job_id == job_id], [Item.job_id == job_id])


def policy_version_cost(session: Session, name: str, version: int) -> CostReport:
    return _report(
        session,
        [CostLedgerEntry.policy_name == name, CostLedgerEntry.policy_version == version],
        [Job.policy_name == name, Job.policy_version == version],
    )
