"""What the console tests share: the operator's password, a service of a module's own with its
operator, the jobs the service ran, a signed-in tab, and the checks the browser tests make."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import Service, private_backends, start_service

OPERATOR_PASSWORD = "correct horse battery staple"


def unique_smiles() -> str:
    """A phenol ether with a random chain of 16 C/N atoms: a molecule no other test sends."""
    bits = uuid.uuid4().int
    return "c1ccccc1OC" + "".join("CN"[(bits >> i) & 1] for i in range(16))


@dataclass
class Console:
    """The service, its operator (a person with a password) and the jobs it ran, as the API
    answered them."""

    service: Service
    operator: str
    jobs: list[dict[str, Any]] = field(default_factory=list)
    principals: list[str] = field(default_factory=list)


@contextmanager
def private_console(
    tmp_path_factory: pytest.TempPathFactory, name: str, **env: str
) -> Iterator[Console]:
    """A service on its own database and Redis (so every count is exact) running the ladder,
    tier.fast and callbacks workers, with an operator who signs in with OPERATOR_PASSWORD."""
    with private_backends(name) as (pg_url, redis_url):
        service = start_service(
            tmp_path_factory.mktemp(name),
            "ladder,tier.fast,callbacks",
            VERIFIER_DATABASE__URL=pg_url,
            VERIFIER_BROKER__URL=redis_url,
            **env,
        )
        try:
            operator = f"op-{uuid.uuid4().hex[:6]}"
            made = service.cli(
                "users", "create", "--role", "operator", operator, stdin=OPERATOR_PASSWORD + "\n"
            )
            assert made.returncode == 0, made.stderr
            yield Console(service=service, operator=operator)
        finally:
            service.stop_all()


def make_policy(console: Console, document: dict[str, Any]) -> None:
    """Store the policy `document` (its first version, active)."""
    with console.service.client() as client:
        made = client.post("/v1/policies", json={"document": document})
    assert made.status_code == 201, made.text


@contextmanager
def operator_tab(
    browser: Any,
    base_url: str,
    path: str,
    operator: str,
    *,
    viewport: tuple[int, int] = (1440, 900),
    timeout_ms: int | None = None,
) -> Iterator[Any]:
    """A tab that opened `path`, was sent to /signin, signed in as `operator` and came back.
    On leaving, no request went off-site and no script error was raised on the page."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    tab = context.new_page()
    if timeout_ms is not None:
        tab.set_default_timeout(timeout_ms)
    offsite: list[str] = []
    tab.on("request", lambda r: offsite.append(r.url) if "127.0.0.1" not in r.url else None)
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(f"{base_url}{path}")
    tab.wait_for_url(f"**/signin?next={path}")
    tab.get_by_label("Username").fill(operator)
    tab.get_by_label("Password").fill(OPERATOR_PASSWORD)
    tab.get_by_role("button", name="Sign in").click()
    tab.wait_for_url(f"**{path}")
    try:
        yield tab
    finally:
        context.close()
    assert offsite == []
    assert errors == []


def asks_with_keyboard(tab: Any, button: str, confirm: str) -> None:
    """Focus `button`, press Enter: the page asks, with the focus on the confirming button,
    which says `confirm` (the post is not made yet)."""
    tab.get_by_role("button", name=button).focus()
    with tab.expect_navigation():
        tab.keyboard.press("Enter")
    assert tab.locator("#confirm").is_visible(), "no question was asked"
    # Chromium applies autofocus at the first rendering after load: wait for it (a few ms).
    tab.wait_for_selector("#confirm button:focus", timeout=5000)
    assert tab.evaluate("document.activeElement.textContent.trim()") == confirm


def yes_with_keyboard(tab: Any) -> None:
    """Enter on the focused confirming button: the post, and the redirect back."""
    with tab.expect_navigation():
        tab.keyboard.press("Enter")


def confirm_with_keyboard(tab: Any, button: str, confirm: str) -> None:
    """The question (`asks_with_keyboard`), then yes."""
    asks_with_keyboard(tab, button, confirm)
    yes_with_keyboard(tab)


def said_once(tab: Any, text: str) -> None:
    """The page says `text` in a status message, and no longer after a reload."""
    status = tab.locator("#flash")
    assert status.get_attribute("role") == "status"
    assert text in status.inner_text()
    tab.reload()
    assert tab.locator("#flash").count() == 0


def shots(tab: Any, folder: Path, name: str, *, fits_390: bool = False) -> None:
    """Full-page screenshots at 1280 and 390 px (`fits_390`: nothing scrolls sideways there)."""
    tab.set_viewport_size({"width": 1280, "height": 800})
    tab.screenshot(path=str(folder / f"{name}-1280.png"), full_page=True)
    tab.set_viewport_size({"width": 390, "height": 844})
    tab.screenshot(path=str(folder / f"{name}-390.png"), full_page=True)
    if fits_390:
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390, name
    tab.set_viewport_size({"width": 1440, "height": 900})


def scrolls_sideways(tab: Any, selector: str) -> list[str]:
    """The page, and each element `selector` finds with its card (`.card-panel`) around it,
    that is wider than its box (scrollWidth > clientWidth): they would scroll sideways."""
    return list(
        tab.evaluate(
            """(selector) => {
              const found = [document.documentElement];
              for (const e of document.querySelectorAll(selector)) {
                found.push(e);
                const card = e.closest('.card-panel');
                if (card) found.push(card);
              }
              return found.filter(e => e.scrollWidth > e.clientWidth)
                .map(e => e.id || e.getAttribute('aria-labelledby') || e.tagName);
            }""",
            selector,
        )
    )


def _request(smiles: list[str], tag: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"kind": "molecule", "payload": {"smiles": s}} for s in smiles]
    items.append({"kind": "molecule", "payload": {"smiles": f"C1CC{tag}"}})  # unclosed ring
    items.append(
        {
            "kind": "json",
            "payload": {"tool": "search", "args": {"q": tag}},
            "reference": {"schema": {"type": "object", "required": ["tool", "args"]}},
        }
    )
    return {"policy": "default", "items": items, "wait_s": 30}


def two_trainers_ran(state: Console) -> Console:
    """`state` after two trainers' jobs ran on it (the second one's molecules are the first's)."""
    smiles = [unique_smiles() for _ in range(3)]
    for n, principal in enumerate(("trainer-a", "trainer-b")):
        key = state.service.create_key(principal, "trainer")
        with state.service.client(api_key=key) as client:
            # The second trainer sends the same molecules: its verdicts come from the cache.
            answer = client.post("/v1/rewards", json=_request(smiles, "N" * (n + 1)))
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "completed"
        state.jobs.append(answer.json())
        state.principals.append(principal)
    return state
