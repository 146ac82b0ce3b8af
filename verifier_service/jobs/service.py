"""Jobs: accept a reward request, store it with its items, and report its state."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import structlog
from fastapi.concurrency import run_in_threadpool
from redis.exceptions import RedisError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tiers.base import stable_json
from tiers.registry import get_tier
from verifier_service.auth import service as auth
from verifier_service.auth.deps import rate_limiter
from verifier_service.auth.schemas import AuthenticatedPrincipal
from verifier_service.core.db import transaction, utcnow
from verifier_service.core.errors import ConflictError, InvalidRequestError, NotFoundError
from verifier_service.core.ids import new_id
from verifier_service.core.notify import JobWaiter, sync_client
from verifier_service.core.presence import live_workers, paused_now
from verifier_service.core.rows import plain_row
from verifier_service.events import service as events
from verifier_service.jobs import repository
from verifier_service.jobs.schemas import JobOut, RewardRequest, Trajectory
from verifier_service.jobs.views import JobTree, job_tree
from verifier_service.ladder import dispatch
from verifier_service.ladder.models import JOB_FINISHED, Item, Job, VerdictRecord
from verifier_service.ladder.passes import job_ladders
from verifier_service.ladder.repository import verdicts_for
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.service import LadderPass
from verifier_service.metrics.propagation import current_request_id
from verifier_service.policies.schemas import PolicyDocument
from verifier_service.policies.service import resolve
from verifier_service.settings import Settings, get_settings


@dataclass
class Submission:
    """A stored job, the ladder work to enqueue after commit, and whether it is new."""

    job: Job
    ladder: LadderResult
    created: bool
    deadline_s: float | None
    items: list[Item] = field(default_factory=list)
    verdicts: dict[str, list[VerdictRecord]] = field(default_factory=dict)

    def tree(self, verdicts: bool = True) -> JobTree:
        """The job as the API shows it (`views.job_tree`), from what this transaction holds
        (no reload); without its verdicts if not `verdicts`."""
        return job_tree(self.job, self.items, self.verdicts if verdicts else None)


def _hash(value: Any) -> str:
    return hashlib.sha256(stable_json(value).encode()).hexdigest()


def _check_kinds(document: PolicyDocument, request: RewardRequest) -> None:
    for index, item in enumerate(request.items):
        kinds = (
            [s.action.kind for s in item.steps]
            + ([item.final_answer.kind] if item.final_answer else [])
            if isinstance(item, Trajectory)
            else [item.kind]
        )
        for kind in kinds:
            if kind not in document.ladders:
                raise InvalidRequestError(
                    f"items[{index}]: policy {document.name!r} has no ladder for kind {kind!r}",
                    hint=f"this policy scores: {', '.join(sorted(document.ladders))}; "
                    "choose another policy or add a ladder for this kind",
                )


def _check_steps(request: RewardRequest, most: int) -> None:
    for index, item in enumerate(request.items):
        if isinstance(item, Trajectory) and len(item.steps) > most:
            raise InvalidRequestError(
                f"items[{index}].steps: {len(item.steps)} steps; the limit is {most} "
                "(api.max_steps)",
                hint="split the trajectory, or ask the operator to raise VERIFIER_API__MAX_STEPS",
                limit=most,
            )


def submit(
    session: Session,
    request: RewardRequest,
    *,
    principal: str,
    idempotency_key: str | None,
    runs_here: Callable[[str], bool] | None = None,
) -> Submission:
    """Store a job and its items and make the ladder's first pass (caller commits).

    With `runs_here`, the work of the tiers it accepts runs now, in this transaction (the
    inline lane); the rest is in the returned ladder result, to enqueue after commit.
    """
    request_hash = _hash(request.model_dump(mode="json", exclude={"wait_s"}))
    if idempotency_key is not None:
        existing = repository.find_by_idempotency_key(session, principal, idempotency_key)
        if existing is not None:
            if existing.request_hash != request_hash:
                raise ConflictError(
                    f"Idempotency-Key {idempotency_key!r} was used for a different request",
                    hint="use a new key for a new request, or resend the identical body",
                    job_id=existing.id,
                )
            return Submission(existing, LadderResult(), created=False, deadline_s=None)

    _check_steps(request, get_settings().api.max_steps)
    policy = resolve(session, request.policy)
    _check_kinds(policy.document, request)
    if request.callback is not None:
        events.check_callback_url(str(request.callback.url))
    now = utcnow()
    job = plain_row(
        Job,
        id=new_id(),
        principal=principal,
        idempotency_key=idempotency_key,
        request_hash=request_hash,
        policy_name=policy.name,
        policy_version=policy.version,
        status="running",
        created_at=now,
        # Every job has a deadline (the settings' default when the request sets none), so that
        # none stays running forever, whatever is lost.
        deadline_at=now
        + timedelta(seconds=request.deadline_s or get_settings().api.default_deadline_s),
        n_items=len(request.items),
        n_done=0,
        finished_at=None,
        request_id=current_request_id(),
    )
    session.add(job)
    structlog.contextvars.bind_contextvars(job_id=job.id)  # into the logs of the tasks it sends
    if request.callback is not None:
        session.flush()  # the job row first: the callback refers to it
    callback = None if request.callback is None else str(request.callback.url)
    events.set_callback(session, job.id, callback)  # None: its events need no lookup
    stored: list[Item] = []
    leaves: list[Item] = []
    for index, entry in enumerate(request.items):
        if isinstance(entry, Trajectory):
            parent = _item(job.id, index, "trajectory", entry.model_dump(mode="json"))
            stored.append(parent)
            children = [s.action.model_dump(mode="json") for s in entry.steps]
            roles = ["step"] * len(children)
            if entry.final_answer is not None:
                children.append(entry.final_answer.model_dump(mode="json"))
                roles.append("outcome")
            for child_index, (child, role) in enumerate(zip(children, roles, strict=True)):
                leaves.append(_item(job.id, child_index, child["kind"], child, parent.id, role))
                stored.append(leaves[-1])
        else:
            leaves.append(_item(job.id, index, entry.kind, entry.model_dump(mode="json")))
            stored.append(leaves[-1])
    # Written when the first pass ends (or on the first query that needs them), in the state
    # the pass leaves them in: one INSERT, no UPDATE of each item after it.
    session.add_all(stored)
    ladder = LadderPass(session, job, policy)
    ladder.new_items(leaves)
    result = ladder.advance(leaves) if runs_here is None else ladder.advance_here(leaves, runs_here)
    verdicts = {i.id: ladder.verdicts_of(i.id) for i in leaves}
    return Submission(job, result, True, request.deadline_s, stored, verdicts)


def _item(
    job_id: str,
    index: int,
    kind: str,
    candidate: dict[str, Any],
    parent_id: str | None = None,
    role: str = "item",
) -> Item:
    metadata = candidate.get("metadata") or {}
    group = metadata.get("group") if parent_id is None else None
    return plain_row(
        Item,
        id=new_id(),
        job_id=job_id,
        index=index,
        parent_id=parent_id,
        role=role,
        kind=kind,
        candidate=candidate,
        content_hash=_hash({k: candidate.get(k) for k in ("kind", "payload", "reference")}),
        group_key=None if group is None else str(group),
        state="climbing",
        step=0,
        reward=None,
        finished_at=None,
        dispatched_at=None,
        claimed_by=None,
        claimed_at=None,
        dispatches=0,
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


def _completed(submission: Submission) -> bool:
    return submission.job.status == "completed"


def submit_and_send(
    request: RewardRequest,
    principal: AuthenticatedPrincipal,
    key: str | None,
    *,
    inline: bool = False,
    verdicts: bool = True,
) -> tuple[str, JobTree | None]:
    """Store a request and send its work (`dispatch.commit_then_send`): its job id, and the job
    itself (`views.job_tree`, with its verdicts if `verdicts`) if it finished already.

    Inline (small waiting requests), the fast tiers' work runs in this transaction: no broker
    round trip, no reload. It holds the write lock for those milliseconds; slower tiers always
    go through their queues.
    """

    def store(session: Session) -> Submission:
        submission = submit(
            session,
            request,
            principal=principal.acting_as,
            idempotency_key=key,
            runs_here=_fast_tier if inline else None,
        )
        finished = submission.created and _completed(submission)
        deadline = None
        if submission.created and submission.deadline_s and not finished:
            deadline = (submission.job.id, submission.deadline_s)
        if principal.on_behalf_of and submission.created:
            auth.record_event(
                session, principal.name, "job.create_on_behalf", submission.job.id,
                on_behalf_of=principal.on_behalf_of,
            )  # fmt: skip
        outgoing = dispatch.stage(session, submission.ladder, deadline=deadline)
        if finished:
            # Finished in the transaction that created it: no one can be waiting on a job whose
            # id this response is the first to tell, so no wake-up to publish (a Redis round
            # trip).
            outgoing.finished_jobs.discard(submission.job.id)
            outgoing.event_jobs.discard(submission.job.id)
        return submission

    # A database that drops the connection (a restart) gets two more tries before the caller
    # sees a 503 with Retry-After.
    try:
        submission = dispatch.commit_then_send(store, retries=2, first_delay_s=0.25)
    except IntegrityError:
        if key is None:
            raise
        # Two requests raced on one Idempotency-Key: this one gets the first's job.
        submission = dispatch.commit_then_send(store, retries=2, first_delay_s=0.25)
    finished = None
    if submission.created and _completed(submission):
        finished = submission.tree(verdicts)
    return submission.job.id, finished


def _status(job_id: str) -> str | None:
    with transaction() as session:
        return job_status(session, job_id)


def _load(job_id: str, verdicts: bool = True) -> JobTree:
    with transaction() as session:
        return job_tree_of(session, job_id, verdicts)


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

    Shared by every endpoint that accepts rewards (the reward API and the framework adapters);
    charges the items to the principal's key's rate limit first.
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
        return submit_and_send(
            request, principal, idempotency_key, inline=inline, verdicts=verdicts
        )

    job_id, finished = await run_in_threadpool(charged_then_submitted)
    if finished is not None:
        return finished
    if request.wait_s:
        with waiter.watch(job_id) as done:
            # Subscribed first, then checked: a job finishing in between is not missed. A job
            # that finished before (completed or cancelled: a resent Idempotency-Key) has
            # nothing left to wait for.
            if await run_in_threadpool(_status, job_id) not in JOB_FINISHED:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), timeout=request.wait_s)
    return await run_in_threadpool(_load, job_id, verdicts)


def job_status(session: Session, job_id: str) -> str | None:
    """Just the job's status (cheap), or None if there is no such job."""
    job = repository.get_job(session, job_id)
    return None if job is None else job.status


def job_out(session: Session, job_id: str) -> JobOut:
    """The job as the API shows it: status, every item's reward and verdicts."""
    return JobOut.model_validate(job_tree_of(session, job_id))


def job_tree_of(session: Session, job_id: str, verdicts: bool = True) -> JobTree:
    """`job_out` as a tree of plain values (`views.job_tree`): what the reward API writes.
    Not `verdicts`: the items' verdicts are neither read nor shown."""
    job = repository.get_job(session, job_id)
    if job is None:
        raise NotFoundError(f"no job with id {job_id!r}")
    items = repository.items_of(session, job_id)
    stored = verdicts_for(session, [i.id for i in items]) if verdicts else None
    return job_tree(job, items, stored, _stalls(session, job, items))


def _stalls(session: Session, job: Job, items: Sequence[Item]) -> list[str]:
    """A line for each tier whose queue holds items of this job but has no live worker."""
    running = Counter(
        job_ladders(session, job).ladder_for(i.kind)[i.step].tier
        for i in items
        if i.state == "running"
    )
    if not running:
        return []
    try:
        client = sync_client(get_settings().broker_url)
        paused = {t for t in running if get_tier(t).queue in paused_now(client)}
        idle = {t for t in running if live_workers(client, get_tier(t).queue) == 0} - paused
    except RedisError:  # the broker is away: /readyz says so; nothing to add here
        return []
    return [
        f"{running[t]} item(s) wait on tier {t}, whose queue {get_tier(t).queue!r} an operator "
        "paused: they run once it is resumed (or end at the job's deadline)"
        for t in sorted(paused)
    ] + [
        f"{running[t]} item(s) wait on tier {t}, and no live worker consumes its queue "
        f"{get_tier(t).queue!r}: they finish once one starts (or at the job's deadline)"
        for t in sorted(idle)
    ]
