"""What tier tasks ask of the ladder: claim and read their work, store its verdicts, and the
ways work that cannot finish normally ends or is sent again (split, resent, failed)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from tiers.base import Verdict
from verifier_service.core.db import utcnow
from verifier_service.ladder import repository
from verifier_service.ladder.execute import TierRun, tier_run
from verifier_service.ladder.models import JOB_FINISHED, Item, Job
from verifier_service.ladder.passes import job_ladders, ladder_pass
from verifier_service.ladder.results import Dispatch, LadderResult
from verifier_service.ladder.states import ItemState, Stop, StopKind, sent_now


def prepare_tier_run(
    session: Session,
    tier_name: str,
    kind: str,
    step: int,
    item_ids: Sequence[str],
    worker: str | None = None,
    keys: Mapping[str, str] | None = None,
) -> TierRun | None:
    """Read what a tier task has to verify (claimed for `worker`); None when nothing is left.
    `keys`: the items' cache keys as the sending pass derived them (see `Dispatch.keys`)."""
    items = _running(session, item_ids, step)
    if not items:
        return None
    if worker is not None:  # a Core update: these objects are not written again
        repository.claim(session, [i.id for i in items], worker[:255], utcnow())
    job = repository.get_job(session, items[0].job_id)
    assert job is not None
    config = dict(job_ladders(session, job).ladder_for(kind)[step].config)
    done = repository.existing_verdict_steps(session, [i.id for i in items], step)
    todo = [i for i in items if i.id not in done]
    deadline = job.deadline_at.timestamp() if job.deadline_at is not None else None
    return tier_run(job.id, tier_name, kind, step, config, todo, keys, deadline)


def _running(session: Session, item_ids: Sequence[str], step: int) -> list[Item]:
    return [
        i
        for i in repository.items_by_id(session, item_ids)
        if i.state == ItemState.running and i.step == step
    ]


def record_tier_run(
    session: Session, run: TierRun, verdicts: dict[str, Verdict], item_ids: Sequence[str]
) -> LadderResult:
    """Store a tier's verdicts (one per cache key), fill the cache, and advance the items."""
    job = repository.lock_job(session, run.job_id)
    assert job is not None
    ladder = ladder_pass(session, job)
    items = _running(session, item_ids, run.step)
    already = repository.existing_verdict_steps(session, [i.id for i in items], run.step)
    ladder.store(run, verdicts, items, already)
    return ladder.advance(i for i in items if i.state == ItemState.climbing)


def _resend(session: Session, job: Job, items: Sequence[Item], parts: int) -> LadderResult:
    """Send running items again, noted as such, split into at most `parts` tasks per tier
    step (one per item when `parts` is at least their number)."""
    doc = job_ladders(session, job)
    now = utcnow()
    by_step: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    for item in items:
        sent_now(item, now, first=False)
        by_step[(doc.ladder_for(item.kind)[item.step].tier, item.kind, item.step)].append(item.id)
    result = LadderResult()
    for (tier, kind, step), ids in by_step.items():
        size = -(-len(ids) // max(1, parts))  # ceiling: `parts` chunks at most
        for start in range(0, len(ids), size):
            result.dispatches.append(Dispatch(tier, kind, step, tuple(ids[start : start + size])))
    return result


#: A batch delivered again (its worker died under it) is split into this many tasks: a
#: poisonous item is isolated in a few rounds, and a batch killed by accident stays batched.
SPLIT_PARTS = 8


def split_tier_run(session: Session, step: int, item_ids: Sequence[str]) -> LadderResult:
    """Send a batch's running items again in smaller tasks: a batch that killed its worker is
    retried in parts, so that one poisonous item cannot take the whole batch with it."""
    job_id = repository.job_of_items(session, item_ids)
    job = repository.lock_job(session, job_id) if job_id is not None else None
    if job is None:
        return LadderResult()
    return _resend(session, job, _running(session, item_ids, step), SPLIT_PARTS)


def resend_lost_work(
    session: Session, job_id: str, item_ids: Sequence[str], max_dispatches: int
) -> LadderResult:
    """Send again the tier work of running items that no task will finish; items sent
    `max_dispatches` times already end with an infra_error reward (reason: lost)."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status in JOB_FINISHED:
        return LadderResult()
    items = [i for i in repository.items_by_id(session, item_ids) if i.state == ItemState.running]
    given_up = [i for i in items if i.dispatches >= max_dispatches]
    resend = [i for i in items if i.dispatches < max_dispatches]
    result = _resend(session, job, resend, SPLIT_PARTS)
    if given_up:
        ladder = ladder_pass(session, job)
        stop = Stop(
            StopKind.lost,
            f"its tier work was sent {max_dispatches} times and never finished (broker restarts "
            "or workers that died under it); see the workers' logs",
        )
        ladder.end(given_up, stop)
        result.finished_jobs |= ladder.result.finished_jobs
    return result


def fail_tier_run(session: Session, step: int, item_ids: Sequence[str], stop: Stop) -> LadderResult:
    """End the items of a tier task that will never deliver (it kept failing or killing its
    worker): each gets its reward now, an infra_error that names the cause."""
    job_id = repository.job_of_items(session, item_ids)
    job = repository.lock_job(session, job_id) if job_id is not None else None
    if job is None or job.status in JOB_FINISHED:
        return LadderResult()
    ladder = ladder_pass(session, job)
    ladder.end(_running(session, item_ids, step), stop)
    return ladder.result
