"""GET /v1/tiers: registered tiers, versions, queues, cost class, queue depth."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from tiers.registry import get_tier, tier_names
from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.core.notify import sync_client
from verifier_service.core.presence import workers_per_queue
from verifier_service.settings import get_settings

router = APIRouter(tags=["tiers"])


class TierOut(BaseModel):
    """A registered tier."""

    name: str
    version: str
    queue: str
    cost_class: float
    kinds: list[str]
    queue_depth: int | None = Field(description="Tasks waiting on the tier's queue.")
    workers: int | None = Field(
        description="Live workers consuming the tier's queue; 0 means its tasks wait for one."
    )


@router.get("/v1/tiers")
def list_tiers(_: OperatorPrincipal) -> list[TierOut]:
    """Every registered tier with its queue and how many tasks wait on that queue."""
    client = sync_client(get_settings().broker_url)
    names = tier_names()
    try:
        workers: dict[str, int] = workers_per_queue(client, [get_tier(n).queue for n in names])
    except RedisError:
        workers = {}
    out = []
    for name in names:
        tier = get_tier(name)
        try:
            depth: int | None = int(client.llen(tier.queue))
        except RedisError:
            depth = None
        out.append(
            TierOut(
                name=tier.name,
                version=tier.version,
                queue=tier.queue,
                cost_class=tier.cost_class,
                kinds=sorted(tier.kinds),
                queue_depth=depth,
                workers=workers.get(tier.queue),
            )
        )
    return out
