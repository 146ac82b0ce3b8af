"""Operations on one job's ladder, each in the caller's transaction: lock the job, make one pass
(advance, expire at the deadline, cancel, revise a finished reward) and return what to send after
commit (`dispatch.stage`)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from verifier_service.ladder import repository
from verifier_service.ladder.models import Item
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.schemas import Reward
from verifier_service.ladder.service import OPEN, LadderPass
from verifier_service.ladder.states import Stop, StopKind
from verifier_service.policies.service import resolve


def advance_job(session: Session, job_id: str) -> LadderResult:
    """Advance every open item of a job (recovery, and a job's first pass)."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status == "completed":
        return LadderResult()
    policy = resolve(session, job.policy_name, job.policy_version)
    items = [i for i in repository.open_leaf_items(session, job_id) if i.state in OPEN]
    return LadderPass(session, job, policy).advance(items)


def expire_job(session: Session, job_id: str) -> LadderResult:
    """The job's deadline: unfinished items get the best reward available now."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status == "completed":
        return LadderResult()
    policy = resolve(session, job.policy_name, job.policy_version)
    items = repository.open_leaf_items(session, job_id)
    return LadderPass(session, job, policy).expire(items)


def cancel_job(session: Session, job_id: str, detail: str) -> LadderResult:
    """An operator cancelled the job: unfinished items end now as infra_error ("cancelled:
    detail"); tier work still in flight for them is ignored when it comes back."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status == "completed":
        return LadderResult()
    policy = resolve(session, job.policy_name, job.policy_version)
    ladder = LadderPass(session, job, policy)
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
    ladder = LadderPass(session, job, resolve(session, job.policy_name, job.policy_version))
    ladder.revise(item, reward)
    return ladder.result
