"""The FastAPI application."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog
from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from tiers.code.sandbox_languages import shutdown_all_pools
from tiers.registry import warm_up
from verifier_service import __version__
from verifier_service.auth.deps import PUBLIC, app_routes
from verifier_service.core.checkpoint import WalCheckpointer
from verifier_service.core.db import get_engine, sqlite_path
from verifier_service.core.gc_tuning import tune_gc
from verifier_service.core.handlers import install_error_handlers
from verifier_service.core.logging import configure_logging
from verifier_service.core.middleware import (
    MAX_JSON_DEPTH,
    WORKER_THREAD_STACK_BYTES,
    BodySizeLimit,
    JsonBodyCheck,
    NulInUrl,
    RequestId,
)
from verifier_service.core.migrate import ensure_migrated
from verifier_service.core.notify import JobWaiter
from verifier_service.metrics import propagation, tracing
from verifier_service.metrics import registry as metrics_registry
from verifier_service.metrics.http import HttpMetrics, RouteTemplates
from verifier_service.settings import Settings, get_settings
from verifier_service.web.errors import install_page_errors
from verifier_service.web.static import STATIC, static_router
from verifier_service.wiring import configure_tiers

log = structlog.get_logger(__name__)

#: Where the pages' static files are, looked up in this order (a name is in one of them only).
STATIC_DIRS = (
    STATIC,
    Path(__file__).parent / "console" / "static",
    Path(__file__).parent / "review" / "static",
)


async def _sweep(every_s: float, grace_s: float) -> None:
    """Forever: the recovery sweep (unsent outbox messages, overdue deadlines, lost tier work;
    see verifier_service.ladder.recovery), taking turns with the workers that also run it."""
    from verifier_service.ladder.dispatch import BROKER_ERRORS
    from verifier_service.ladder.recovery import sweep

    settings = get_settings()
    while True:
        await asyncio.sleep(every_s)
        try:
            await run_in_threadpool(sweep, settings, every_s, grace_s)
        except BROKER_ERRORS as exc:  # no lock, no queues: nothing to do until it is back
            log.warning("recovery sweep skipped: broker unreachable", error=str(exc))
        except Exception:  # the database may be away for a moment; try again next round
            log.exception("recovery sweep failed")


def _wal_checkpointer(settings: Settings) -> WalCheckpointer | None:
    """On SQLite, the log's checkpoint in a thread of its own, started (see core.checkpoint)."""
    path = sqlite_path(settings.database_url)
    if path is None or settings.database.sqlite_checkpoint_s <= 0:
        return None
    checkpointer = WalCheckpointer(path, settings.database.sqlite_checkpoint_s)
    checkpointer.start()
    return checkpointer


def create_app(*, check_migrations: bool = True) -> FastAPI:
    settings = get_settings()
    configure_tiers(settings)
    configure_logging(settings.log_level, json=settings.log_json)
    propagation.install()  # request ids into the headers of the tasks requests send
    # Threads started from here on (anyio's pool, which runs the inline lane) get this stack.
    threading.stack_size(max(threading.stack_size(), WORKER_THREAD_STACK_BYTES))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if check_migrations:
            ensure_migrated(get_engine())
        metrics_registry.setup(settings)  # before the first request counts anything
        if settings.api.inline_max_items > 0:  # the inline lane runs fast tiers here
            await asyncio.to_thread(warm_up, {"tier.fast"})
        tune_gc(settings.gc_young_threshold)
        app.state.waiter = JobWaiter(settings.broker_url)
        await app.state.waiter.start()
        checkpointer = _wal_checkpointer(settings)
        sweeper = None
        if settings.api.outbox_sweep_s > 0:
            sweeper = asyncio.create_task(
                _sweep(settings.api.outbox_sweep_s, settings.api.outbox_grace_s)
            )
        yield
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        await app.state.waiter.stop()
        # /run_code's warm containers: uvicorn ends by re-raising SIGTERM, so atexit never runs.
        await asyncio.to_thread(shutdown_all_pools)
        if checkpointer is not None:
            await asyncio.to_thread(checkpointer.stop)

    app = FastAPI(
        title="verifier-service",
        version=__version__,
        summary="Cost-aware multi-tier rewards for RL of LLM agents",
        lifespan=lifespan,
    )
    from verifier_service.compat.openrlhf import TOO_MANY_HINT as OPENRLHF_TOO_MANY

    app.add_middleware(
        JsonBodyCheck,
        max_depth=MAX_JSON_DEPTH,
        max_items=settings.api.max_items,
        too_many_hints={"/v1/compat/openrlhf": OPENRLHF_TOO_MANY},
    )
    app.add_middleware(NulInUrl)
    app.add_middleware(BodySizeLimit, max_bytes=settings.api.max_body_bytes)
    app.add_middleware(RequestId)
    app.add_middleware(HttpMetrics, templates=RouteTemplates(lambda: list(app_routes(app))))
    install_error_handlers(app)
    install_page_errors(app)  # after the JSON handlers: it wraps them

    from verifier_service import health
    from verifier_service.auth import endpoints as auth_endpoints
    from verifier_service.auth import pages as auth_pages
    from verifier_service.compat.openrlhf import router as openrlhf_router
    from verifier_service.console.calibration import endpoints as calibration_api
    from verifier_service.console.calibration import pages as calibration_pages
    from verifier_service.console.operations import endpoints as operations_api
    from verifier_service.console.operations import pages as operations_pages
    from verifier_service.console.oracles import pages as oracle_pages
    from verifier_service.console.overview import endpoints as overview_api
    from verifier_service.console.overview import pages as overview_pages
    from verifier_service.console.people import pages as people_pages
    from verifier_service.console.policies import endpoints as console_policies_api
    from verifier_service.console.policies import pages as console_policies_pages
    from verifier_service.events.endpoints import router as events_router
    from verifier_service.jobs.endpoints import router as jobs_router
    from verifier_service.ladder.endpoints import router as ladder_router
    from verifier_service.metrics.endpoints import router as metrics_router
    from verifier_service.oracle.endpoints import router as oracle_router
    from verifier_service.policies.endpoints import router as policies_router
    from verifier_service.review.endpoints import router as review_router
    from verifier_service.review.pages import pages as review_pages
    from verifier_service.sandbox.endpoints import router as sandbox_router
    from verifier_service.tiers_api.endpoints import router as tiers_router

    app.include_router(health.router)
    # Every app's stylesheets and scripts, from one public route (see web/static.py).
    app.include_router(static_router(STATIC_DIRS, dependencies=[PUBLIC]))
    app.include_router(jobs_router)
    app.include_router(events_router)
    app.include_router(policies_router)
    app.include_router(ladder_router)
    app.include_router(tiers_router)
    app.include_router(sandbox_router)
    app.include_router(openrlhf_router)
    app.include_router(review_router)
    app.include_router(oracle_router)
    app.include_router(auth_endpoints.router)
    app.include_router(auth_pages.router)
    app.include_router(review_pages)
    app.include_router(metrics_router)
    for console in (overview_api, overview_pages, calibration_api, calibration_pages,
                    console_policies_api, console_policies_pages, operations_api,
                    operations_pages, oracle_pages):  # fmt: skip
        app.include_router(console.router)
    app.include_router(people_pages.router)
    tracing.instrument_app(app, settings)
    auth_endpoints.redact_keys_in_access_log()
    return app
