"""What the console tests share: the operator's password, the jobs the service ran."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from support import Service

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
