"""HTTP request latency by route template (never the raw path: ids would make every job a new
series) and status."""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from verifier_service.metrics.registry import enabled, metrics

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: The label of requests that matched no route (404s of any path, probes for /wp-admin...).
UNMATCHED = "unmatched"


class RouteTemplates:
    """Full path templates of an app's routes (prefixes of included routers and all), by route
    object, read from the app on first use (routes are added after the middleware)."""

    def __init__(self, routes: Callable[[], list[tuple[str, object]]]) -> None:
        self._routes = routes
        self._by_id: dict[int, str] | None = None

    def template(self, route: object | None) -> str:
        if route is None:
            return UNMATCHED
        if self._by_id is None:
            self._by_id = {id(r): path for path, r in self._routes()}
        found = self._by_id.get(id(route))
        return found if found is not None else str(getattr(route, "path", UNMATCHED))


class HttpMetrics:
    """Observes each HTTP request's duration, labelled by method, route template and status."""

    def __init__(self, app: ASGIApp, templates: RouteTemplates) -> None:
        self.app = app
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not enabled():
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = self.templates.template(scope.get("route"))
            method = str(scope.get("method", "GET"))
            method = method if method in _METHODS else "other"
            metrics().http_duration.labels(method, route, str(status)).observe(
                time.perf_counter() - start
            )
