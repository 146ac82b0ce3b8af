"""A person's browser gets an error page in the product's style (404, 403, 422, 500); programs
asking the same thing keep the JSON bodies the API documents."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from support import Service

from verifier_service.core.handlers import install_error_handlers
from verifier_service.web.errors import install_page_errors
from verifier_service.web.headers import CSP

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def test_an_unknown_page_is_a_page_for_people_and_json_for_programs(live_service: Service) -> None:
    url = f"{live_service.base_url}/console/nowhere-{id(live_service)}"
    page = httpx.get(url, headers=BROWSER, timeout=30)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert "<h1>Page not found</h1>" in page.text
    assert 'href="/"' in page.text  # a way on: the landing page
    program = httpx.get(url, timeout=30)
    assert program.status_code == 404
    assert program.json() == {"detail": "Not Found"}
    # The API answers JSON even to a browser's Accept header.
    api = httpx.get(f"{live_service.base_url}/v1/no-such-thing", headers=BROWSER, timeout=30)
    assert api.status_code == 404
    assert api.headers["content-type"] == "application/json"


def test_a_missing_job_page_says_what_was_not_found(live_service: Service) -> None:
    headers = {**BROWSER, **live_service.auth_headers}
    page = httpx.get(f"{live_service.base_url}/console/jobs/nosuchjob", headers=headers, timeout=30)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "nosuchjob" in page.text
    program = httpx.get(
        f"{live_service.base_url}/console/jobs/nosuchjob", headers=live_service.auth_headers,
        timeout=30,
    )  # fmt: skip
    assert program.json()["error"] == "not_found"


def test_a_reviewer_on_the_console_gets_a_403_page(live_service: Service) -> None:
    key = live_service.create_key("web-reviewer", "reviewer")
    headers = {**BROWSER, "Authorization": f"Bearer {key}"}
    page = httpx.get(f"{live_service.base_url}/console", headers=headers, timeout=30)
    assert page.status_code == 403
    assert page.headers["content-type"].startswith("text/html")
    assert "Not allowed for your account" in page.text
    assert "operator" in page.text  # which role the page needs
    assert "Sign in as someone else" in page.text
    program = httpx.get(
        f"{live_service.base_url}/console", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert program.status_code == 403
    assert program.json()["error"] == "forbidden"


def test_a_bad_value_in_a_page_address_is_a_422_page_naming_the_field(
    live_service: Service,
) -> None:
    headers = {**BROWSER, **live_service.auth_headers}
    page = httpx.get(
        f"{live_service.base_url}/console?window=fortnight", headers=headers, timeout=30
    )
    assert page.status_code == 422
    assert page.headers["content-type"].startswith("text/html")
    assert "<code>window:" in page.text
    program = httpx.get(
        f"{live_service.base_url}/console?window=fortnight", headers=live_service.auth_headers,
        timeout=30,
    )  # fmt: skip
    assert program.status_code == 422
    assert program.json()["errors"][0]["loc"] == "query.window"


def _failing_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    install_page_errors(app)

    @app.get("/broken")
    def broken() -> None:
        raise RuntimeError("secret internals: SELECT * FROM keys")

    return app


def test_an_unexpected_error_is_a_500_page_with_the_request_id_and_no_internals() -> None:
    client = TestClient(_failing_app(), raise_server_exceptions=False)
    page = client.get("/broken", headers=BROWSER)
    assert page.status_code == 500
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert "Something went wrong on our side" in page.text
    assert page.headers["x-request-id"] in page.text
    assert "secret internals" not in page.text
    program = client.get("/broken")
    assert program.status_code == 500
    assert program.json()["error"] == "internal_error"
    assert "secret internals" not in program.text
