"""Recovery: nothing stored is lost, whatever died in between.

One sweep, run every few seconds by the API and by workers that consume the `ladder` queue (a
deployment of workers alone still recovers), one process at a time (a lock in Redis):
- ladder work staged in the outbox but never handed to the broker is sent;
- running jobs past their deadline are finished (their delayed broker message may be lost);
- webhook deliveries whose next attempt is long overdue are sent again (the same cause, or a
  worker that died during an attempt);
- tier work that no task will ever finish is sent again: work sent before the broker lost its
  data (a restart without persistence), work taken by a worker that died (its presence ran
  out), work taken longer ago than any task may run, and work never taken for too long. An item
  sent `max_dispatches` times ends with an infra_error reward that says so; and the tasks a
  worker that died had taken from the broker (each worker records them in Redis as it takes
  them) are sent again at once, instead of after the broker's visibility timeout, as are the
  tier messages a worker took from the broker and died before it could record, and the work a
  worker took with it as it died (`ladder.inflight`).
Tier tasks are idempotent, so work sent twice (the broker kept it after all) is harmless.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

import redis
import structlog
from sqlalchemy.orm import Session

from tiers.registry import get_tier
from verifier_service.core import broker_messages
from verifier_service.core.broker import QUEUES, celery_app
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.notify import sync_client
from verifier_service.core.presence import (
    held_key,
    held_tasks,
    live_queues,
    paused_queues,
    text,
    workers_holding_tasks,
)
from verifier_service.events.webhooks import resend_overdue
from verifier_service.ladder import dispatch, inflight, repository
from verifier_service.ladder.models import Job
from verifier_service.ladder.passes import job_ladders
from verifier_service.ladder.runs import resend_lost_work
from verifier_service.metrics import propagation
from verifier_service.settings import Settings

log = structlog.get_logger(__name__)

#: Set (never expiring) once the broker holds our data: when it is missing, the broker lost
#: its data (a restart without persistence) and every message sent before may be gone.
BROKER_MARKER = "verifier:broker-marker"
LOCK = "verifier:sweep-lock"
UPTIME_SLACK = timedelta(seconds=2)
#: Tier messages taken from the broker this long ago and recorded by no worker, seen so by two
#: sweeps `CONFIRM_S` apart, are put back on their queues (first seen: tag -> epoch seconds).
UNRECORDED = "verifier:unrecorded-taken"
UNRECORDED_AFTER_S = 10.0
CONFIRM_S = 2.0


@dataclass
class SweepReport:
    """What one sweep did."""

    outbox_sent: int = 0
    jobs_expired: int = 0
    webhooks_resent: int = 0
    workers_resent: int = 0
    unrecorded_restored: int = 0
    items_resent: int = 0


def broker_reset_at(client: redis.Redis) -> datetime | None:
    """When the broker that lost its data started, or None if it has not lost it.

    Work sent before that moment may be gone; work sent since is in this broker. So the first
    sweep of a new deployment (no marker yet, jobs already sent to this broker) sends nothing
    again, and after a restart without persistence only what the restart lost is sent again.
    """
    if not client.set(BROKER_MARKER, utcnow().isoformat(), nx=True):
        return None
    uptime_s = float(client.info("server").get("uptime_in_seconds", 0))
    # Redis counts its uptime in whole seconds from a start time it also truncates: the start
    # read back may be up to 2 s early. Err late instead (work sent in the broker's first
    # seconds may be sent twice, which is harmless; work lost must never be missed).
    now = utcnow()
    return min(now, now - timedelta(seconds=uptime_s) + UPTIME_SLACK)


def resend_held(client: redis.Redis, live: set[str]) -> set[str]:
    """Send again the tasks that workers which died had taken from the broker (run or only
    prefetched, acknowledged or not); the workers whose tasks were sent.

    A task whose message the broker still holds as unacknowledged goes back on its queue as it
    was (kombu would do the same, but only after the visibility timeout); any other is sent
    anew from the worker's record."""
    dead = [node for node in workers_holding_tasks(client) if node not in live]
    if not dead:
        return set()
    taken = broker_messages.unacked(celery_app())
    for node in dead:
        restored = sent = 0
        for task in held_tasks(client, node):
            message = taken.get(task.task_id)
            if message is not None and broker_messages.restore(celery_app(), [message.tag]):
                restored += 1
            else:
                carried = propagation.carried_context(task.carried)
                celery_app().send_task(task.name, args=task.args, queue=task.queue, headers=carried)
                sent += 1
            client.hdel(held_key(node), task.task_id)
        log.warning(
            "sent the tasks of a worker that died again",
            worker=node,
            tasks=restored + sent,
            restored=restored,
        )
    return set(dead)


def restore_unrecorded(client: redis.Redis) -> int:
    """Put back the tier messages a consumer took from the broker that no worker records as
    held; how many.

    A worker records a task as it takes it, a moment after kombu moved the message aside: one
    killed in between leaves a message nobody would send again before the visibility timeout.
    A message counts as such once it was taken `UNRECORDED_AFTER_S` ago and a sweep at least
    `CONFIRM_S` earlier found it unrecorded too (a worker drops its record as the task ends, a
    moment before it acknowledges the message; that message is gone by the second look)."""
    now = time.time()
    taken = broker_messages.unacked(celery_app(), taken_before=now - UNRECORDED_AFTER_S)
    if taken:
        held = {
            t.task_id for node in workers_holding_tasks(client) for t in held_tasks(client, node)
        }
        taken = {task_id: m for task_id, m in taken.items() if task_id not in held}
    seen = {text(k): float(v) for k, v in client.hgetall(UNRECORDED).items()}
    pipe = client.pipeline()
    pipe.delete(UNRECORDED)
    if taken:
        pipe.hset(UNRECORDED, mapping={m.tag: seen.get(m.tag, now) for m in taken.values()})
        pipe.expire(UNRECORDED, 3600)
    pipe.execute()
    due = [m.tag for m in taken.values() if now - seen.get(m.tag, now) >= CONFIRM_S]
    restored = broker_messages.restore(celery_app(), due) if due else 0
    if restored:
        log.warning("put back tier tasks a worker took but never recorded", tasks=restored)
    return restored


def resend_lost(settings: Settings, client: redis.Redis, alive: set[str], limit: int = 2000) -> int:
    """Send again the tier work that no task will finish; how many items. Workers in `alive`
    count as alive: their claims are someone's (a live worker's, or a dead one's whose tasks
    were just sent again)."""
    worker = settings.worker
    now = utcnow()
    lost_since = broker_reset_at(client)
    with transaction() as session:
        claimants = repository.running_claimants(session)
        dead = claimants - alive if claimants else set()
        lost = repository.lost_work(
            session,
            sent_before=lost_since,
            unclaimed_before=now - timedelta(seconds=worker.unclaimed_timeout_s),
            dead_workers=dead,
            claimed_before=now - timedelta(seconds=worker.task_time_limit_s + 30),
            limit=limit,
        )
        paused = set(paused_queues(client))
        if paused and lost:
            lost = _not_held_back(session, lost, paused, lost_since)
    for job_id, item_ids in inflight.lost_in_flight(celery_app(), client).items():
        lost.setdefault(job_id, [])
        lost[job_id] = sorted(set(lost[job_id]) | set(item_ids))
    resent = 0
    for job_id, item_ids in lost.items():
        dispatch.commit_then_send(
            partial(_resend_job, job_id=job_id, item_ids=item_ids, most=worker.max_dispatches),
            retries=0,  # the next sweep tries again
        )
        resent += len(item_ids)
    if resent:
        log.warning(
            "sent lost tier work again",
            items=resent,
            jobs=len(lost),
            broker_lost_data_sent_before=lost_since.isoformat() if lost_since else None,
            dead_workers=sorted(dead),
        )
    return resent


def _resend_job(session: Session, *, job_id: str, item_ids: list[str], most: int) -> None:
    job = session.get(Job, job_id)
    request_id = job.request_id if job is not None else None
    # The tasks carry the job's request id, as the ones the request caused did.
    context = {"job_id": job_id} | ({"request_id": request_id} if request_id else {})
    dispatch.stage(session, resend_lost_work(session, job_id, item_ids, most), context=context)


def _not_held_back(
    session: Session, lost: dict[str, list[str]], paused: set[str], lost_since: datetime | None
) -> dict[str, list[str]]:
    """Lost work without the items whose task waits, never taken, on a queue an operator
    paused: it is in the broker, held back on purpose (unless the broker lost it since)."""
    out: dict[str, list[str]] = {}
    for job_id, item_ids in lost.items():
        job = session.get(Job, job_id)
        if job is None:
            continue
        doc = job_ladders(session, job)
        keep = []
        for item in repository.items_by_id(session, item_ids):
            waiting = item.claimed_by is None and (
                lost_since is None
                or (item.dispatched_at is not None and item.dispatched_at >= lost_since)
            )
            queue = get_tier(doc.ladder_for(item.kind)[item.step].tier).queue
            if not (waiting and queue in paused):
                keep.append(item.id)
        if keep:
            out[job_id] = keep
    return out


def sweep(settings: Settings, every_s: float, grace_s: float) -> SweepReport | None:
    """One sweep, unless another process holds this round (then None)."""
    client = sync_client(settings.broker_url)
    token = uuid.uuid4().hex
    if not client.set(LOCK, token, nx=True, px=max(int(every_s * 900), 100)):
        return None
    live_on = live_queues(client, QUEUES)
    live = set(live_on)
    inflight.note_deaths(client, live_on)
    report = SweepReport(
        outbox_sent=dispatch.sweep(grace_s),
        jobs_expired=dispatch.expire_overdue(),
        webhooks_resent=resend_overdue(settings.worker.webhook_overdue_s),
    )
    handled = resend_held(client, live)
    report.workers_resent = len(handled)
    report.unrecorded_restored = restore_unrecorded(client)
    # The items claimed by those workers are in the tasks just sent: not sent a second time.
    report.items_resent = resend_lost(settings, client, live | handled)
    return report
