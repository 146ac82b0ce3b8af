"""CSRF tokens of the web pages: signed double-submit tokens bound to the session."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from functools import lru_cache

from itsdangerous import BadSignature, URLSafeSerializer

from verifier_service.settings import AuthSettings

SESSION_COOKIE = "vs_session"
CSRF_COOKIE = "vs_csrf"


class Csrf:
    """Signed double-submit tokens: a random nonce in an http-only cookie, and the same nonce
    signed with the secret key in the form (or the X-CSRF-Token header), together with a MAC of
    the session the page was made for. A page on another site can neither read the cookie nor
    forge the signature, and one person's nonce and token are worthless with another's session
    (OWASP's signed double-submit cookie)."""

    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()
        # Its own salt: tokens of the unbound kind signed before no longer pass.
        self._signer = URLSafeSerializer(secret, salt="verifier-csrf-session")

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def _binding(self, session: str | None) -> str:
        # A MAC, not the session token or its hash (the hash is the session row's id): the
        # token is in the page, and must tell nothing about the session.
        if not session:
            return ""
        mac = hmac.new(self._secret, b"csrf-session:" + session.encode(), hashlib.sha256)
        return mac.hexdigest()[:32]

    def token(self, nonce: str, session: str | None) -> str:
        """The token of a page shown with this nonce to this session (None: signed out)."""
        return str(self._signer.dumps([nonce, self._binding(session)]))

    def valid(self, nonce: str | None, token: str | None, session: str | None) -> bool:
        if not nonce or not token:
            return False
        try:
            signed = self._signer.loads(token)
        except BadSignature:
            return False
        if not (isinstance(signed, list) and len(signed) == 2):
            return False
        if not all(isinstance(part, str) for part in signed):
            return False
        bound_nonce, bound_session = signed
        same_nonce = hmac.compare_digest(bound_nonce, nonce)
        return hmac.compare_digest(bound_session, self._binding(session)) and same_nonce


@lru_cache
def _process_secret() -> str:
    return secrets.token_urlsafe(32)


def csrf_for(settings: AuthSettings) -> Csrf:
    # Without a configured secret (tests, an unconfigured dev run) a per-process one still
    # protects forms; `verifier-service api` refuses to start without a configured one.
    secret = settings.secret_key.get_secret_value() if settings.secret_key else _process_secret()
    return Csrf(secret)


def page_token(cookies: Mapping[str, str], settings: AuthSettings) -> tuple[str, str]:
    """For a page shown to a browser with these cookies: the nonce its CSRF cookie keeps (the
    browser's own, or a new one) and the token of the page's forms, bound to its session."""
    nonce = cookies.get(CSRF_COOKIE) or Csrf.new_nonce()
    return nonce, csrf_for(settings).token(nonce, cookies.get(SESSION_COOKIE))


def token_valid(cookies: Mapping[str, str], settings: AuthSettings, token: str | None) -> bool:
    """Whether a form's (or header's) token was made for this browser's nonce and session."""
    return csrf_for(settings).valid(cookies.get(CSRF_COOKIE), token, cookies.get(SESSION_COOKIE))
