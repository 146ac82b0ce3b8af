"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from verifier_service.auth.deps import PUBLIC
from verifier_service.core.db import get_engine
from verifier_service.core.logging import mask_secrets
from verifier_service.core.migrate import ensure_migrated
from verifier_service.core.notify import sync_client
from verifier_service.settings import get_settings

router = APIRouter(tags=["health"], dependencies=[PUBLIC])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "A dependency is not ready"}})
def readyz() -> JSONResponse:
    """The database (migrated) and the broker answer."""
    checks: dict[str, Any] = {}
    try:
        ensure_migrated(get_engine())  # reading the schema's revision shows the database is up
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = mask_secrets(f"error: {exc}")
    try:
        sync_client(get_settings().broker_url).ping()
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = mask_secrets(f"error: {exc}")
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)
