"""Operators' JSON API of the console's operations: queues, workers, retry, reviewers."""

from __future__ import annotations

from fastapi import APIRouter

from verifier_service.auth.deps import OperatorPrincipal
from verifier_service.console.operations import service as ops_service
from verifier_service.console.operations.schemas import Operations, QueueState, RetryOut, Reviewers
from verifier_service.console.params import JobId, NodeName, QueueName
from verifier_service.core.db import transaction
from verifier_service.core.deps import SessionDep, SettingsDep
from verifier_service.ladder.dispatch import commit_then_send

router = APIRouter(prefix="/v1/console", tags=["console"])


@router.get("/queues")
def list_queues(settings: SettingsDep, _: OperatorPrincipal) -> list[QueueState]:
    """Every queue: depth, workers started for it and consuming it now, and its pause."""
    return ops_service.queue_states(settings.broker_url)


@router.post("/queues/{queue}/pause", status_code=204)
def pause_queue(settings: SettingsDep, principal: OperatorPrincipal, queue: QueueName) -> None:
    """Pause a queue (audited): workers stop taking its tasks, which wait until it resumes."""
    with transaction() as session:
        ops_service.pause(session, settings.broker_url, queue, principal.name)


@router.post("/queues/{queue}/resume", status_code=204)
def resume_queue(settings: SettingsDep, principal: OperatorPrincipal, queue: QueueName) -> None:
    """Resume a paused queue (audited): each worker takes at most its prefetch limit at once."""
    with transaction() as session:
        ops_service.resume(session, settings.broker_url, queue, principal.name)


@router.get("/workers")
def list_workers(settings: SettingsDep, _: OperatorPrincipal) -> Operations:
    """Queues and workers: what each worker consumes now, and the tasks it runs or took ahead."""
    return ops_service.operations(settings.broker_url)


@router.post("/workers/{node}/drain", status_code=204)
def drain_worker(settings: SettingsDep, principal: OperatorPrincipal, node: NodeName) -> None:
    """Drain a worker (audited): it takes no new work and finishes what it holds."""
    with transaction() as session:
        ops_service.drain(session, settings.broker_url, node, principal.name, on=True)


@router.post("/workers/{node}/undrain", status_code=204)
def undrain_worker(settings: SettingsDep, principal: OperatorPrincipal, node: NodeName) -> None:
    """Let a drained worker take work again (audited)."""
    with transaction() as session:
        ops_service.drain(session, settings.broker_url, node, principal.name, on=False)


@router.post("/jobs/{job_id}/retry")
def retry_job(principal: OperatorPrincipal, job_id: JobId) -> RetryOut:
    """Retry a job's infra_error items (audited): they climb again in the same job and their
    new rewards are the next revisions of the old ones."""
    # After the commit: the tier work, the trainer's events.
    _, n = commit_then_send(lambda session: ops_service.retry(session, job_id, principal.name))
    return RetryOut(job_id=job_id, retried=n)


@router.get("/reviewers")
def list_reviewers(session: SessionDep, _: OperatorPrincipal) -> Reviewers:
    """Reviewers' throughput and gold accuracy, and each review queue's agreement."""
    return ops_service.reviewers(session)
