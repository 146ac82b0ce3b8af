"""Quality on a real database: gold items measure and pause reviewers, disagreement goes to
an operator whose decision is final, answers export, and every step is in the audit log."""

from __future__ import annotations

import csv
import io
import json
import uuid

import pytest
from review_factories import ReviewDb
from sqlalchemy import select
from test_leases import GOOD, tx

from verifier_service.auth.models import AuditEvent
from verifier_service.core.db import transaction
from verifier_service.core.errors import InvalidRequestError
from verifier_service.jobs.service import job_out
from verifier_service.review import export, operators, service
from verifier_service.review.schemas import AdjudicationIn, AnswerIn, GoldItemIn, Rubric
from verifier_service.review.service import ReviewerPausedError

RUBRIC = Rubric.model_validate(
    {
        "dimensions": [
            {"name": "quality", "type": "score", "min": 1, "max": 5},
            {"name": "verdict", "type": "label", "labels": ["good", "bad"]},
        ]
    }
)


def _gold(queue: str, known: dict[str, float | str]) -> str:
    item = GoldItemIn(kind="text", payload={"text": uuid.uuid4().hex}, rubric=RUBRIC, answer=known)
    return tx(operators.add_gold, queue, item, "op").task_id


def test_a_gold_miss_lowers_accuracy_and_pauses_the_reviewer_at_the_threshold(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy(gold_rate=1.0, min_gold_accuracy=0.7)
    review_db.job(policy, 2)  # real work waits, but gold_rate 1 serves gold first
    known = {"quality": 5.0, "verdict": "good"}
    gold = {_gold(policy, known) for _ in range(3)}

    def answer_next(values: dict[str, float | str]) -> None:
        view = tx(service.next_task, "gina", policy)
        assert view is not None
        assert view.task.task_id in gold  # gold is served, looking like any task
        assert "gold" not in view.task.model_dump_json()
        tx(service.submit, view.lease_id, "gina", AnswerIn(values=values), uuid.uuid4().hex)

    def accuracy() -> float | None:
        (me,) = [r for r in tx(operators.reviewers) if r.reviewer == "gina"]
        return me.gold_accuracy

    answer_next(known)
    assert accuracy() == 1.0
    answer_next({"quality": 1, "verdict": "bad"})  # a miss
    assert accuracy() == 0.5
    assert not tx(service.stats, "gina").paused  # two gold answers: too few to judge
    answer_next({"quality": 2, "verdict": "bad"})  # 1 of 3 < 70 %: paused
    assert accuracy() == pytest.approx(1 / 3)
    assert tx(service.stats, "gina").paused
    with pytest.raises(ReviewerPausedError, match="below 70%"):
        tx(service.next_task, "gina", policy)
    with transaction() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "review.reviewer_paused")
        ).all()
    assert [(e.target, e.detail["gold_correct"]) for e in events] == [("gina", 1)]
    tx(operators.set_paused, "gina", False, "op")  # an operator lets her go on
    assert tx(service.next_task, "gina", policy) is not None


def test_disagreement_goes_to_an_operator_whose_decision_completes_the_item(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy(overlap=2, min_agreement=0.667)
    job_id = review_db.job(policy, 1)
    answers = [
        ("hal", {"quality": 1, "verdict": "bad"}),
        ("ivy", {"quality": 5, "verdict": "good"}),
    ]
    for reviewer, values in answers:
        view = tx(service.next_task, reviewer, policy)
        assert view is not None
        tx(service.submit, view.lease_id, reviewer, AnswerIn(values=values), uuid.uuid4().hex)

    with transaction() as session:
        assert job_out(session, job_id).status == "running"  # people disagreed: not scored
    (pending,) = tx(operators.adjudications, policy)
    assert {a["reviewer"] for a in pending.answers} == {"hal", "ivy"}
    assert pending.agreement["quality"] < 0.667
    # Over the queue (one item): the chance disagreement is the item's own, so alpha is 0.
    assert tx(operators.queue_agreement, policy)["quality"] == pytest.approx(0.0)
    wrong = AdjudicationIn(values={"quality": 9, "verdict": "good"})
    with pytest.raises(InvalidRequestError, match="quality"):  # out of the rubric: named
        tx(operators.adjudicate, pending.task_id, wrong, "op")
    decision = AdjudicationIn(values={"quality": 2, "verdict": "bad"})
    tx(operators.adjudicate, pending.task_id, decision, "op")

    with transaction() as session:
        job = job_out(session, job_id)
    assert job.status == "completed"
    reward = job.items[0].reward
    assert reward is not None
    assert reward.status == "scored"
    assert reward.value == pytest.approx(0.25)  # the operator's 2 on 1..5, final
    assert tx(operators.adjudications, policy) == []
    with transaction() as session:
        audited = session.execute(
            select(AuditEvent.actor, AuditEvent.action).where(
                AuditEvent.target == pending.task_id,
                AuditEvent.action.in_(["review.adjudication_needed", "review.adjudicate"]),
            )
        ).all()
    assert sorted(audited) == [
        ("op", "review.adjudicate"),
        ("system", "review.adjudication_needed"),
    ]


def test_agreeing_answers_complete_the_item_with_their_means_and_agreement(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy(overlap=2)
    job_id = review_db.job(policy, 1)
    for reviewer in ("jo", "kim"):
        view = tx(service.next_task, reviewer, policy)
        assert view is not None
        tx(service.submit, view.lease_id, reviewer, GOOD, uuid.uuid4().hex)
    with transaction() as session:
        job = job_out(session, job_id)
    assert job.status == "completed"
    (human,) = [v for v in job.items[0].verdicts if v.tier == "human"]
    assert human.components["quality"] == 4.0
    assert human.components["verdict.good"] == 1.0
    assert human.components["agreement"] == 1.0
    # Over the queue: one item, no variation at all: alpha is undefined, and said so.
    assert tx(operators.queue_agreement, policy) == {"quality": None, "verdict": None}


def test_answers_export_as_jsonl_and_csv_and_every_step_is_audited(review_db: ReviewDb) -> None:
    policy = review_db.policy(overlap=1)
    review_db.job(policy, 2)
    first = tx(service.next_task, "lee", policy)
    assert first is not None
    tx(service.skip, first.lease_id, "lee")
    second = tx(service.next_task, "lee", policy)
    assert second is not None
    tx(service.release, second.lease_id, "lee")
    third = tx(service.next_task, "lee", policy)
    assert third is not None
    meh = AnswerIn(values={"quality": 3, "verdict": "bad"}, comment="meh")
    tx(service.submit, third.lease_id, "lee", meh, uuid.uuid4().hex)

    lines = [json.loads(line) for line in export.jsonl(policy)]
    assert [(r["reviewer"], r["values"], r["comment"]) for r in lines] == [
        ("lee", {"quality": 3.0, "verdict": "bad"}, "meh")
    ]
    rows = list(csv.DictReader(io.StringIO("".join(export.csv_rows(policy)))))
    assert [(r["reviewer"], r["value.quality"], r["value.verdict"]) for r in rows] == [
        ("lee", "3.0", "bad")
    ]
    with transaction() as session:
        actions = [
            e.action
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.actor == "lee").order_by(AuditEvent.id)
            )
        ]
    assert actions == [
        "review.lease", "review.skip", "review.lease", "review.release", "review.lease",
        "review.answer",
    ]  # fmt: skip


def test_an_answer_outside_the_rubric_is_refused_naming_the_dimension(
    review_db: ReviewDb,
) -> None:
    policy = review_db.policy()
    review_db.job(policy, 1)
    view = tx(service.next_task, "max", policy)
    assert view is not None
    bad = AnswerIn(values={"quality": 7, "verdict": "good"})
    with pytest.raises(InvalidRequestError, match=r"values\.quality: 7 is not a score from 1 to 5"):
        tx(service.submit, view.lease_id, "max", bad, uuid.uuid4().hex)
    stepped = AnswerIn(values={"quality": 3, "verdict": "good"}, steps=[{"quality": 3}])
    with pytest.raises(InvalidRequestError, match="no per-step judgements"):
        tx(service.submit, view.lease_id, "max", stepped, uuid.uuid4().hex)
