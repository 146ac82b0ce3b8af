"""A job climbs under the policy version it was submitted with (`ladder/passes.py`): a policy
changed while the job runs changes neither the tier work it is sent nor the reward it gets."""

from __future__ import annotations

import uuid

from verifier_service.core.db import transaction
from verifier_service.jobs import service as jobs
from verifier_service.jobs.schemas import RewardRequest
from verifier_service.ladder.execute import execute
from verifier_service.ladder.models import Item, Job
from verifier_service.ladder.passes import job_ladders, job_policy, ladder_pass
from verifier_service.ladder.results import Dispatch
from verifier_service.ladder.runs import prepare_tier_run, record_tier_run
from verifier_service.policies import service as policies


def _schema(required: str) -> dict[str, object]:
    return {"type": "object", "required": [required]}


def _policy(name: str, required: str) -> int:
    """Save (and activate) a version of `name` whose one rung wants the key `required`."""
    document = {
        "name": name,
        "ladders": {"json": [{"tier": "schema", "config": {"schema": _schema(required)}}]},
    }
    with transaction() as session:
        return policies.save(session, document).version


def _submit(name: str) -> tuple[str, list[Dispatch]]:
    body = {"policy": name, "items": [{"kind": "json", "payload": {"tool": "search"}}]}
    request = RewardRequest.model_validate(body)
    with transaction() as session:
        submission = jobs.submit(session, request, principal="trainer", idempotency_key=None)
        return submission.job.id, list(submission.ladder.dispatches)


def test_the_pass_of_a_job_is_under_its_own_version_not_the_active_one(ladder_db: str) -> None:
    name = f"tools-{uuid.uuid4().hex[:8]}"
    first = _policy(name, "tool")
    job_id, _ = _submit(name)
    second = _policy(name, "query")  # now the active version
    assert second == first + 1
    with transaction() as session:
        job = session.get(Job, job_id)
        assert job is not None
        assert policies.resolve(session, name).version == second
        assert job_policy(session, job).version == first
        rung = job_ladders(session, job).ladder_for("json")[0]
        assert rung.config["schema"] == _schema("tool")
        ladder = ladder_pass(session, job)
        assert ladder.job is job
        assert ladder.doc.ladder_for("json")[0].config["schema"] == _schema("tool")


def test_tier_work_sent_before_a_policy_change_is_scored_under_the_jobs_version(
    ladder_db: str,
) -> None:
    name = f"tools-{uuid.uuid4().hex[:8]}"
    _policy(name, "tool")
    job_id, dispatches = _submit(name)
    _policy(name, "query")  # the item has no "query": under this version it would fail
    [work] = dispatches
    with transaction() as session:
        run = prepare_tier_run(session, work.tier, work.kind, work.step, work.item_ids)
    assert run is not None
    verdicts = execute(run)
    with transaction() as session:
        record_tier_run(session, run, verdicts, work.item_ids)
    with transaction() as session:
        job = session.get(Job, job_id)
        [item] = session.query(Item).filter_by(job_id=job_id).all()
        assert job is not None
        assert job.status == "completed"
        assert item.reward is not None
        assert item.reward["status"] == "scored", item.reward
        assert item.reward["value"] == 1.0, item.reward
