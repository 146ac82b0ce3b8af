"""CSRF tokens of the web pages: signed double-submit tokens."""

from __future__ import annotations

import hmac
import re
import secrets
from functools import lru_cache

import structlog
from argon2 import PasswordHasher
from itsdangerous import BadSignature, URLSafeSerializer

from verifier_service.settings import AuthSettings

log = structlog.get_logger(__name__)

KEY_PREFIX = "vsk_"
#: vsk_<12 hex: the prefix listings show>_<43 url-safe characters: 256 random bits>
KEY_PATTERN = re.compile(r"^vsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
LOCAL_ADMIN = "local-admin"
_hasher = PasswordHasher()


# --- CSRF --------------------------------------------------------------------------------------


class Csrf:
    """Signed double-submit tokens: a random nonce in an http-only cookie, and the same nonce
    signed with the secret key in the form (or the X-CSRF-Token header). A page on another
    site can neither read the cookie nor forge the signature."""

    def __init__(self, secret: str) -> None:
        self._signer = URLSafeSerializer(secret, salt="verifier-csrf")

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def token(self, nonce: str) -> str:
        return str(self._signer.dumps(nonce))

    def valid(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        try:
            signed = self._signer.loads(token)
        except BadSignature:
            return False
        return isinstance(signed, str) and hmac.compare_digest(signed, nonce)


@lru_cache
def _process_secret() -> str:
    return secrets.token_urlsafe(32)


def csrf_for(settings: AuthSettings) -> Csrf:
    # Without a configured secret (tests, an unconfigured dev run) a per-process one still
    # protects forms; `verifier-service api` refuses to start without a configured one.
    secret = settings.secret_key.get_secret_value() if settings.secret_key else _process_secret()
    return Csrf(secret)
