"""HTTP endpoints of the reward API."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from fastapi.concurrency import run_in_threadpool
from redis.exceptions import RedisError
from sqlalchemy.exc import IntegrityError

from tiers.registry import get_tier
from verifier_service.auth import service as auth
from verifier_service.auth.deps import JobViewer, TrainerPrincipal, rate_limiter
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import transaction, with_retries
from verifier_service.core.deps import PRINTABLE, SessionDep, SettingsDep, WaiterDep
from verifier_service.core.errors import (
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
)
from verifier_service.core.notify import JobWaiter, sync_client
from verifier_service.core.presence import paused_now
from verifier_service.jobs import repository, service
from verifier_service.jobs.schemas import JobOut, RewardRequest
from verifier_service.jobs.views import JobTree, job_json
from verifier_service.ladder import dispatch
from verifier_service.ladder.costs import CostReport, job_cost
from verifier_service.settings import Settings, get_settings

router = APIRouter(tags=["rewards"])

VERDICTS_QUERY = (
    "false: each item's `verdicts` are left out of the answer (rewards only: a quarter of the "
    "bytes for molecules, and nothing for the service to read or the trainer to parse)"
)


def _runs_inline(request: RewardRequest, settings: Settings) -> bool:
    return bool(request.wait_s) and len(request.items) <= settings.api.inline_max_items


def _fast_tier(name: str) -> bool:
    # A paused tier.fast holds back the inline lane's work too: it waits on the queue.
    if get_tier(name).queue != "tier.fast":
        return False
    try:
        return "tier.fast" not in paused_now(sync_client(get_settings().broker_url))
    except RedisError:
        return True  # the broker is away: the inline lane needs none


def _submit(
    request: RewardRequest,
    principal: AuthenticatedPrincipal,
    key: str | None,
    *,
    inline: bool = False,
    verdicts: bool = True,
) -> tuple[str, JobTree | None]:
    """Store and enqueue a request: its job id, and the job itself (`views.job_tree`, with its
    verdicts if `verdicts`) if it finished already.

    Inline (small waiting requests), the fast tiers' work runs in this transaction: no broker
    round trip, no reload. It holds the write lock for those milliseconds; slower tiers always
    go through their queues.
    """

    def store() -> tuple[service.Submission, dispatch.Outgoing]:
        with transaction() as session:
            submission = service.submit(
                session,
                request,
                principal=principal.acting_as,
                idempotency_key=key,
                runs_here=_fast_tier if inline else None,
            )
            deadline = None
            if submission.created and submission.deadline_s and not _completed(submission):
                deadline = (submission.job.id, submission.deadline_s)
            if principal.on_behalf_of and submission.created:
                auth.record_event(
                    session, principal.name, "job.create_on_behalf", submission.job.id,
                    on_behalf_of=principal.on_behalf_of,
                )  # fmt: skip
            return submission, dispatch.stage(session, submission.ladder, deadline=deadline)

    def attempt() -> tuple[service.Submission, dispatch.Outgoing]:
        try:
            return store()
        except IntegrityError:
            if key is None:
                raise
            return store()  # two requests raced on one Idempotency-Key: this one gets the first's

    # A database that drops the connection (a restart) gets two more tries before the caller
    # sees a 503 with Retry-After.
    submission, outgoing = with_retries(attempt, retries=2, first_delay_s=0.25)
    finished = None
    if submission.created and _completed(submission):
        finished = submission.tree(verdicts)
    if finished is not None:
        # Finished in the transaction that created it: no one can be waiting on a job whose id
        # this response is the first to tell, so no wake-up to publish (a Redis round trip).
        outgoing.finished_jobs.discard(submission.job.id)
        outgoing.event_jobs.discard(submission.job.id)
    dispatch.deliver(outgoing)
    return submission.job.id, finished


def _completed(submission: service.Submission) -> bool:
    return submission.job.status == "completed"


def _status(job_id: str) -> str | None:
    with transaction() as session:
        return service.job_status(session, job_id)


def _load(job_id: str, verdicts: bool = True) -> JobTree:
    with transaction() as session:
        return service.job_tree_of(session, job_id, verdicts)


async def submit_and_wait(
    request: RewardRequest,
    principal: AuthenticatedPrincipal,
    idempotency_key: str | None,
    waiter: JobWaiter,
    settings: Settings,
    *,
    verdicts: bool = True,
) -> JobOut:
    """Store and enqueue a request, then wait up to its wait_s for the job; the job as it is
    (its items' verdicts empty if not `verdicts`).

    Shared by every endpoint that accepts rewards (this API and the framework adapters); charges
    the items to the principal's key's rate limit first.
    """
    tree = await submitted_tree(
        request, principal, idempotency_key, waiter, settings, verdicts=verdicts
    )
    return JobOut.model_validate(tree)


async def submitted_tree(
    request: RewardRequest,
    principal: AuthenticatedPrincipal,
    idempotency_key: str | None,
    waiter: JobWaiter,
    settings: Settings,
    *,
    verdicts: bool = True,
) -> JobTree:
    """`submit_and_wait`, the job as a tree of plain values (`views.job_tree`); without the
    items' verdicts if not `verdicts`."""
    limiter = rate_limiter(settings.broker_url)

    def charged_then_submitted() -> tuple[str, JobTree | None]:  # one trip to the thread pool
        limiter.items(principal, len(request.items))
        inline = _runs_inline(request, settings)
        return _submit(request, principal, idempotency_key, inline=inline, verdicts=verdicts)

    job_id, finished = await run_in_threadpool(charged_then_submitted)
    if finished is not None:
        return finished
    if request.wait_s:
        with waiter.watch(job_id) as done:
            # Subscribed first, then checked: a job finishing in between is not missed.
            if await run_in_threadpool(_status, job_id) != "completed":
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), timeout=request.wait_s)
    return await run_in_threadpool(_load, job_id, verdicts)


@router.post(
    "/v1/rewards",
    status_code=202,
    response_model=JobOut,
    responses={200: {"model": JobOut, "description": "All rewards ready within wait_s"}},
)
async def create_rewards(
    request: RewardRequest,
    principal: TrainerPrincipal,
    settings: SettingsDep,
    waiter: WaiterDep,
    idempotency_key: Annotated[
        str | None, Header(min_length=1, max_length=256, pattern=PRINTABLE)
    ] = None,
    verdicts: Annotated[bool, Query(description=VERDICTS_QUERY)] = True,
) -> Response:
    """Score items under a policy: 200 with rewards if ready within wait_s, else 202 and a job."""
    if len(request.items) > settings.api.max_items:
        raise PayloadTooLargeError(
            f"{len(request.items)} items in one request; the limit is {settings.api.max_items}",
            hint="split the items over several requests",
        )
    if request.wait_s is not None and request.wait_s > settings.api.max_wait_s:
        raise InvalidRequestError(
            f"wait_s={request.wait_s} exceeds the limit of {settings.api.max_wait_s} s",
            hint="wait less, or poll GET /v1/jobs/{id}",
        )
    job = await submitted_tree(
        request, principal, idempotency_key, waiter, settings, verdicts=verdicts
    )
    return Response(
        job_json(job),
        status_code=200 if job["status"] == "completed" else 202,
        headers={"Location": f"/v1/jobs/{job['id']}"},
        media_type="application/json",
    )


def _visible(session: SessionDep, job_id: str, principal: AuthenticatedPrincipal) -> None:
    # Someone else's job is as absent as a job that never existed: 404, never 403.
    job = repository.get_job(session, job_id)
    if job is None or not (principal.sees_all_jobs() or job.principal == principal.acting_as):
        raise NotFoundError(f"no job with id {job_id!r}")


@router.get("/v1/jobs/{job_id}", response_model=JobOut)
def get_job(
    job_id: str,
    session: SessionDep,
    principal: JobViewer,
    verdicts: Annotated[bool, Query(description=VERDICTS_QUERY)] = True,
) -> Response:
    """A job's status and whatever rewards and verdicts are ready (trainers: their own jobs)."""
    _visible(session, job_id, principal)
    tree = service.job_tree_of(session, job_id, verdicts)
    return Response(job_json(tree), media_type="application/json")


@router.get("/v1/jobs/{job_id}/cost")
def get_job_cost(job_id: str, session: SessionDep, principal: JobViewer) -> CostReport:
    """Cost per tier, cache hits, escalations, and the saving against running every tier."""
    _visible(session, job_id, principal)
    return job_cost(session, job_id)
