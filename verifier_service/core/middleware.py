"""ASGI middleware of the API: request ids, and limits checked before a body is parsed."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

import structlog
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from verifier_service.core import jsonbody

#: Deepest JSON nesting accepted in a request body. A reward request needs 6 levels around a
#: trajectory step's payload; deeper tool calls and schemas are not a trainer's honest output,
#: and 500 levels used to take minutes and a 500 (serialisers give up near 255).
MAX_JSON_DEPTH = 64

#: C stack of the API's worker threads, where the inline lane runs chem.fast (RDKit recurses
#: once per atom: the longest SMILES accepted needs about 1.9 MiB); set, not left to `ulimit -s`.
WORKER_THREAD_STACK_BYTES = 16 * 1024 * 1024

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


class RequestId:
    """Gives every request an id (a sane incoming X-Request-ID, else a new one): in
    `request.state.request_id`, in the logs of the request, and as the X-Request-ID header of
    every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"")
        text = incoming.decode("latin-1")
        request_id = text if _REQUEST_ID.fullmatch(text) else uuid.uuid4().hex
        # scope["state"] is the dict behind request.state, shared with the outer error handler.
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            await self.app(scope, receive, send_with_id)


def request_id_of(request: Request) -> str:
    request_id = getattr(request.state, "request_id", None)
    return request_id if isinstance(request_id, str) else uuid.uuid4().hex


class JsonBodyCheck:
    """Refuses a JSON body before it is parsed when it nests deeper than `max_depth` (422), holds
    an array of more than `max_items` elements at its top two levels (413), is not UTF-8 (422,
    with the byte offset) or holds a number the service cannot keep as sent (422, with where).

    Large bodies are scanned on a worker thread, so the event loop keeps serving.
    `too_many_hints`: the 413's hint for a route, by the end of its path (else a generic one)."""

    def __init__(
        self,
        app: ASGIApp,
        max_depth: int,
        max_items: int,
        too_many_hints: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.max_depth = max_depth
        self.max_items = max_items
        self.too_many_hints = dict(too_many_hints or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        content_type = dict(scope.get("headers") or []).get(b"content-type", b"")
        if content_type and b"json" not in content_type:  # FastAPI reads JSON without one too
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([], message, receive), send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if len(body) < 64 * 1024:
            refusal = self._refusal(body, scope["path"])
        else:
            refusal = await run_in_threadpool(self._refusal, body, scope["path"])
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, _replay(chunks, None, receive), send)

    def _refusal(self, body: bytes, path: str) -> JSONResponse | None:
        bare = jsonbody.without_strings(body)
        depth = jsonbody.json_depth(bare)
        if depth > self.max_depth:
            return _invalid(
                "body",
                f"the JSON body nests {depth} levels deep; the limit is {self.max_depth}",
                f"keep payloads, references and schemas within {self.max_depth} levels of nesting",
            )
        elements = jsonbody.largest_array(bare, self.max_items + 1)
        if elements > self.max_items:
            return JSONResponse(
                {
                    "error": "payload_too_large",
                    "message": f"{elements} items in one request; the limit is {self.max_items}",
                    "hint": next(
                        (h for end, h in self.too_many_hints.items() if path.endswith(end)),
                        "split the items over several requests",
                    ),
                },
                status_code=413,
            )
        problem = jsonbody.utf8_problem(body)
        if problem is not None:
            return _invalid("body", problem, "send the body as UTF-8 JSON")
        where = jsonbody.number_problem(body, bare)
        if where is not None:
            return _invalid(
                *where,
                "numbers must be finite doubles (JSON has no NaN or Infinity) and integers "
                f"at most {jsonbody.MAX_INT_DIGITS} digits; send larger values as strings",
            )
        return None


def _invalid(loc: str, message: str, hint: str) -> JSONResponse:
    """A 422 shaped as the request validation's (core.handlers)."""
    return JSONResponse(
        {
            "error": "invalid_request",
            "message": f"{loc}: {message}",
            "errors": [{"loc": loc, "msg": message, "type": "value_error"}],
            "hint": hint,
        },
        status_code=422,
    )


class NulInUrl:
    """Rejects a URL whose path or query holds a NUL character (%00) with a 422: no name, id
    or filter of this API contains one, and PostgreSQL cannot even compare a text with one
    (a route without a pattern for a parameter would answer 500)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            where = None
            if "\x00" in scope.get("path", ""):  # the path arrives decoded
                where = "path"
            elif b"%00" in scope.get("query_string", b""):  # the query as sent
                where = "query"
            if where is not None:
                response = JSONResponse(
                    {
                        "error": "invalid_request",
                        "message": f"the URL's {where} holds a NUL character (%00)",
                        "hint": "no name, id or filter of this API contains one",
                    },
                    status_code=422,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _replay(chunks: list[bytes], last: Message | None, receive_more: Receive) -> Receive:
    """A receive() that hands out an already-read body, then what the client sends next."""
    pending: list[Message] = (
        [{"type": "http.request", "body": b"".join(chunks), "more_body": False}] if chunks else []
    )
    if last is not None:
        pending.append(last)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        return await receive_more()  # after the body: the client's disconnect, when it comes

    return receive


class BodySizeLimit:
    """Rejects request bodies above the limit with a 413 before they are parsed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> JSONResponse:
        return JSONResponse(
            {
                "error": "payload_too_large",
                "message": f"request body exceeds the limit of {self.max_bytes} bytes",
                "hint": "split the items over several requests",
            },
            status_code=413,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._too_large()(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await self._too_large()(scope, receive, send)


class _BodyTooLarge(Exception):
    pass
