"""Sending ladder work to Celery, always after the commit that made its rows visible."""

from __future__ import annotations

from tiers.registry import get_tier
from verifier_service.core.notify import publish_job_finished
from verifier_service.ladder.service import LadderResult
from verifier_service.settings import get_settings
from workers.celery_app import app


def tier_task_name(tier: str) -> str:
    """`chem.fast` -> `tier.chem_fast.verify`."""
    return f"tier.{tier.replace('.', '_')}.verify"


def send(result: LadderResult) -> None:
    for dispatch in result.dispatches:
        app.send_task(
            tier_task_name(dispatch.tier),
            args=[dispatch.kind, dispatch.step, list(dispatch.item_ids)],
            queue=get_tier(dispatch.tier).queue,
        )
    publish_job_finished(get_settings().broker_url, result.finished_jobs)


def schedule_deadline(job_id: str, deadline_s: float) -> None:
    app.send_task("ladder.expire", args=[job_id], countdown=deadline_s, queue="ladder")
