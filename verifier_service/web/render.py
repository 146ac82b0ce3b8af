"""One page renderer for every app (sign-in, console, review): Jinja2 over the app's templates
and the layer's own (`base.html`, `error.html`), the CSRF token its forms send, and the
security headers (`headers.secure`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from verifier_service.settings import Settings
from verifier_service.web import csrf
from verifier_service.web.headers import secure

#: The layer's templates: base.html (every page extends it) and error.html.
TEMPLATES = Path(__file__).parent / "templates"


class Renderer:
    """The pages of one app: `Renderer(HERE / "templates")`, then `renderer.page(...)`."""

    def __init__(self, *directories: Path) -> None:
        # The app's own directories first: a page name resolves there before the layer's.
        self.templates = Jinja2Templates(directory=[*directories, TEMPLATES])

    @property
    def env(self) -> jinja2.Environment:
        """The Jinja2 environment, for an app's own filters."""
        return self.templates.env

    def page(
        self, request: Request, settings: Settings, name: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """Template `name` with `context` and the page's CSRF token (`csrf_token`, for its forms
        and script); the nonce cookie is set when the browser has none, so that pages open in
        several tabs keep working together."""
        nonce, context["csrf_token"] = csrf.page_token(request.cookies, settings.auth)
        response = self.templates.TemplateResponse(request, name, context, status_code=status)
        if request.cookies.get(csrf.CSRF_COOKIE) != nonce:
            keep_nonce(response, settings, nonce)
        return secure(response)

    def bare(self, request: Request, name: str, status_code: int, **context: Any) -> HTMLResponse:
        """A page without forms (an error page): no CSRF token, no cookie."""
        response = self.templates.TemplateResponse(request, name, context, status_code=status_code)
        return secure(response)


def keep_nonce(response: HTMLResponse | Any, settings: Settings, nonce: str) -> None:
    """Set the browser's CSRF nonce cookie (http-only; forms carry the signed token)."""
    response.set_cookie(
        csrf.CSRF_COOKIE, nonce, httponly=True, secure=settings.auth.cookie_secure,
        samesite="strict", path="/",
    )  # fmt: skip
