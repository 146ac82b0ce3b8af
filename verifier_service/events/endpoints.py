"""HTTP endpoints of job events: the server-sent events stream, the changes feed, deliveries."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from verifier_service.auth.deps import JobViewer, still_authenticated
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import transaction
from verifier_service.core.deps import SessionDep, SettingsDep, WaiterDep
from verifier_service.core.notify import JobWaiter
from verifier_service.events import service
from verifier_service.events.schemas import ChangesPage, DeliveryOut, JobEventOut

router = APIRouter(tags=["events"])

#: Tells EventSource clients how long to wait before reconnecting.
RETRY_MS = 2000


def _visible(job_id: str, principal: AuthenticatedPrincipal) -> None:
    with transaction() as session:
        service.visible_job(session, job_id, principal)


def _after(job_id: str, after: int) -> tuple[list[JobEventOut], int | None]:
    """Events after `after`, and the id of the job.finished event the stream ends at (None
    while the job runs). Read after the events: an end the events do not reach yet is read
    again next time."""
    with transaction() as session:
        events = service.events_after(session, job_id, after)
        return events, service.last_finished(session, job_id)


def _frame(event: JobEventOut) -> str:
    return f"id: {event.id}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n"


async def _stream(
    job_id: str, after: int, waiter: JobWaiter, keepalive_s: float
) -> AsyncIterator[str]:
    """Events after `after` until the job's last job.finished (an earlier one, before an
    operator's retry, does not end it; resumed after the last one, until none are left);
    woken by the Redis notification, with a read every keepalive_s as the slow fallback."""
    yield f"retry: {RETRY_MS}\n\n"
    with waiter.watch_events(job_id) as woken:
        while True:
            woken.clear()  # before the read: a notification during it is not lost
            events, end = await run_in_threadpool(_after, job_id, after)
            if not events and end is not None and after >= end:
                return  # resumed after the end: what came later (revisions) is delivered
            for event in events:
                yield _frame(event)
                after = event.id
                if event.id == end:
                    return
            if events:
                continue
            try:
                await asyncio.wait_for(woken.wait(), timeout=keepalive_s)
            except TimeoutError:
                yield ": keep-alive\n\n"


async def _while_authenticated(
    frames: AsyncIterator[str], authenticated: Callable[[], bool], every_s: float
) -> AsyncIterator[str]:
    """The frames of a stream while the credential that opened it still holds: checked again
    when `every_s` has passed, before the next frame or while none comes. A revoked or
    expired key, or a session signed out, closes the stream (the client's resume then gets
    the 401 saying why)."""
    checked = time.monotonic()
    pending: asyncio.Task[str] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(frames))
            left = checked + every_s - time.monotonic()
            if left > 0:
                await asyncio.wait({pending}, timeout=left)
            if time.monotonic() - checked >= every_s:
                if not await run_in_threadpool(authenticated):
                    return
                checked = time.monotonic()
            if not pending.done():
                continue
            try:
                frame = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield frame
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        close = getattr(frames, "aclose", None)  # a generator's: its `with` blocks end now
        if close is not None:
            await close()


@router.get(
    "/v1/jobs/{job_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "An SSE stream"}},
)
async def job_events(
    request: Request,
    job_id: str,
    principal: JobViewer,
    waiter: WaiterDep,
    settings: SettingsDep,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
) -> StreamingResponse:
    """Server-sent events of a job (item.finished, item.revised, job.finished); resumable."""
    after = service.parse_cursor(last_event_id, "Last-Event-ID")
    await run_in_threadpool(_visible, job_id, principal)
    frames = _stream(job_id, after, waiter, settings.webhooks.stream_keepalive_s)
    return StreamingResponse(
        _while_authenticated(
            frames,
            partial(still_authenticated, request, settings),
            settings.webhooks.stream_auth_check_s,
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get("/v1/rewards/changes")
def reward_changes(
    session: SessionDep,
    principal: JobViewer,
    since: Annotated[str | None, Query(max_length=40)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ChangesPage:
    """Rewards finished or revised after `since`, of the caller's jobs, with the next cursor."""
    return service.changes(session, principal, since, limit)


@router.get("/v1/jobs/{job_id}/deliveries")
def job_deliveries(job_id: str, session: SessionDep, principal: JobViewer) -> list[DeliveryOut]:
    """Webhook deliveries of a job's events, with every attempt (status code, error, time)."""
    service.visible_job(session, job_id, principal)
    return service.deliveries(session, job_id)
