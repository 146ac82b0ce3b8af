"""How errors become responses: what was wrong and how to fix it, never our internals."""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import DBAPIError

from verifier_service.core.db import is_transient
from verifier_service.core.errors import DomainError, ServiceUnavailableError
from verifier_service.core.middleware import request_id_of

log = structlog.get_logger(__name__)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": _loc(tuple(e.get("loc", ()))), "msg": e.get("msg", ""), "type": e.get("type")}
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"loc": "body", "msg": "invalid request"}
    return JSONResponse(
        {
            "error": "invalid_request",
            "message": f"{first['loc']}: {first['msg']}",
            "errors": errors,
            "hint": "see the request schema at /docs",
        },
        status_code=422,
    )


async def _domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
        page = exc.page_for(request.url.path)
        if page is not None:  # a person's browser: a page to go to instead of JSON
            return RedirectResponse(page, status_code=303)
    return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers())


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    # The database was unreachable or restarting (after the request's own retries): nothing
    # was half-written (its transaction rolled back), so the caller can simply send it again.
    if not is_transient(exc):
        return await _unexpected_error(request, exc)
    log.warning("database unavailable", path=request.url.path, error=type(exc).__name__)
    unavailable = ServiceUnavailableError(
        "the database cannot be reached right now; nothing of this request was stored",
        hint="send the request again in a few seconds (with the same Idempotency-Key)",
        retry_after_s=2,
    )
    return await _domain_error(request, unavailable)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # The exception's text can carry SQL, parameters or paths: it goes to the log, not the client.
    request_id = request_id_of(request)
    log.error("unhandled error", path=request.url.path, request_id=request_id, exc_info=exc)
    return JSONResponse(
        {
            "error": "internal_error",
            "message": f"an unexpected error happened on our side (request id {request_id})",
            "hint": "retry later; quote the request id when you report it",
            "request_id": request_id,
        },
        status_code=500,
        headers={"X-Request-ID": request_id},
    )


def install_error_handlers(app: FastAPI) -> None:
    """One handler per kind of error: malformed payloads (422), domain errors (their own status
    and headers), an unreachable database (503), and anything else (a generic 500)."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(DomainError, _domain_error)
    app.add_exception_handler(DBAPIError, _database_unavailable)
    app.add_exception_handler(Exception, _unexpected_error)
