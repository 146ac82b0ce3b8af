"""Operations on one job's ladder, each in the caller's transaction: lock the job, make one pass
(advance, expire at the deadline, cancel, revise a finished reward) and return what to send after
commit (`dispatch.stage`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.orm import Session

from verifier_service.core.db import utcnow
from verifier_service.ladder import repository
from verifier_service.ladder.deferred import handler_for
from verifier_service.ladder.models import JOB_FINISHED, CostLedgerEntry, Item
from verifier_service.ladder.passes import ladder_pass
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.schemas import Reward
from verifier_service.ladder.service import OPEN
from verifier_service.ladder.states import Stop, StopKind, reopen

#: Where a retried item's first-attempt ledger entry waits while the retry is charged.
ASIDE = -1


def advance_job(session: Session, job_id: str) -> LadderResult:
    """Advance every open item of a job (recovery, and a job's first pass)."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status in JOB_FINISHED:
        return LadderResult()
    items = [i for i in repository.open_leaf_items(session, job_id) if i.state in OPEN]
    return ladder_pass(session, job).advance(items)


def expire_job(session: Session, job_id: str) -> LadderResult:
    """The job's deadline: unfinished items get the best reward available now."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status in JOB_FINISHED:
        return LadderResult()
    items = repository.open_leaf_items(session, job_id)
    return ladder_pass(session, job).expire(items)


def cancel_job(session: Session, job_id: str, detail: str) -> LadderResult:
    """An operator cancelled the job: unfinished items end now as infra_error ("cancelled:
    detail"); tier work still in flight for them is ignored when it comes back."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status in JOB_FINISHED:
        return LadderResult()
    ladder = ladder_pass(session, job)
    ladder.finishes_as = "cancelled"
    ladder.end(repository.open_leaf_items(session, job_id), Stop(StopKind.cancelled, detail))
    return ladder.result


def revise_reward(session: Session, item_id: str, reward: Reward) -> LadderResult:
    """A finished item's reward changed (people answered after its deadline fallback, an
    adjudication): store it as the next revision and tell the trainer. Caller commits and
    stages the result (dispatch.stage)."""
    item = session.get(Item, item_id)
    if item is None:
        raise ValueError(f"no item {item_id!r}")
    job = repository.lock_job(session, item.job_id)
    assert job is not None
    ladder = ladder_pass(session, job)
    ladder.revise(item, reward)
    return ladder.result


def retry_items(
    session: Session, job_id: str, failed: Sequence[Item]
) -> tuple[LadderResult, float | None]:
    """An operator retries a job's finished items whose reward is an infra_error: each climbs
    again in its own job, from the step that failed (a tier's error verdict is tried again;
    lost, cancelled or deadline work goes where it was going), and its new reward is the next
    revision of the old one. The job runs again, with a deadline as long as its first one if
    that has passed. Returns the pass's result and, when the job got a new deadline, its length
    in seconds (for `dispatch.stage`)."""
    job = repository.lock_job(session, job_id)
    if job is None:
        return LadderResult(), None
    failed = [i for i in failed if i.job_id == job_id and (i.reward or {}).get("status")
              == "infra_error"]  # fmt: skip
    if not failed:
        return LadderResult(), None
    verdicts = repository.verdicts_for(session, [i.id for i in failed])
    earlier: list[tuple[int, CostLedgerEntry]] = []
    for item in failed:
        records = verdicts.get(item.id, [])
        last = records[-1] if records else None
        step = last.step if last is not None and last.status == "error" else item.step
        reopen(item, step=step)
        if item.parent_id is None:
            job.n_done -= 1
        # The ledger holds one entry per item and step: the first attempt's steps aside while
        # the new one is charged, then folded into it (totals keep both attempts' cost).
        for entry in repository.ledger_entries(session, [item.id], step):
            entry.step = ASIDE
            earlier.append((step, entry))
    parents = {i.parent_id for i in failed if i.parent_id is not None}
    for parent_id in sorted(parents):  # a trajectory is composed again from its steps
        parent = session.get(Item, parent_id)
        if parent is not None and parent.state == "done":
            reopen(parent, step=parent.step)
            job.n_done -= 1
    now = utcnow()
    deadline_s: float | None = None
    if job.deadline_at is not None and job.deadline_at <= now:
        deadline_s = (job.deadline_at - job.created_at).total_seconds()
        job.deadline_at = now + timedelta(seconds=deadline_s)
    job.status = "running"
    job.finished_at = None
    session.flush()
    result = ladder_pass(session, job).advance(failed)
    session.flush()
    for start, entry in earlier:
        again = repository.ledger_entries(session, [entry.item_id], start)
        if again:
            # A deferred tier's work (a review task) is taken up again, not done twice: the
            # item's task is the same one, so people's cost is charged once.
            if handler_for(entry.tier) is None:
                again[0].cost_units += entry.cost_units
            session.delete(entry)
        else:
            entry.step = start
    return result, deadline_s
