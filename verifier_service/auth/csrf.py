"""Moved to `verifier_service.web.csrf` (the web layer's); this name stays until the review pages
import it from there."""

from verifier_service.web.csrf import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    Csrf,
    csrf_for,
    page_token,
    token_valid,
)

__all__ = ["CSRF_COOKIE", "SESSION_COOKIE", "Csrf", "csrf_for", "page_token", "token_valid"]
