"""People change their own password on the account page; an administrator resets a forgotten
one with the CLI. Either way, sessions signed in with the old password stop working."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from auth_support import PASSWORD, new_person
from playwright.sync_api import expect
from support import Service

NEW_PASSWORD = "a new and longer passphrase"


class _Browser:
    """A browser's cookie handling over plain HTTP: the service's cookies are Secure, which
    httpx will not send to an http:// test server, so they are kept here and sent by hand."""

    def __init__(self, service: Service) -> None:
        self.http = httpx.Client(base_url=service.base_url, timeout=30)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        header = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = self.http.request(method, url, headers={"Cookie": header}, **kwargs)
        self.cookies.update(dict(response.cookies.items()))
        return response

    def get(self, url: str) -> httpx.Response:
        return self.request("GET", url)

    def post(self, url: str, data: dict[str, str]) -> httpx.Response:
        return self.request("POST", url, data=data)

    def close(self) -> None:
        self.http.close()


def _signed_in(service: Service, name: str, password: str) -> _Browser:
    """A client signed in as `name` on the sign-in page."""
    client = _Browser(service)
    page = client.get("/signin")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    answer = client.post(
        "/signin", data={"username": name, "password": password, "csrf_token": token.group(1)}
    )
    assert answer.status_code == 303, answer.text
    return client


def _form_token(client: _Browser) -> str:
    page = client.get("/account")
    assert page.status_code == 200, page.text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    return token.group(1)


def _change(client: _Browser, current: str, new: str, confirm: str | None = None) -> httpx.Response:
    return client.post(
        "/account/password",
        data={
            "csrf_token": _form_token(client),
            "current_password": current,
            "new_password": new,
            "confirm_password": new if confirm is None else confirm,
        },
    )


def _sign_in_status(service: Service, name: str, password: str) -> int:
    client = _Browser(service)
    page = client.get("/signin")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    form = {"username": name, "password": password, "csrf_token": token.group(1)}
    status = client.post("/signin", data=form).status_code
    client.close()
    return status


@pytest.fixture
def person(live_service: Service) -> str:
    return new_person(live_service, "operator")


def test_changing_the_password_signs_out_the_other_browsers(
    live_service: Service, person: str
) -> None:
    here = _signed_in(live_service, person, PASSWORD)
    elsewhere = _signed_in(live_service, person, PASSWORD)
    assert elsewhere.get("/v1/me").status_code == 200

    wrong = _change(here, "not my password", NEW_PASSWORD)
    assert wrong.status_code == 400
    assert 'id="current_password-error"' in wrong.text
    assert "The current password is wrong." in wrong.text
    differ = _change(here, PASSWORD, NEW_PASSWORD, confirm=NEW_PASSWORD + "x")
    assert differ.status_code == 400
    assert 'id="confirm_password-error"' in differ.text
    short = _change(here, PASSWORD, "short")
    assert short.status_code == 400
    assert 'id="new_password-error"' in short.text
    assert "Password too short." in short.text
    # None of the refused attempts changed anything.
    assert elsewhere.get("/v1/me").status_code == 200

    changed = _change(here, PASSWORD, NEW_PASSWORD)
    assert changed.status_code == 303
    assert changed.headers["location"] == "/account?password=changed"
    assert "Password changed" in here.get("/account?password=changed").text
    assert here.get("/v1/me").json()["name"] == person  # this browser stays signed in
    assert elsewhere.get("/v1/me").status_code == 401  # the other one is signed out
    assert _sign_in_status(live_service, person, PASSWORD) == 400
    assert _sign_in_status(live_service, person, NEW_PASSWORD) == 303

    with live_service.client() as admin:
        events = admin.get("/v1/audit", params={"action": "user.password_change"}).json()
    mine = [e for e in events if e["target"] == person]
    assert len(mine) == 1
    assert mine[0]["actor"] == person
    assert mine[0]["detail"]["sessions_ended"] == 1
    here.close()
    elsewhere.close()


def test_a_form_without_its_csrf_token_changes_nothing(live_service: Service, person: str) -> None:
    client = _signed_in(live_service, person, PASSWORD)
    forged = client.post(
        "/account/password",
        data={"current_password": PASSWORD, "new_password": NEW_PASSWORD,
              "confirm_password": NEW_PASSWORD, "csrf_token": "forged"},
    )  # fmt: skip
    assert forged.status_code == 401
    client.close()
    assert _sign_in_status(live_service, person, PASSWORD) == 303


def test_an_administrator_resets_a_forgotten_password(live_service: Service, person: str) -> None:
    signed_in = _signed_in(live_service, person, PASSWORD)
    reset = live_service.cli("users", "set-password", person, stdin=NEW_PASSWORD + "\n")
    assert reset.returncode == 0, reset.stderr
    assert "1 session(s) signed out" in reset.stderr
    assert signed_in.get("/v1/me").status_code == 401
    signed_in.close()
    assert _sign_in_status(live_service, person, PASSWORD) == 400
    assert _sign_in_status(live_service, person, NEW_PASSWORD) == 303
    unknown = live_service.cli("users", "set-password", "nobody-" + person, stdin=NEW_PASSWORD)
    assert unknown.returncode == 2
    assert "no user" in unknown.stderr
    too_short = live_service.cli("users", "set-password", person, stdin="short\n")
    assert too_short.returncode == 2
    assert "too short" in too_short.stderr


def test_change_the_password_with_the_keyboard(
    live_service: Service, browser: Any, person: str, tmp_path: Path
) -> None:
    page = browser.new_page()
    page.goto(f"{live_service.base_url}/signin?next=/account")
    page.get_by_label("Username").fill(person)
    page.get_by_label("Password").fill(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/account")
    page.get_by_label("Current password").focus()
    page.keyboard.type("a wrong password")
    page.keyboard.press("Tab")
    page.keyboard.type(NEW_PASSWORD)
    page.keyboard.press("Tab")
    page.keyboard.type(NEW_PASSWORD)
    # Wait for the answer page: the form posts to /account and the same URL comes back.
    with page.expect_navigation():
        page.keyboard.press("Enter")
    # The error is shown at its field, which has the focus again.
    current = page.get_by_label("Current password")
    expect(current).to_have_attribute("aria-invalid", "true")
    assert current.evaluate("e => e === document.activeElement")
    assert page.get_by_role("alert").inner_text() == "The current password is wrong."
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Tab")
    page.keyboard.type(NEW_PASSWORD)
    page.keyboard.press("Tab")
    page.keyboard.type(NEW_PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url("**/account?password=changed")
    assert "Password changed" in page.get_by_role("status").inner_text()
    page.screenshot(path=str(tmp_path / "password-changed.png"), full_page=True)
    page.close()
