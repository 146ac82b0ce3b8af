"""Every route declares who may call it, and the running service enforces it.

The walk takes the route table of the app the `api` command serves and calls each route on the
live service three times: without credentials (401 with WWW-Authenticate), with a key lacking the
declared role (403) and with a key holding it (neither 401 nor 403).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from support import Service

from verifier_service.app import create_app
from verifier_service.auth.deps import PUBLIC, TrainerPrincipal, app_routes, declared_access

ROLES = ("trainer", "reviewer", "operator", "admin", "oracle")


@pytest.fixture(scope="module")
def role_keys(live_service: Service) -> dict[str, str]:
    """One key per role, each with that role only."""
    return {role: live_service.create_key(f"walk-{role}", role) for role in ROLES}


def _routes() -> list[tuple[str, str, Any]]:
    app = create_app(check_migrations=False)
    out = []
    for path, route in app_routes(app):
        methods = sorted(getattr(route, "methods", None) or {"GET"})
        for method in methods:
            if method != "HEAD":
                out.append((method, path, route))
    return out


ROUTES = _routes()


def _path(template: str, api_key: str) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "api_key":
            return api_key
        return "1" if name == "version" else "x"

    return re.sub(r"\{(\w+)(?::\w+)?\}", fill, template)


def _call(service: Service, method: str, template: str, key: str | None) -> httpx.Response:
    in_path = "/k/{api_key}" in template
    headers = {"Authorization": f"Bearer {key}"} if key and not in_path else {}
    # No credentials for a key-in-path route: a path segment that is no key at all.
    path = _path(template, key if key else "none")
    body = None if method in ("GET", "DELETE") else {}
    return httpx.request(method, service.base_url + path, headers=headers, json=body, timeout=30)


def test_the_app_has_routes_to_walk() -> None:
    paths = {path for _, path, _ in ROUTES}
    assert {"/v1/rewards", "/v1/policies", "/v1/tiers", "/run_code", "/v1/audit"} <= paths
    assert "/k/{api_key}/run_code" in paths


@pytest.mark.parametrize(
    ("method", "path", "route"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES]
)
def test_route_declares_access_and_the_service_enforces_it(
    live_service: Service, role_keys: dict[str, str], method: str, path: str, route: Any
) -> None:
    access = declared_access(route)
    assert access is not None, f"{method} {path} declares no role (nor PUBLIC)"
    if access == "public":
        response = _call(live_service, method, path, None)
        assert response.status_code != 401, response.text
        return
    anonymous = _call(live_service, method, path, None)
    assert anonymous.status_code == 401, anonymous.text
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    wrong = [r for r in ROLES if r not in access]
    if wrong:
        denied = _call(live_service, method, path, role_keys[wrong[0]])
        assert denied.status_code == 403, denied.text
        assert denied.json()["error"] == "forbidden"
    allowed = _call(live_service, method, path, role_keys[sorted(access)[0]])
    assert allowed.status_code not in (401, 403), allowed.text


def test_a_route_without_a_declared_role_is_caught() -> None:
    router = APIRouter()

    @router.get("/undeclared")
    def undeclared() -> dict[str, str]:
        return {}

    @router.get("/trainers")
    def trainers(_: TrainerPrincipal) -> dict[str, str]:
        return {}

    @router.get("/open", dependencies=[PUBLIC])
    def open_() -> dict[str, str]:
        return {}

    app = FastAPI()
    app.include_router(router)
    found = {p: declared_access(r) for p, r in app_routes(app) if isinstance(r, APIRoute)}
    assert found == {"/undeclared": None, "/trainers": frozenset({"trainer"}), "/open": "public"}
