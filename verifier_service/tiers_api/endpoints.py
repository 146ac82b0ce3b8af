"""GET /v1/tiers: registered tiers, versions, queues, cost class, queue depth."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from tiers.registry import get_tier, tier_names
from verifier_service.core.deps import OperatorPrincipal
from verifier_service.core.notify import sync_client
from verifier_service.settings import get_settings

router = APIRouter(tags=["tiers"])


class TierOut(BaseModel):
    """A registered tier."""

    name: str
    version: str
    queue: str
    cost_class: float
    kinds: list[str]
    queue_depth: int | None


@router.get("/v1/tiers")
def list_tiers(_: OperatorPrincipal) -> list[TierOut]:
    """Every registered tier with its queue and how many tasks wait on that queue."""
    client = sync_client(get_settings().broker_url)
    out = []
    for name in tier_names():
        tier = get_tier(name)
        try:
            depth: int | None = int(client.llen(tier.queue))
        except Exception:
            depth = None
        out.append(
            TierOut(
                name=tier.name,
                version=tier.version,
                queue=tier.queue,
                cost_class=tier.cost_class,
                kinds=sorted(tier.kinds),
                queue_depth=depth,
            )
        )
    return out
