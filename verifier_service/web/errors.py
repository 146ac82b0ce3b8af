"""HTML error pages for people: a browser asking for a page gets a page in the product's style
(404, 403, 422, 500, ...), while API clients keep the JSON bodies of `core.handlers`.

`install_page_errors` wraps the app's JSON handlers, so there is still one handler per kind of
error: it decides page or JSON, and for JSON hands over to the handler it wraps.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from verifier_service.core.errors import DomainError
from verifier_service.web.render import Renderer

Handler = Callable[[Request, Exception], Awaitable[Response] | Response]

#: Paths that only programs call: they answer JSON whatever the Accept header says.
API_PREFIXES = ("/v1/", "/k/", "/run_code", "/metrics", "/healthz", "/readyz", "/openapi.json")

#: What a person reads as the page's heading, by status.
HEADINGS = {
    400: "That request could not be used",
    401: "Please sign in",
    403: "Not allowed for your account",
    404: "Page not found",
    405: "Not possible here",
    409: "That conflicts with the current state",
    422: "Some of what was sent is not valid",
    429: "Too many requests",
    500: "Something went wrong on our side",
    503: "Not available right now",
}

renderer = Renderer()


def wants_page(request: Request) -> bool:
    """A person's browser asking for a page (not a program, not a page's script)."""
    if request.url.path.startswith(API_PREFIXES):
        return False
    return "text/html" in request.headers.get("accept", "")


def _heading(status: int) -> str:
    if status in HEADINGS:
        return HEADINGS[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def error_page(
    request: Request,
    status: int,
    message: str,
    *,
    hint: str | None = None,
    details: list[str] | None = None,
    headers: dict[str, str] | None = None,
    request_id: str | None = None,
) -> Response:
    """The error page: what happened, what to do, and the ways on (home, sign in, API docs)."""
    response = renderer.bare(
        request, "error.html", status, status=status, heading=_heading(status), message=message,
        hint=hint, details=details or [], path=request.url.path,
        request_id=request_id,
    )  # fmt: skip
    response.headers.update(headers or {})
    return response


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "?", "!")) else ".")


def _domain_page(request: Request, exc: DomainError) -> Response | None:
    if request.method == "GET" and exc.page_for(request.url.path) is not None:
        return None  # the JSON handler sends the browser on (e.g. to the sign-in page)
    hint = _sentence(exc.hint) if exc.hint else None
    return error_page(request, exc.status_code, _sentence(exc.message), hint=hint,
                      headers=exc.headers())  # fmt: skip


def _validation_page(request: Request, exc: RequestValidationError) -> Response:
    details = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error.get("loc", ()) if part not in ("query", "path"))
        details.append(f"{loc or 'request'}: {error.get('msg', 'invalid')}")
    return error_page(
        request, 422, "The address or form has a value this page cannot use.",
        details=details, hint="Correct the value named below and try again.",
    )  # fmt: skip


def _http_page(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        message = f"There is no page at {request.url.path}."
        hint = "The address may be mistyped, or the page moved. Start again from the home page."
    else:
        message, hint = _sentence(str(exc.detail)), None
    return error_page(request, exc.status_code, message, hint=hint,
                      headers=dict(exc.headers or {}))  # fmt: skip


def _server_error_page(request: Request, request_id: str | None) -> Response:
    response = error_page(request, 500, "The page could not be made.", request_id=request_id,
                          hint="Try again in a moment; if it keeps happening, tell the operators "
                          "and quote the request id below.")  # fmt: skip
    if request_id:
        response.headers["X-Request-ID"] = request_id
    return response


def _page_for(request: Request, exc: Exception) -> Response | None:
    if isinstance(exc, DomainError):
        return _domain_page(request, exc)
    if isinstance(exc, RequestValidationError):
        return _validation_page(request, exc)
    if isinstance(exc, HTTPException):
        return _http_page(request, exc)
    return None


def _wrap(kind: type[Exception], json_handler: Handler | None) -> Handler:
    async def handle(request: Request, exc: Exception) -> Response:
        if wants_page(request) and kind is not Exception:
            page = _page_for(request, exc)
            if page is not None:
                return page
        if json_handler is None:
            raise exc
        answer: Any = json_handler(request, exc)
        response: Response = await answer if inspect.isawaitable(answer) else answer
        if kind is Exception and wants_page(request):
            # The JSON handler logged the error under this id; the page shows the same id.
            return _server_error_page(request, response.headers.get("X-Request-ID"))
        return response

    return handle


def install_page_errors(app: FastAPI) -> None:
    """Let every kind of error the app handles answer a person's browser with a page. Call it
    after `core.handlers.install_error_handlers`."""
    for kind in (DomainError, RequestValidationError, HTTPException, Exception):
        app.add_exception_handler(kind, _wrap(kind, app.exception_handlers.get(kind)))
