"""A trajectory under a per-step rubric reaches people as one task (kind "trajectory"): every
step and the final answer with each one's lower-tier verdicts; the answer's `steps` become each
step's human verdict and its `values` the outcome's. Without per_step each step is its own task."""

from __future__ import annotations

import time
import uuid
from typing import Any

from review_factories import RUBRIC, ReviewDb
from test_leases import tx

from verifier_service.core.db import transaction
from verifier_service.jobs.service import job_out
from verifier_service.ladder.dispatch import expire_overdue
from verifier_service.review import operators, service
from verifier_service.review.schemas import AdjudicationIn, AnswerIn

SCHEMA = {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}}}
LOWER = [{"tier": "schema", "config": {"schema": SCHEMA}}]


def _trajectory() -> dict[str, Any]:
    marker = uuid.uuid4().hex

    def call(tool: str) -> dict[str, Any]:
        return {"kind": "json", "payload": {"tool": tool, "marker": marker}}

    return {
        "kind": "trajectory",
        "steps": [
            {"action": call("search"), "observation": "3 results"},
            {"action": call("open"), "observation": "200"},
        ],
        "final_answer": call("answer"),
    }


def _steps(job_id: str) -> dict[int, Any]:
    with transaction() as session:
        job = job_out(session, job_id)
    assert job.status == "completed"
    (item,) = job.items
    assert item.reward is not None
    assert item.reward.status == "scored"
    assert item.steps is not None
    return {s.index: s.reward for s in item.steps}


def test_a_per_step_trajectory_is_one_task_and_its_answer_scores_each_step(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy("json", LOWER, rubric={**RUBRIC, "per_step": True})
    job_id = review_db.job(policy, 1, items=[_trajectory()])
    view = tx(service.next_task, "nia", policy)
    assert view is not None
    assert view.task.kind == "trajectory"
    assert [s["action"]["payload"]["tool"] for s in view.task.payload["steps"]] == [
        "search",
        "open",
    ]
    assert view.task.payload["final_answer"]["payload"]["tool"] == "answer"
    # each step's and the outcome's lower-tier verdict, the steps' marked with their index
    assert sorted((v["tier"], v["step"]) for v in view.task.verdicts if v["step"] is not None) == [
        ("schema", 0),
        ("schema", 1),
    ]
    assert [v["tier"] for v in view.task.verdicts if v["step"] is None] == ["schema"]
    assert tx(service.next_task, "omar", policy) is None  # one task, not three

    answer = AnswerIn(
        values={"quality": 5, "verdict": "good"},
        steps=[{"quality": 1, "verdict": "bad"}, {"quality": 3, "verdict": "good"}],
    )
    tx(service.submit, view.lease_id, "nia", answer, uuid.uuid4().hex)
    rewards = _steps(job_id)
    assert {i: r.value for i, r in rewards.items()} == {0: 0.0, 1: 0.5, 2: 1.0}
    assert all(r.fidelity == "human" for r in rewards.values())


def test_an_adjudicated_trajectory_keeps_the_reviewers_step_answers(review_db: ReviewDb) -> None:
    policy = review_db.policy(
        "json", LOWER, rubric={**RUBRIC, "per_step": True}, overlap=2, min_agreement=0.9
    )
    job_id = review_db.job(policy, 1, items=[_trajectory()])
    for reviewer, overall in (("nia", 5), ("omar", 1)):
        view = tx(service.next_task, reviewer, policy)
        assert view is not None
        steps = [{"quality": 2, "verdict": "bad"}, {"quality": 4, "verdict": "good"}]
        answer = AnswerIn(values={"quality": overall, "verdict": "good"}, steps=steps)
        tx(service.submit, view.lease_id, reviewer, answer, uuid.uuid4().hex)
    (task,) = tx(operators.adjudications, policy)
    tx(
        operators.adjudicate,
        task.task_id,
        AdjudicationIn(values={"quality": 4, "verdict": "good"}),
        "olga",
    )
    rewards = _steps(job_id)
    assert {i: r.value for i, r in rewards.items()} == {0: 0.25, 1: 0.75, 2: 0.75}


def test_without_per_step_each_step_is_its_own_task(review_db: ReviewDb) -> None:
    policy = review_db.policy("json", LOWER)
    review_db.job(policy, 1, items=[_trajectory()])
    kinds = []
    for reviewer in ("nia", "omar", "pia", "quin"):
        view = tx(service.next_task, reviewer, policy)
        if view is not None:
            kinds.append(view.task.kind)
    assert kinds == ["json", "json", "json"]


def test_a_trajectory_answered_after_the_deadline_is_revised_once(review_db: ReviewDb) -> None:
    policy = review_db.policy("json", LOWER, rubric={**RUBRIC, "per_step": True})
    job_id = review_db.job(policy, 1, items=[_trajectory()], deadline_s=1.0)
    time.sleep(1.2)
    assert expire_overdue() == 1
    with transaction() as session:
        (fallback,) = job_out(session, job_id).items
    assert fallback.reward is not None
    assert (fallback.reward.revision, fallback.reward.fidelity) == (1, "schema")

    view = tx(service.next_task, "nia", policy)  # still open after the deadline
    assert view is not None
    assert view.task.kind == "trajectory"
    answer = AnswerIn(
        values={"quality": 5, "verdict": "good"},
        steps=[{"quality": 1, "verdict": "bad"}, {"quality": 3, "verdict": "good"}],
    )
    tx(service.submit, view.lease_id, "nia", answer, uuid.uuid4().hex)
    with transaction() as session:
        (item,) = job_out(session, job_id).items
    assert item.reward is not None
    assert item.reward.revision == 2  # one revision for the three steps revised together
    assert item.steps is not None
    assert {s.index: (s.reward.value, s.reward.revision) for s in item.steps if s.reward} == {
        0: (0.0, 2),
        1: (0.5, 2),
        2: (1.0, 2),
    }
