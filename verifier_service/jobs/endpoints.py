"""HTTP endpoints of the reward API."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response

from verifier_service.auth.deps import JobViewer, TrainerPrincipal
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.deps import PRINTABLE, SessionDep, SettingsDep, WaiterDep
from verifier_service.core.errors import (
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
)
from verifier_service.jobs import repository, service
from verifier_service.jobs.schemas import JobOut, RewardRequest
from verifier_service.jobs.views import job_json
from verifier_service.ladder.costs import CostReport, job_cost

router = APIRouter(tags=["rewards"])

VERDICTS_QUERY = (
    "false: each item's `verdicts` are left out of the answer (rewards only: a quarter of the "
    "bytes for molecules, and nothing for the service to read or the trainer to parse)"
)


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
    job = await service.submitted_tree(
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
