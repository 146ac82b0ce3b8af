"""GET /metrics: this host's metrics in Prometheus's text format (operator role)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.core.deps import SettingsDep
from verifier_service.core.errors import NotFoundError
from verifier_service.metrics.broker import BrokerCollector
from verifier_service.metrics.registry import collect_registry, enabled
from verifier_service.settings import Settings

router = APIRouter(tags=["operations"])


def _render(settings: Settings) -> bytes:
    registry = collect_registry(settings.metrics_dir)
    registry.register(BrokerCollector(settings.broker_url))
    return generate_latest(registry)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}},
)
async def get_metrics(_: OperatorPrincipal, settings: SettingsDep) -> Response:
    """Counters of every API and worker process of this host, and the broker's queue lengths."""
    if not enabled():
        raise NotFoundError(
            "metrics are turned off on this service",
            hint="set VERIFIER_METRICS__ENABLED=true (the default) and restart it",
        )
    body = await run_in_threadpool(_render, settings)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
