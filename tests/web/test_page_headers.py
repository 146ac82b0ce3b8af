"""Every page the service shows a browser carries the web layer's headers (one CSP without
'unsafe-inline', no framing, no caching): the route walk calls each GET page route of the app on
the live service, as a browser with every role would, and reads the answer's headers."""

from __future__ import annotations

import re

import httpx
import pytest
from support import Service

from verifier_service.app import create_app
from verifier_service.auth.deps import PUBLIC_FRAMEWORK_PATHS, app_routes
from verifier_service.web.headers import PAGE_HEADERS

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def _page_routes() -> list[str]:
    """GET routes that answer HTML: left out of the OpenAPI document, not the static files."""
    app = create_app(check_migrations=False)
    paths = []
    for path, route in app_routes(app):
        methods = getattr(route, "methods", None) or set()
        if "GET" not in methods or getattr(route, "include_in_schema", True):
            continue
        if path.startswith(("/static/", "/v1/", "/k/")) or path in PUBLIC_FRAMEWORK_PATHS:
            continue
        paths.append(path)
    return sorted(set(paths))


PAGES = _page_routes()


def _fill(template: str) -> str:
    def one(match: re.Match[str]) -> str:
        return "1" if match.group(1) == "version" else "x"

    return re.sub(r"\{(\w+)(?::\w+)?\}", one, template)


def test_the_walk_finds_every_app_s_pages() -> None:
    assert {"/", "/signin", "/account", "/console", "/console/jobs", "/console/policies",
            "/console/calibration", "/console/queues", "/review"} <= set(PAGES)  # fmt: skip


@pytest.mark.parametrize("path", PAGES)
def test_every_page_carries_the_shared_headers(live_service: Service, path: str) -> None:
    headers = {**BROWSER, **live_service.auth_headers}
    answer = httpx.get(
        live_service.base_url + _fill(path), headers=headers, timeout=30, follow_redirects=True
    )
    # Pages with an {id} in the path answer an error page for "x": it is a page all the same.
    # A moved page's old address (/console/people/reviewers) is read where it leads.
    assert answer.headers["content-type"].startswith("text/html"), (answer.status_code, answer.text)
    for name, value in PAGE_HEADERS.items():
        assert answer.headers.get(name) == value, f"{path}: {name}"
    assert "unsafe-inline" not in answer.headers["content-security-policy"]


def test_static_files_come_from_one_route_and_stay_inside(live_service: Service) -> None:
    url = live_service.base_url
    for name, media in [("base.css", "text/css"), ("console.js", "text/javascript"),
                        ("vendor/chart.umd.min.js", "text/javascript"),
                        ("review.css", "text/css")]:  # fmt: skip
        answer = httpx.get(f"{url}/static/{name}", timeout=30)
        assert answer.status_code == 200, name
        assert answer.headers["content-type"].startswith(media), name
        assert answer.headers["x-content-type-options"] == "nosniff"
    # A path climbing out of the static directories finds nothing (encoded, so the client
    # sends it as it is).
    for sneaky in ("%2e%2e/app.py", "..%2f..%2fsettings.py", "%2e%2e/%2e%2e/pyproject.toml"):
        answer = httpx.get(f"{url}/static/{sneaky}", timeout=30)
        assert answer.status_code == 404, sneaky
        assert "BaseSettings" not in answer.text
        assert "[project]" not in answer.text
