"""OpenTelemetry traces, off unless `metrics.otlp_endpoint` is set (and the `otel` extra is
installed): one trace from the HTTP request through the outbox, the broker and the Celery tasks
it causes, to the database, with the contrib instrumentations of FastAPI, Celery, SQLAlchemy,
Redis and httpx, exported over OTLP/HTTP."""

from __future__ import annotations

from typing import Any

import structlog

from verifier_service.settings import Settings

log = structlog.get_logger(__name__)

_done: set[str] = set()


def setup(settings: Settings, *, celery: bool = False) -> bool:
    """Install the tracer provider and the instrumentations once per process; whether tracing
    is on. Call in each process that works (an API process; a Celery pool process after the
    fork, since the exporter's thread does not survive one)."""
    endpoint = settings.metrics.otlp_endpoint
    if not endpoint:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        from opentelemetry.instrumentation.redis import RedisInstrumentor
        from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning(
            "metrics.otlp_endpoint is set but the otel extra is not installed: no traces",
            error=str(exc),
            hint="pip install 'verifier-service[otel]'",
        )
        return False
    if "provider" not in _done:
        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.metrics.service_name})
        )
        exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        # Engines made from here on are traced (the service makes its engines lazily). The
        # instrumentation wraps sqlalchemy.create_engine; core.db took its name at import.
        SQLAlchemyInstrumentor().instrument()
        import sqlalchemy

        from verifier_service.core import db

        db.create_engine = sqlalchemy.create_engine  # type: ignore[attr-defined]
        db.reset_engine_cache()
        RedisInstrumentor().instrument()
        HTTPXClientInstrumentor().instrument()
        _done.add("provider")
    if celery and "celery" not in _done:
        CeleryInstrumentor().instrument()  # type: ignore[no-untyped-call]
        _done.add("celery")
    return True


def instrument_app(app: Any, settings: Settings) -> None:
    """Trace an API app's requests (when tracing is on)."""
    if setup(settings, celery=True):
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")
