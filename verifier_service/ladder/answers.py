"""Verdicts of deferred tiers (people) coming back to the ladder: on items that still wait,
or late, on items that took a fallback reward at their job's deadline (their reward is revised).
Callers lock the job (`lock_job_of_item`) before their own rows of the item's deferred work, as
the deadline does, so the two never deadlock."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from tiers.base import Verdict
from verifier_service.ladder import repository
from verifier_service.ladder.models import Item, Job
from verifier_service.ladder.passes import ladder_pass
from verifier_service.ladder.results import LadderResult
from verifier_service.ladder.states import ItemState


def lock_job_of_item(session: Session, item_id: str) -> Job | None:
    """Lock the job of an item (before any lock of the item's deferred work: every path that
    takes both takes the job's first, so a deadline and an answer never deadlock)."""
    item = session.get(Item, item_id)
    return None if item is None else repository.lock_job(session, item.job_id)


def record_deferred(
    session: Session, item_id: str, verdict: Verdict, step: int | None = None
) -> LadderResult:
    """A deferred tier's verdict on an item it held at ladder step `step`: stored, and the item
    moves on (its reward and its job finish in this transaction when that was the last step).
    An item that took a fallback reward at that step when its job's deadline passed gets the
    verdict and a revised reward (revision 2, item.revised); otherwise nothing happens."""
    item = session.get(Item, item_id)
    if item is None:
        return LadderResult()
    job = repository.lock_job(session, item.job_id)
    session.refresh(item)
    if job is None:
        return LadderResult()
    ladder = ladder_pass(session, job)
    if item.state == ItemState.deferred:
        return ladder.deliver(item, verdict)
    if item.state == ItemState.done and step is not None and item.step == step:
        if not ladder.answered(item):
            return ladder.deliver_late(item, verdict)
    return LadderResult()


def record_deferred_all(
    session: Session, job_id: str, verdicts: Sequence[tuple[str, Verdict]], step: int
) -> LadderResult:
    """`record_deferred` for several items of one job at once (a trajectory's steps judged as
    one task): one ladder pass, and one revision of their trajectory when they come late."""
    job = repository.lock_job(session, job_id)
    if job is None:
        return LadderResult()
    items = {i.id: i for i in repository.items_by_id(session, [i for i, _ in verdicts])}
    for item in items.values():
        session.refresh(item)
    pairs = [(items[i], v) for i, v in verdicts if i in items]
    return ladder_pass(session, job).deliver_all(pairs, step)
