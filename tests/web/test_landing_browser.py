"""The landing page and the error pages in Chromium: what a signed-out visitor, an operator and
a reviewer see at `/`, and the 404 and 403 pages, at desktop and phone widths, with the
keyboard, fetching nothing from another site and breaking no Content-Security-Policy rule."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import Service

PASSWORD = "correct horse battery staple"
WIDTHS = {"desktop": 1280, "phone": 390}


def _person(service: Service, role: str) -> str:
    name = f"web-{role[:3]}-{uuid.uuid4().hex[:6]}"
    made = service.cli("users", "create", "--role", role, name, stdin=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    return name


class Watched:
    """A page whose off-site requests and console errors (CSP violations among them) are kept."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.off_site: list[str] = []
        self.errors: list[str] = []
        page.on(
            "request", lambda r: None if r.url.startswith(base_url) else self.off_site.append(r.url)
        )
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)


@pytest.fixture
def watched(browser: Any, live_service: Service) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    yield Watched(context.new_page(), live_service.base_url)
    context.close()


def _links(page: Any) -> list[str]:
    return page.get_by_role("list", name="Where to go").get_by_role("link").all_inner_texts()


def _shots(page: Any, folder: Path, name: str) -> None:
    for label, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 800})
        # Nothing scrolls sideways on a phone.
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (name, width)
        page.screenshot(path=str(folder / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})


def _sign_in(page: Any, name: str) -> None:
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.keyboard.press("Enter")


def test_signed_out_the_landing_page_leads_to_sign_in_and_back(
    watched: Watched, live_service: Service, tmp_path: Path
) -> None:
    page, base = watched.page, live_service.base_url
    page.goto(f"{base}/")
    assert page.title() == "verifier-service"
    assert _links(page) == ["Sign in", "API docs"]
    _shots(page, tmp_path, "landing-signed-out")
    # With the keyboard: the skip link first, then the home link, then the first way on.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.get_by_role("link", name="Sign in").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/signin?next=/")
    operator = _person(live_service, "operator")
    _sign_in(page, operator)
    page.wait_for_url(f"{base}/")
    assert page.locator("#principal").inner_text() == operator
    assert _links(page) == ["Console", "Your account", "API docs"]
    _shots(page, tmp_path, "landing-operator")
    page.get_by_role("link", name="Console").press("Enter")
    page.wait_for_url(f"{base}/console")
    assert watched.off_site == []
    assert watched.errors == []


def test_a_reviewer_sees_the_review_app_and_a_403_page_on_the_console(
    watched: Watched, live_service: Service, tmp_path: Path
) -> None:
    page, base = watched.page, live_service.base_url
    reviewer = _person(live_service, "reviewer")
    page.goto(f"{base}/signin")
    _sign_in(page, reviewer)
    page.wait_for_url(f"{base}/")
    assert _links(page) == ["Review", "Your account", "API docs"]
    answer = page.goto(f"{base}/console")
    assert answer.status == 403
    assert page.get_by_role("heading", level=1).inner_text() == "Not allowed for your account"
    assert "operator" in page.get_by_role("alert").inner_text()
    _shots(page, tmp_path, "error-403")
    page.get_by_role("link", name="Home").press("Enter")
    page.wait_for_url(f"{base}/")
    assert watched.off_site == []
    # The 403 is the answer's status, which Chromium logs as a failed load; nothing else.
    assert [e for e in watched.errors if "403" not in e] == []


def test_an_unknown_address_is_a_404_page_with_a_way_home(
    watched: Watched, live_service: Service, tmp_path: Path
) -> None:
    page, base = watched.page, live_service.base_url
    answer = page.goto(f"{base}/consol/jobs")
    assert answer.status == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert page.title() == "404 Page not found · verifier-service"
    assert "There is no page at /consol/jobs." in page.get_by_role("alert").inner_text()
    _shots(page, tmp_path, "error-404")
    page.get_by_role("link", name="Home").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/")
    assert watched.off_site == []
    assert [e for e in watched.errors if "404" not in e] == []
