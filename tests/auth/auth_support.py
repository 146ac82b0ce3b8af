"""What the auth tests share: a password that passes the rules, people made with the CLI and
signed in through the sign-in form, and API processes of a test's own settings."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import httpx
from support import Service, free_port, wait_ready

PASSWORD = "correct horse battery staple"


def new_person(service: Service, role: str) -> str:
    """A new user with `role` and PASSWORD, made with `verifier-service users create`."""
    name = f"{role[:3]}-{uuid.uuid4().hex[:6]}"
    made = service.cli("users", "create", "--role", role, name, stdin=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    return name


@dataclass
class Session:
    """A person signed in on the sign-in page, as a browser holds it: the session cookie, and the
    CSRF nonce and token of a page shown to that session."""

    base_url: str
    cookie: str
    nonce: str
    token: str

    def headers(self, *, write: bool = False) -> dict[str, str]:
        """The cookies a browser sends (Secure cookies: by hand, httpx keeps them for https),
        with the page's token in X-CSRF-Token for a write."""
        headers = {"Cookie": f"vs_session={self.cookie}; vs_csrf={self.nonce}"}
        if write:
            headers["X-CSRF-Token"] = self.token
        return headers


def sign_in(base_url: str, name: str, password: str = PASSWORD) -> Session:
    """Sign `name` in through the sign-in form, then read a CSRF token off their account page."""
    page = httpx.get(f"{base_url}/signin", timeout=30)
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    answer = httpx.post(
        f"{base_url}/signin",
        data={"username": name, "password": password, "csrf_token": found.group(1)},
        headers={"Cookie": f"vs_csrf={page.cookies['vs_csrf']}"},
        timeout=30,
    )
    assert answer.status_code == 303, answer.text
    cookie = answer.cookies["vs_session"]
    account = httpx.get(
        f"{base_url}/account", headers={"Cookie": f"vs_session={cookie}"}, timeout=30
    )
    found = re.search(r'name="csrf_token" value="([^"]+)"', account.text)
    assert found is not None
    return Session(base_url, cookie, account.cookies["vs_csrf"], found.group(1))


@contextmanager
def own_api(service: Service, **env: str) -> Iterator[Service]:
    """An API process of the test's own on the service's database and Redis, with `env` set
    (settings a test needs other than the shared service's)."""
    own = replace(service, env={**service.env, **env}, processes={}, logs={})
    port = free_port()
    own.base_url = f"http://127.0.0.1:{port}"
    api = own.start(f"api-{port}", "api", "--port", str(port))
    try:
        wait_ready(own.base_url, process=api)
        yield own
    finally:
        own.stop_all()
