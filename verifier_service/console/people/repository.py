"""The SQL of the console's people pages: gold items with their record, and the real review
tasks an operator may copy into a gold item. The review domain's own queries stay in
review/repository.py."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from verifier_service.review.models import ReviewAnswer, ReviewTask


def gold_tasks(session: Session, limit: int) -> list[tuple[ReviewTask, int, int]]:
    """Gold tasks, newest first, each with how many answers it got and how many were right."""
    answers = (
        select(
            ReviewAnswer.task_id,
            func.count().label("answered"),
            func.count().filter(ReviewAnswer.correct.is_(True)).label("correct"),
        )
        .group_by(ReviewAnswer.task_id)
        .subquery()
    )
    query = (
        select(ReviewTask, answers.c.answered, answers.c.correct)
        .outerjoin(answers, answers.c.task_id == ReviewTask.id)
        .where(ReviewTask.gold.is_(True))
        .order_by(ReviewTask.created_at.desc(), ReviewTask.id)
        .limit(limit)
    )
    return [
        (task, answered or 0, correct or 0) for task, answered, correct in session.execute(query)
    ]


def source_tasks(session: Session, limit: int) -> list[ReviewTask]:
    """Real tasks (not gold, not whole trajectories) people were sent, newest first: what an
    operator can turn into a gold item."""
    query = (
        select(ReviewTask)
        .where(ReviewTask.gold.is_(False), ReviewTask.kind != "trajectory")
        .order_by(ReviewTask.created_at.desc(), ReviewTask.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def task(session: Session, task_id: str, *, lock: bool = False) -> ReviewTask | None:
    """One review task (locked for an update)."""
    query = select(ReviewTask).where(ReviewTask.id == task_id)
    return session.scalars(query.with_for_update() if lock else query).first()
