"""The FastAPI application."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from verifier_service import __version__
from verifier_service.core.db import get_engine
from verifier_service.core.errors import DomainError
from verifier_service.core.migrate import ensure_migrated
from verifier_service.core.notify import JobWaiter
from verifier_service.settings import get_settings

log = structlog.get_logger(__name__)


class BodySizeLimit:
    """Rejects request bodies above the limit with a 413 before they are parsed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> JSONResponse:
        return JSONResponse(
            {
                "error": "payload_too_large",
                "message": f"request body exceeds the limit of {self.max_bytes} bytes",
                "hint": "split the items over several requests",
            },
            status_code=413,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._too_large()(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await self._too_large()(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": _loc(tuple(e.get("loc", ()))), "msg": e.get("msg", ""), "type": e.get("type")}
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"loc": "body", "msg": "invalid request"}
    return JSONResponse(
        {
            "error": "invalid_request",
            "message": f"{first['loc']}: {first['msg']}",
            "errors": errors,
            "hint": "see the request schema at /docs",
        },
        status_code=422,
    )


async def _domain_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    return JSONResponse(exc.body(), status_code=exc.status_code)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", path=request.url.path, exc_info=exc)
    return JSONResponse(
        {"error": "internal_error", "message": f"{type(exc).__name__}: {exc}"}, status_code=500
    )


async def _sweep_outbox(every_s: float, grace_s: float) -> None:
    """Forever: send ladder work that was committed but never reached the broker, and finish
    jobs whose deadline passed without their expiry message arriving."""
    from workers.dispatch import expire_overdue, sweep

    while True:
        await asyncio.sleep(every_s)
        try:
            await run_in_threadpool(sweep, grace_s)
            await run_in_threadpool(expire_overdue)
        except Exception:  # the database may be away for a moment; try again next round
            log.exception("outbox sweep failed")


def create_app(*, check_migrations: bool = True) -> FastAPI:
    settings = get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if check_migrations:
            ensure_migrated(get_engine())
        app.state.waiter = JobWaiter(settings.broker_url)
        await app.state.waiter.start()
        sweeper = None
        if settings.api.outbox_sweep_s > 0:
            sweeper = asyncio.create_task(
                _sweep_outbox(settings.api.outbox_sweep_s, settings.api.outbox_grace_s)
            )
        yield
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        await app.state.waiter.stop()

    app = FastAPI(
        title="verifier-service",
        version=__version__,
        summary="Cost-aware multi-tier rewards for RL of LLM agents",
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.api.max_body_bytes)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(Exception, _unexpected_error)

    from verifier_service import health
    from verifier_service.compat.openrlhf import router as openrlhf_router
    from verifier_service.jobs.endpoints import router as jobs_router
    from verifier_service.policies.endpoints import router as policies_router
    from verifier_service.sandbox.endpoints import router as sandbox_router
    from verifier_service.tiers_api.endpoints import router as tiers_router

    app.include_router(health.router)
    app.include_router(jobs_router)
    app.include_router(policies_router)
    app.include_router(tiers_router)
    app.include_router(sandbox_router)
    app.include_router(openrlhf_router)
    return app
