"""Observability: Prometheus metrics (multiprocess, one directory per host), the request id
that travels into Celery tasks, and optional OpenTelemetry traces. See docs/observability.md."""
