"""People's sessions over HTTP: cookies, CSRF on API calls, and brute-force back-off."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest
import redis
from auth_support import PASSWORD, new_person
from support import Service

from verifier_service.auth.limits import SignInThrottle
from verifier_service.settings import AuthSettings


def _form(service: Service, session: str | None = None) -> tuple[str, str]:
    """A fresh page's CSRF cookie and its forms' token: the sign-in page, or with a session
    the account page (tokens are bound to the session they were shown to)."""
    if session is None:
        page = httpx.get(f"{service.base_url}/signin", timeout=10)
    else:
        cookies = {"Cookie": f"vs_session={session}"}
        page = httpx.get(f"{service.base_url}/account", headers=cookies, timeout=10)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None
    return page.cookies["vs_csrf"], token.group(1)


def _sign_in(service: Service, name: str, password: str) -> httpx.Response:
    nonce, token = _form(service)
    return httpx.post(
        f"{service.base_url}/signin",
        data={"username": name, "password": password, "csrf_token": token},
        headers={"Cookie": f"vs_csrf={nonce}"},
        timeout=30,
    )


@pytest.fixture
def person(live_service: Service) -> str:
    return new_person(live_service, "operator")


def test_a_session_works_for_reads_and_needs_csrf_for_writes(
    live_service: Service, person: str
) -> None:
    signed_in = _sign_in(live_service, person, PASSWORD)
    assert signed_in.status_code == 303
    set_cookie = signed_in.headers["set-cookie"]
    assert "HttpOnly" in set_cookie
    assert "Secure" in set_cookie
    assert "SameSite=lax" in set_cookie
    session = signed_in.cookies["vs_session"]
    nonce, token = _form(live_service, session)
    cookies = {"Cookie": f"vs_session={session}; vs_csrf={nonce}"}
    with httpx.Client(base_url=live_service.base_url, timeout=10, headers=cookies) as browser:
        me = browser.get("/v1/me").json()
        assert (me["name"], me["via"], me["roles"]) == (person, "session", ["operator"])
        body = {"document": "name: x", "format": "yaml"}
        refused = browser.post("/v1/policies/validate", json=body)
        assert refused.status_code == 401
        assert refused.json()["reason"] == "csrf"
        allowed = browser.post("/v1/policies/validate", json=body, headers={"X-CSRF-Token": token})
        assert allowed.status_code not in (401, 403)


def test_failed_sign_ins_of_one_user_are_slowed_down(live_service: Service, person: str) -> None:
    for _ in range(5):
        assert _sign_in(live_service, person, "wrong password!").status_code == 400
    slowed = _sign_in(live_service, person, PASSWORD)  # even the right password waits now
    assert slowed.status_code == 429
    assert "Try again in" in slowed.text
    assert int(slowed.headers["retry-after"]) >= 1
    time.sleep(int(slowed.headers["retry-after"]) + 0.2)
    assert _sign_in(live_service, person, PASSWORD).status_code == 303


def test_back_off_doubles_per_user_and_per_address(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    settings = AuthSettings(signin_failures_per_user=2, signin_failures_per_address=3)
    throttle = SignInThrottle(client, settings)
    user, address = f"u-{uuid.uuid4().hex}", f"10.0.0.{uuid.uuid4().int % 250}"
    throttle.failed(user, address)
    assert throttle.wait_s(user, address) == 0
    throttle.failed(user, address)
    assert throttle.wait_s(user, address) == 1  # threshold reached: 1 s
    throttle.failed(user, address)
    assert throttle.wait_s(user, address) == 2  # the user's wait doubled
    assert throttle.wait_s("someone-else", address) == 1  # the address reached its threshold
    # Another address, same user: still slowed (the user's count).
    assert throttle.wait_s(user, "10.9.9.9") == 2
    throttle.succeeded(user, address)
    assert throttle.wait_s(user, "10.9.9.9") == 0


def test_a_username_that_cannot_exist_gets_the_same_answer(live_service: Service) -> None:
    # Control characters (a NUL would not even reach PostgreSQL) are a wrong sign-in, not a 500.
    response = _sign_in(live_service, f"x\x00{uuid.uuid4().hex[:6]}", "whatever password")
    assert response.status_code == 400
    assert "Wrong username or password." in response.text


def test_one_persons_csrf_nonce_and_token_do_not_pass_on_anothers_session(
    live_service: Service,
) -> None:
    ann, bob = new_person(live_service, "operator"), new_person(live_service, "operator")
    sessions = {}
    for name in (ann, bob):
        signed_in = _sign_in(live_service, name, PASSWORD)
        assert signed_in.status_code == 303
        sessions[name] = signed_in.cookies["vs_session"]
    ann_nonce, ann_token = _form(live_service, sessions[ann])
    bob_nonce, bob_token = _form(live_service, sessions[bob])
    body = {"document": "name: x", "format": "yaml"}

    def validate(session: str, nonce: str, token: str) -> httpx.Response:
        cookies = {"Cookie": f"vs_session={session}; vs_csrf={nonce}", "X-CSRF-Token": token}
        return httpx.post(
            f"{live_service.base_url}/v1/policies/validate", json=body, headers=cookies, timeout=10
        )

    # Ann's nonce and token (read off her own page) on Bob's session: refused.
    stolen = validate(sessions[bob], ann_nonce, ann_token)
    assert stolen.status_code == 401
    assert stolen.json()["reason"] == "csrf"
    # A token of the signed-out sign-in page does not pass on a session either.
    anonymous_nonce, anonymous_token = _form(live_service)
    assert validate(sessions[bob], anonymous_nonce, anonymous_token).status_code == 401
    # Each person's own pair works.
    assert validate(sessions[bob], bob_nonce, bob_token).status_code not in (401, 403)
    assert validate(sessions[ann], ann_nonce, ann_token).status_code not in (401, 403)

    # The plain HTML forms too: Ann's pair cannot sign Bob out.
    signout = httpx.post(
        f"{live_service.base_url}/signout",
        data={"csrf_token": ann_token},
        headers={"Cookie": f"vs_session={sessions[bob]}; vs_csrf={ann_nonce}"},
        timeout=10,
    )
    assert signout.status_code == 403
    me = httpx.get(
        f"{live_service.base_url}/v1/me",
        headers={"Cookie": f"vs_session={sessions[bob]}"},
        timeout=10,
    )
    assert me.status_code == 200
    assert me.json()["name"] == bob
