"""The `human` tier wired into the ladder: items sent to people become review tasks in the
ladder's transaction; at a job's deadline their tasks stay open (people's later answer revises
the fallback reward) or close, as the step's `keep_open_after_deadline` says."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from tiers.human import HumanTier
from verifier_service.core.db import utcnow
from verifier_service.ladder.deferred import Closing, DeferredWork, register
from verifier_service.ladder.models import Item, VerdictRecord
from verifier_service.ladder.repository import children
from verifier_service.ladder.states import ItemState
from verifier_service.review import repository, service
from verifier_service.review.models import ReviewTask, new_id
from verifier_service.review.schemas import ReviewConfig


def _verdict_view(record: VerdictRecord) -> dict[str, Any]:
    return {
        "tier": record.tier,
        "status": record.status,
        "score": record.score,
        "components": record.components,
        "feedback": record.feedback,
    }


def _gather(
    session: Session, work: DeferredWork, config: ReviewConfig, parent_id: str, items: list[Item]
) -> None:
    """Steps of one trajectory judged as one task (rubric.per_step): the task (kind
    "trajectory", on the trajectory's item) gathers its steps' lower-tier verdicts and opens to
    reviewers once every step and the outcome wait for people (or are finished)."""
    task = repository.trajectory_task(session, parent_id)
    parent = session.get(Item, parent_id)
    retried = parent is not None and _retried(parent)
    if task is None and retried and (task := _taken_up_again(session, parent_id)) is not None:
        task.state, task.verdicts = "gathering", []  # its steps' verdicts are gathered anew
    if task is None:
        parent = session.get(Item, parent_id)
        assert parent is not None
        payload = {k: v for k, v in parent.candidate.items() if k != "kind"}
        task = ReviewTask(
            id=new_id(),
            queue=config.queue,
            item_id=parent_id,
            job_id=work.job.id,
            step=work.step,
            kind="trajectory",
            payload=payload,
            reference=None,
            verdicts=[],
            guidelines=config.guidelines,
            rubric=config.rubric.model_dump(mode="json"),
            overlap=config.overlap,
            min_agreement=config.min_agreement,
            state="gathering",
            created_at=utcnow(),
        )
        session.add(task)
    views = [
        {**_verdict_view(r), "step": item.index if item.role == "step" else None}
        for item in items
        for r in work.verdicts.get(item.id, [])
    ]
    task.verdicts = [*(task.verdicts or []), *views]
    siblings = children(session, parent_id)
    if all(s.state in (ItemState.deferred, ItemState.done) for s in siblings):
        task.state = "open"


def _retried(item: Item) -> bool:
    """Whether the item had a finished reward before (an operator retried it)."""
    return bool((item.reward or {}).get("revision"))


def _taken_up_again(session: Session, item_id: str) -> ReviewTask | None:
    """The item's earlier task that no one finished, when an operator retried the item: the
    same task is taken up again (its answers and drafts kept; closed at a cancel, it opens
    again) instead of a second task people would answer twice. None for a new item."""
    task = repository.unfinished_task(session, item_id)
    if task is not None and task.state == "closed":
        task.state, task.closed_at = "open", None
        task.taken = task.answered  # its leases ended when it closed
    return task


class ReviewTier:
    """The review queue as the `human` tier's deferred handler."""

    def send(self, session: Session, work: DeferredWork) -> str:
        config = ReviewConfig.model_validate(work.config)
        now = utcnow()
        repository.put_queue(session, config.queue, config.model_dump(mode="json"), now)
        rubric = config.rubric.model_dump(mode="json")
        trajectories: dict[str, list[Item]] = defaultdict(list)
        for item in work.items:
            if config.rubric.per_step and item.parent_id is not None:
                trajectories[item.parent_id].append(item)
                continue
            if _retried(item) and _taken_up_again(session, item.id) is not None:
                continue  # an operator's retry: the item's task is the one people see
            candidate = item.candidate
            session.add(
                ReviewTask(
                    id=new_id(),
                    queue=config.queue,
                    item_id=item.id,
                    job_id=work.job.id,
                    step=work.step,
                    kind=item.kind,
                    payload=candidate.get("payload") or {},
                    reference=candidate.get("reference"),
                    verdicts=[_verdict_view(r) for r in work.verdicts.get(item.id, [])],
                    guidelines=config.guidelines,
                    rubric=rubric,
                    overlap=config.overlap,
                    min_agreement=config.min_agreement,
                    created_at=now,
                )
            )
        for parent_id, steps in trajectories.items():
            _gather(session, work, config, parent_id, steps)
        people = "person" if config.overlap == 1 else f"{config.overlap} people"
        return f"waiting for people: {people} in review queue {config.queue!r}"

    def close(
        self,
        session: Session,
        items: Sequence[Item],
        config: dict[str, Any],
        *,
        cancelled: bool = False,
    ) -> Closing:
        review = ReviewConfig.model_validate(config)
        parents = {i.parent_id for i in items if i.parent_id is not None}
        if cancelled:
            service.close_items(session, [*(i.id for i in items), *parents], reason="cancelled")
            return Closing(review.on_deadline)
        if not review.keep_open_after_deadline:
            service.close_items(session, [*(i.id for i in items), *parents])
        else:  # a trajectory still gathering its steps opens with what it has
            for parent_id in parents:
                task = repository.trajectory_task(session, parent_id)
                if task is not None:
                    task.state = "open"
        return Closing(review.on_deadline, still_open=review.keep_open_after_deadline)


def install_review_tier() -> None:
    """Make the `human` tier's work go to the review queue in this process."""
    register(HumanTier.name, ReviewTier())
