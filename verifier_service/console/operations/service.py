"""The console's operations: pause and resume a queue, drain a worker and see its tasks, retry a
job's infra_error items, and the reviewers' throughput, agreement and accuracy on gold.

Pauses and drain orders live in the broker's Redis (`core.presence`), next to the work they
hold back; workers read them every `worker.control_poll_s` (`workers.control`). Each change is
audited in the caller's transaction, written to Redis last, so that a broker that is away fails
the request and leaves no audit line of a change that did not happen.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import redis
from sqlalchemy.orm import Session

from verifier_service.auth import service as audit
from verifier_service.console.operations import repository as ops_repository
from verifier_service.console.operations.schemas import (
    Operations,
    QueueRun,
    QueueState,
    ReviewerRow,
    Reviewers,
    WorkerState,
    WorkerTask,
)
from verifier_service.core.broker import BROKER_ERRORS, QUEUES, celery_app
from verifier_service.core.db import utcnow
from verifier_service.core.errors import ConflictError, NotFoundError, ServiceUnavailableError
from verifier_service.core.notify import sync_client
from verifier_service.core.presence import (
    DRAIN_TTL_S,
    PAUSED_KEY,
    STATE_PREFIX,
    drain_key,
    held_tasks,
    live_nodes,
    live_queues,
    paused_queues,
    workers_holding_tasks,
    workers_per_queue,
)
from verifier_service.ladder.dispatch import Outgoing, stage
from verifier_service.ladder.operations import retry_items
from verifier_service.ladder.repository import lock_job
from verifier_service.review import operators as review_ops

#: How long the operations page waits for workers to say which tasks they run.
INSPECT_TIMEOUT_S = 1.0


def _broker(broker_url: str) -> redis.Redis:
    return sync_client(broker_url)


def _unavailable(exc: Exception) -> ServiceUnavailableError:
    return ServiceUnavailableError(
        f"the broker cannot be reached ({type(exc).__name__}): nothing was changed",
        retry_after_s=5,
        hint="try again once /readyz reports the broker up",
    )


def _reports(client: redis.Redis) -> dict[str, dict[str, Any]]:
    """What each worker reports of itself (only workers alive in the last seconds)."""
    keys = list(client.scan_iter(match=f"{STATE_PREFIX}*", count=1000))
    if not keys:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for key, value in zip(keys, client.mget(keys), strict=True):
        if value is not None:
            name = key.decode() if isinstance(key, bytes) else str(key)
            out[name[len(STATE_PREFIX) :]] = json.loads(value)
    return out


# ------------------------------------------------------------------ queues


def queue_states(broker_url: str) -> list[QueueState]:
    """Every queue: depth, workers started for it and consuming it now, its pause."""
    client = _broker(broker_url)
    try:
        paused = paused_queues(client)
        started = workers_per_queue(client, list(QUEUES))
        reports = _reports(client)
        queues_of = live_queues(client, QUEUES)
        drained = {node for node in queues_of if client.exists(drain_key(node))}
        holding = {node for node in drained if held_tasks(client, node)}
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc
    out = []
    for queue in QUEUES:
        try:
            depth: int | None = int(client.llen(queue))
        except BROKER_ERRORS:
            depth = None
        pause = paused.get(queue)
        nodes = {node for node, queues in queues_of.items() if queue in queues}
        out.append(
            QueueState(
                queue=queue,
                depth=depth,
                workers=started.get(queue, 0),
                consuming=sum(1 for r in reports.values() if queue in r.get("consuming", [])),
                draining=len(nodes & drained),
                state=_queue_state(pause is not None, nodes, drained, holding),
                paused=pause is not None,
                paused_by=pause["by"] if pause else None,
                paused_at=datetime.fromisoformat(pause["at"]) if pause else None,
            )
        )
    return out


def _queue_state(paused: bool, nodes: set[str], drained: set[str], holding: set[str]) -> QueueRun:
    """What a queue does now: paused; no live worker; every live worker of it drained (still
    finishing tasks: draining; idle: drained), so nobody takes its tasks; else running."""
    if paused:
        return "paused"
    if not nodes:
        return "no workers"
    if nodes <= drained:
        return "draining" if nodes & holding else "drained"
    return "running"


def _known_queue(queue: str) -> None:
    if queue not in QUEUES:
        raise NotFoundError(f"no queue named {queue!r}", hint=f"queues: {', '.join(QUEUES)}")


def pause(session: Session, broker_url: str, queue: str, actor: str) -> None:
    """Pause a queue (audited): workers stop taking its tasks, which wait on it; tasks already
    taken finish. Pausing a paused queue changes nothing."""
    _known_queue(queue)
    entry = json.dumps({"by": actor, "at": utcnow().isoformat()})
    audit.record_event(session, actor, "queue.pause", queue)
    session.flush()
    try:
        if not _broker(broker_url).hsetnx(PAUSED_KEY, queue, entry):
            raise ConflictError(f"queue {queue!r} is paused already", hint="resume it first")
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc


def resume(session: Session, broker_url: str, queue: str, actor: str) -> None:
    """Resume a paused queue (audited): its workers take its tasks again, each at most its
    prefetch limit at a time."""
    _known_queue(queue)
    audit.record_event(session, actor, "queue.resume", queue)
    session.flush()
    try:
        if not _broker(broker_url).hdel(PAUSED_KEY, queue):
            raise ConflictError(f"queue {queue!r} is not paused")
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc


# ------------------------------------------------------------------ workers


def _inspect(nodes: list[str]) -> tuple[set[str], set[str]] | None:
    """Ids of the tasks the live workers run, and of those they took ahead; None when they
    did not answer."""
    if not nodes:
        return set(), set()
    try:
        inspect = celery_app().control.inspect(
            destination=nodes, timeout=INSPECT_TIMEOUT_S, limit=len(nodes)
        )
        active = inspect.active() or {}
        reserved = inspect.reserved() or {}
    except BROKER_ERRORS:
        return None
    if not active and not reserved:
        return None
    return (
        {t["id"] for tasks in active.values() for t in tasks},
        {t["id"] for tasks in reserved.values() for t in tasks},
    )


def _tasks(
    client: redis.Redis, node: str, seen: tuple[set[str], set[str]] | None
) -> list[WorkerTask]:
    out = []
    for task in held_tasks(client, node):
        state = "held"
        if seen is not None:
            state = (
                "active"
                if task.task_id in seen[0]
                else "reserved"
                if task.task_id in seen[1]
                else "held"
            )
        items = len(task.item_ids) or 1
        out.append(
            WorkerTask(id=task.task_id, name=task.name, queue=task.queue, items=items, state=state)
        )
    return out


def operations(broker_url: str) -> Operations:
    """Queues and workers: what each worker consumes now and the tasks it holds."""
    queues = queue_states(broker_url)
    client = _broker(broker_url)
    try:
        alive = live_nodes(client, QUEUES)
        reports = _reports(client)
        nodes = sorted(alive | set(reports) | set(workers_holding_tasks(client)))
        seen = _inspect(sorted(alive))
        workers = []
        for node in nodes:
            report = reports.get(node, {})
            draining = bool(client.exists(drain_key(node)))
            tasks = _tasks(client, node, seen)
            concurrency = report.get("concurrency")
            prefetch = report.get("prefetch_multiplier")
            workers.append(
                WorkerState(
                    node=node,
                    alive=node in alive,
                    queues=report.get("queues", []),
                    consuming=report.get("consuming", []),
                    draining=draining,
                    drained=draining and not tasks,
                    concurrency=concurrency,
                    prefetch_limit=concurrency * prefetch if concurrency and prefetch else None,
                    tasks=tasks,
                )
            )
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc
    return Operations(queues=queues, workers=workers)


def drain(session: Session, broker_url: str, node: str, actor: str, *, on: bool) -> None:
    """Drain a live worker (audited): it stops taking work from every queue and finishes the
    tasks it holds, after which it can be stopped without losing any; or undo that."""
    client = _broker(broker_url)
    try:
        if on and node not in live_nodes(client, QUEUES):
            raise NotFoundError(f"no live worker named {node!r}")
        audit.record_event(session, actor, "worker.drain" if on else "worker.undrain", node)
        session.flush()
        if on:
            entry = json.dumps({"by": actor, "at": utcnow().isoformat()})
            client.set(drain_key(node), entry, ex=DRAIN_TTL_S)
        elif not client.delete(drain_key(node)):
            raise ConflictError(f"worker {node!r} is not being drained")
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc


# ------------------------------------------------------------------ jobs


def retry(session: Session, job_id: str, actor: str) -> tuple[Outgoing, int]:
    """Retry a job's infra_error items for operator `actor` (audited): each climbs its ladder
    again in the same job, and its new reward is the next revision of the old one (the
    trainer is told, as for any revised reward). The caller commits, then delivers."""
    if lock_job(session, job_id) is None:  # the job first, as every ladder operation
        raise NotFoundError(f"no job with id {job_id!r}")
    failed = ops_repository.infra_error_leaves(session, job_id)
    if not failed:
        raise ConflictError(
            f"job {job_id} has no item whose reward is an infra_error: nothing to retry"
        )
    result, deadline_s = retry_items(session, job_id, failed)
    audit.record_event(session, actor, "job.retry", job_id, items=len(failed))
    deadline = (job_id, deadline_s) if deadline_s is not None else None
    return stage(session, result, deadline=deadline), len(failed)


# ------------------------------------------------------------------ reviewers

#: A gap between two answers longer than this is a break, not time spent reviewing.
BREAK_S = 15 * 60


def per_active_hour(times: list[datetime]) -> float | None:
    """Answers per hour of reviewing: the answers after the first over the time between
    consecutive answers, each gap counted up to `BREAK_S` (longer ones are breaks); None with
    fewer than two answers (no time to divide by)."""
    if len(times) < 2:
        return None
    active = sum(min((b - a).total_seconds(), BREAK_S) for a, b in pairwise(times))
    return (len(times) - 1) * 3600.0 / active if active > 0 else None


def reviewers(session: Session) -> Reviewers:
    """Each reviewer's answers (all, and per hour over the last day) and gold accuracy; the
    agreement of each review queue per rubric dimension."""
    now = utcnow()
    recent = ops_repository.answers_since(session, now - timedelta(hours=24))
    times = ops_repository.answer_times_since(session, now - timedelta(hours=24))
    hour_ago = now - timedelta(hours=1)
    rows = [
        ReviewerRow(
            reviewer=r.reviewer,
            answered=r.answered,
            answered_24h=recent.get(r.reviewer, 0),
            per_hour_24h=recent.get(r.reviewer, 0) / 24.0,
            answered_1h=sum(1 for at in times.get(r.reviewer, []) if at >= hour_ago),
            per_hour_active=per_active_hour(times.get(r.reviewer, [])),
            gold_answered=r.gold_answered,
            gold_correct=r.gold_correct,
            gold_accuracy=r.gold_accuracy,
            paused=r.paused,
            paused_reason=r.paused_reason,
        )
        for r in review_ops.reviewers(session)
    ]
    agreement = {
        queue: review_ops.queue_agreement(session, queue)
        for queue in ops_repository.review_queue_names(session)
    }
    return Reviewers(reviewers=rows, agreement=agreement)


def set_paused(session: Session, reviewer: str, paused: bool, operator: str) -> None:
    """Pause a reviewer (their next claim is refused) or let them take tasks again (audited)."""
    review_ops.set_paused(session, reviewer, paused, operator)
