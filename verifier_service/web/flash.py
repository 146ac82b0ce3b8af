"""Flash messages of the web pages: what a form post did, said once on the page it redirects to.

A form handler answers `flash.redirect(url, request, settings, "Queue tier.fast paused.")`: a
303 to `url` that carries the message in a signed, http-only cookie. The next page rendered
through `flash.page(...)` reads it, shows it (`flash` in the template's context) and deletes the
cookie in the same response, so a reload, Back or another tab never shows it again. The cookie
is signed with the service's secret and bound to the browser's session: a message cannot be
forged, nor carried to another person's session, and one older than `MAX_AGE_S` is dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from itsdangerous import BadSignature, URLSafeTimedSerializer

from verifier_service.settings import Settings
from verifier_service.web import csrf
from verifier_service.web.render import Renderer

FLASH_COOKIE = "vs_flash"
#: A message not shown within this long (the redirect was not followed) is dropped.
MAX_AGE_S = 120
#: The longest message kept (a cookie holds about 4 kB).
MAX_CHARS = 500

Level = Literal["success", "error"]

#: The confirmation step of a page's button (`?confirm=cancel`, `?confirm=pause:tier.fast`):
#: the page shows the question and the form that does it, which works without script and from
#: the keyboard (a GET form leads there, the confirming button has focus).
ConfirmQuery = Annotated[
    str | None, Query(max_length=300, pattern=r"^[A-Za-z0-9_.@:-]+$", description="A step.")
]


@dataclass(frozen=True)
class Flash:
    """One message: its text, its level (how it is drawn) and its key (each post's own)."""

    text: str
    level: Level
    key: str


def _secret(settings: Settings) -> str:
    key = settings.auth.secret_key
    # Without a configured secret the CSRF tokens' per-process one (see `csrf.csrf_for`).
    return key.get_secret_value() if key else csrf._process_secret()


def _signer(settings: Settings) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(settings), salt="verifier-flash")


def _binding(settings: Settings, request: Request) -> str:
    session = request.cookies.get(csrf.SESSION_COOKIE) or ""
    mac = hmac.new(_secret(settings).encode(), b"flash:" + session.encode(), hashlib.sha256)
    return mac.hexdigest()[:32]


def redirect(
    url: str, request: Request, settings: Settings, text: str, level: Level = "success"
) -> RedirectResponse:
    """A 303 to `url` that says `text` once on the page it opens."""
    response = RedirectResponse(url, status_code=303)
    payload = [text[:MAX_CHARS], level, secrets.token_hex(8), _binding(settings, request)]
    response.set_cookie(
        FLASH_COOKIE, _signer(settings).dumps(payload), max_age=MAX_AGE_S, httponly=True,
        secure=settings.auth.cookie_secure, samesite="strict", path="/",
    )  # fmt: skip
    return response


def take(request: Request, settings: Settings) -> Flash | None:
    """The message this browser carries for its session, if any (the caller deletes it)."""
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        payload = _signer(settings).loads(raw, max_age=MAX_AGE_S)
    except BadSignature:  # tampered with, or too old (SignatureExpired is a BadSignature)
        return None
    if not (isinstance(payload, list) and len(payload) == 4):
        return None
    text, level, key, binding = payload
    if not hmac.compare_digest(str(binding), _binding(settings, request)):
        return None
    if level not in ("success", "error") or not isinstance(text, str):
        return None
    return Flash(text=text, level=level, key=str(key))


def page(
    renderer: Renderer, request: Request, settings: Settings, name: str, **context: Any
) -> HTMLResponse:
    """`renderer.page(...)` with the browser's flash message (`flash`, or None), shown once:
    the response deletes the cookie that carried it."""
    context["flash"] = take(request, settings)
    response = renderer.page(request, settings, name, **context)
    if FLASH_COOKIE in request.cookies:
        response.delete_cookie(
            FLASH_COOKIE, httponly=True, secure=settings.auth.cookie_secure,
            samesite="strict", path="/",
        )  # fmt: skip
    return response
