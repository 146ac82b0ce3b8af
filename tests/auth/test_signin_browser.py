"""People sign in on the server-rendered page in a real browser (Playwright + Debian Chromium)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from auth_support import PASSWORD, new_person
from support import Service


@pytest.fixture
def person(live_service: Service) -> str:
    return new_person(live_service, "reviewer")


def test_sign_in_with_the_keyboard_and_sign_out(
    live_service: Service, browser: Any, person: str, tmp_path: Path
) -> None:
    page = browser.new_page()
    blocked: list[str] = []
    page.on("request", lambda r: blocked.append(r.url) if "127.0.0.1" not in r.url else None)
    page.goto(f"{live_service.base_url}/signin")
    assert page.title().startswith("Sign in")
    # Labelled fields, the username focused: sign in without a mouse.
    assert page.get_by_label("Username").evaluate("e => e === document.activeElement")
    page.screenshot(path=str(tmp_path / "sign-in.png"))
    page.keyboard.type(person)
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    # Signed in, the landing page: the apps the reviewer's role opens, and no other.
    page.wait_for_url(f"{live_service.base_url}/")
    assert page.locator("#principal").inner_text() == person
    links = page.get_by_role("list", name="Where to go").get_by_role("link").all_inner_texts()
    assert links == ["Review", "Your account", "API docs"]
    page.get_by_role("link", name="Your account").press("Enter")
    page.wait_for_url("**/account")
    assert page.locator("#principal").inner_text() == person
    assert page.locator("#roles").inner_text() == "reviewer"
    cookie = next(c for c in page.context.cookies() if c["name"] == "vs_session")
    assert cookie["httpOnly"]
    assert cookie["secure"]
    assert cookie["sameSite"] == "Lax"
    assert page.evaluate("document.cookie") == ""  # no script can read the session
    page.get_by_role("button", name="Sign out").press("Enter")
    page.wait_for_url("**/signin")
    # Signed out: the account page sends the browser back to sign in.
    page.goto(f"{live_service.base_url}/account")
    assert page.url.endswith("/signin?next=/account")
    assert blocked == []  # the page fetched nothing from anywhere else


def test_wrong_password_and_unknown_user_read_the_same(
    live_service: Service, browser: Any, person: str
) -> None:
    page = browser.new_page()
    messages = []
    for name in (person, f"nobody-{uuid.uuid4().hex[:6]}"):
        page.goto(f"{live_service.base_url}/signin")
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password").fill("not the password")
        with page.expect_response(lambda r: r.request.method == "POST") as answer:
            page.get_by_role("button", name="Sign in").click()
        assert answer.value.status == 400
        messages.append(page.get_by_role("alert").inner_text())
    assert messages == ["Wrong username or password."] * 2


def test_a_forged_csrf_token_is_refused(live_service: Service, browser: Any, person: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{live_service.base_url}/signin")
    page.get_by_label("Username").fill(person)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_service.base_url}/")
    page.goto(f"{live_service.base_url}/account")
    # What a page on another site could send: the form without a valid token.
    token = page.locator("form[action='/signout'] input[name=csrf_token]")
    token.evaluate("e => e.value = 'forged'")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name="Sign out").click()
    assert answer.value.status == 403
    assert "expired" in page.get_by_role("alert").inner_text()
    # The forged sign-out did nothing: still signed in.
    page.goto(f"{live_service.base_url}/account")
    assert page.locator("#principal").inner_text() == person
    context.close()
