"""HTTP API of the review queue: reviewers lease, answer and release tasks; operators add gold
items, adjudicate disagreements, pause reviewers and export answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from tiers.human import QUEUE_PATTERN
from verifier_service.auth.deps import OperatorPrincipal, ReviewerPrincipal
from verifier_service.core.db import retried_transaction
from verifier_service.core.deps import PRINTABLE, SessionDep
from verifier_service.review import export, operators, service
from verifier_service.review.schemas import (
    AdjudicationIn,
    AdjudicationView,
    AnswerIn,
    DraftIn,
    GoldItemIn,
    GoldItemOut,
    LeaseView,
    QueueSummary,
    ReviewerOut,
    ReviewerStats,
)

router = APIRouter(prefix="/v1/review", tags=["review"])

QueueName = Annotated[str, Path(pattern=QUEUE_PATTERN)]
#: A queue to filter by (what no queue can be named is a 422, not a lookup).
QueueFilter = Annotated[str | None, Query(pattern=QUEUE_PATTERN, description="Only this queue.")]
LeaseId = Annotated[str, Path(min_length=1, max_length=64)]
ReviewerName = Annotated[str, Path(min_length=1, max_length=128)]


class ExpiresOut(BaseModel):
    expires_at: datetime


class ShowAccuracyIn(BaseModel):
    show_accuracy: bool


# --------------------------------------------------------------------------- reviewers


@router.get("/queues")
def list_queues(session: SessionDep, principal: ReviewerPrincipal) -> list[QueueSummary]:
    """The review queues, with how many tasks you could take now."""
    return service.queues(session, principal.name)


@router.post(
    "/queues/{queue}/next",
    response_model=LeaseView,
    responses={204: {"description": "Nothing left for you in this queue."}},
)
def next_task(queue: QueueName, principal: ReviewerPrincipal) -> LeaseView | Response:
    """Lease the next task of a queue (204 when nothing is left for you)."""
    view = retried_transaction(lambda s: service.next_task(s, principal.name, queue))
    return Response(status_code=204) if view is None else view


@router.get("/leases/{lease_id}")
def get_lease(lease_id: LeaseId, session: SessionDep, principal: ReviewerPrincipal) -> LeaseView:
    """One of your live leases with its task and your draft."""
    return service.lease(session, lease_id, principal.name)


@router.post("/leases/{lease_id}/heartbeat")
def heartbeat(lease_id: LeaseId, principal: ReviewerPrincipal) -> ExpiresOut:
    """Keep a lease alive while you work on it; its new expiry."""
    expires = retried_transaction(lambda s: service.heartbeat(s, lease_id, principal.name))
    return ExpiresOut(expires_at=expires)


@router.put("/leases/{lease_id}/draft", status_code=204)
def save_draft(lease_id: LeaseId, body: DraftIn, principal: ReviewerPrincipal) -> None:
    """Save your unfinished answer on the server (also keeps the lease alive)."""
    retried_transaction(lambda s: service.save_draft(s, lease_id, principal.name, body.draft))


@router.post("/leases/{lease_id}/submit", status_code=204)
def submit(
    lease_id: LeaseId,
    body: AnswerIn,
    principal: ReviewerPrincipal,
    idempotency_key: Annotated[str, Header(min_length=1, max_length=200, pattern=PRINTABLE)],
) -> None:
    """Submit your answer; a retry with the same Idempotency-Key records it once."""
    retried_transaction(
        lambda s: service.submit(s, lease_id, principal.name, body, idempotency_key)
    )


@router.post("/leases/{lease_id}/release", status_code=204)
def release(lease_id: LeaseId, principal: ReviewerPrincipal) -> None:
    """Give the task back to the queue."""
    retried_transaction(lambda s: service.release(s, lease_id, principal.name))


@router.post("/leases/{lease_id}/skip", status_code=204)
def skip(lease_id: LeaseId, principal: ReviewerPrincipal) -> None:
    """Give the task back and never be offered it again."""
    retried_transaction(lambda s: service.skip(s, lease_id, principal.name))


@router.get("/stats/me")
def my_stats(session: SessionDep, principal: ReviewerPrincipal) -> ReviewerStats:
    """Your own numbers: done today, answered, gold accuracy (when shown), paused."""
    return service.stats(session, principal.name)


# --------------------------------------------------------------------------- operators


@router.post("/queues/{queue}/gold", status_code=201)
def add_gold(queue: QueueName, body: GoldItemIn, principal: OperatorPrincipal) -> GoldItemOut:
    """Add an item with a known answer to a queue (mixed in at the queue's gold_rate)."""
    return retried_transaction(lambda s: operators.add_gold(s, queue, body, principal.name))


@router.put("/queues/{queue}/show-accuracy", status_code=204)
def set_show_accuracy(queue: QueueName, body: ShowAccuracyIn, principal: OperatorPrincipal) -> None:
    """Let reviewers see their own gold accuracy (or not)."""
    retried_transaction(
        lambda s: operators.show_accuracy(s, queue, body.show_accuracy, principal.name)
    )


@router.get("/queues/{queue}/agreement")
def queue_agreement(
    queue: QueueName, session: SessionDep, _: OperatorPrincipal
) -> dict[str, float | None]:
    """Krippendorff's alpha per rubric dimension over the queue's answered items (None where
    undefined: too few items with two answers, or no variation)."""
    return operators.queue_agreement(session, queue)


@router.get("/adjudications")
def list_adjudications(
    session: SessionDep,
    _: OperatorPrincipal,
    queue: QueueFilter = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AdjudicationView]:
    """Tasks whose reviewers disagreed, with every answer and the agreement."""
    return operators.adjudications(session, queue, limit)


@router.post("/adjudications/{task_id}", status_code=204)
def adjudicate(task_id: LeaseId, body: AdjudicationIn, principal: OperatorPrincipal) -> None:
    """Decide a disagreement: final, and it completes the item."""
    retried_transaction(lambda s: operators.adjudicate(s, task_id, body, principal.name))


@router.get("/reviewers")
def list_reviewers(session: SessionDep, _: OperatorPrincipal) -> list[ReviewerOut]:
    """Every reviewer with their gold accuracy and whether they are paused."""
    return operators.reviewers(session)


@router.post("/reviewers/{reviewer}/pause", status_code=204)
def pause(reviewer: ReviewerName, principal: OperatorPrincipal) -> None:
    """Pause a reviewer: they get no more tasks."""
    retried_transaction(lambda s: operators.set_paused(s, reviewer, True, principal.name))


@router.post("/reviewers/{reviewer}/unpause", status_code=204)
def unpause(reviewer: ReviewerName, principal: OperatorPrincipal) -> None:
    """Let a paused reviewer take tasks again."""
    retried_transaction(lambda s: operators.set_paused(s, reviewer, False, principal.name))


@router.get("/export.jsonl")
def export_jsonl(_: OperatorPrincipal, queue: QueueFilter = None) -> StreamingResponse:
    """Every answer as JSON lines."""
    return StreamingResponse(export.jsonl(queue), media_type="application/x-ndjson")


@router.get("/export.csv")
def export_csv(_: OperatorPrincipal, queue: QueueFilter = None) -> StreamingResponse:
    """Every answer as CSV, one `value.<dimension>` column per rubric dimension."""
    return StreamingResponse(
        export.csv_rows(queue),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="review-answers.csv"'},
    )
