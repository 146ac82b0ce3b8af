"""The reward API writes a job's JSON from its tree of plain values (orjson), not through the
JobOut model: the bytes must be the ones FastAPI wrote of the model, for any stored values."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from verifier_service.core.rows import plain_row
from verifier_service.jobs.schemas import JobOut, Reward, RewardCost, RewardStatus
from verifier_service.jobs.views import job_json, job_tree
from verifier_service.ladder.models import Item, Job, VerdictRecord

floats = st.floats(allow_nan=True, allow_infinity=True)
maybe_floats = st.none() | floats
names = st.text(min_size=1, max_size=12)
times = st.datetimes(timezones=st.just(UTC))


def _job(n_items: int, status: str, created_at: datetime, finished_at: datetime | None) -> Job:
    return plain_row(
        Job, id="job1", created_at=created_at, finished_at=finished_at, principal="p",
        idempotency_key=None, request_hash="h", policy_name="default", policy_version=3,
        status=status, deadline_at=None, n_items=n_items, n_done=n_items, request_id=None,
    )  # fmt: skip


def _item(n: int, kind: str, reward: dict[str, Any] | None, parent: str | None = None) -> Item:
    return plain_row(
        Item, id=f"item{n}", job_id="job1", index=n, parent_id=parent,
        role="item" if parent is None else "step", kind=kind, candidate={}, content_hash="c",
        group_key=None, state="done" if reward else "running", step=1, reward=reward,
        finished_at=None, dispatched_at=None, claimed_by=None, claimed_at=None, dispatches=1,
    )  # fmt: skip


@st.composite
def rewards(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return None
    reward = Reward(
        value=draw(maybe_floats),
        status=draw(st.sampled_from(list(RewardStatus))),
        reason=draw(st.none() | st.text()),
        components=draw(st.dictionaries(names, floats, max_size=3)),
        step_rewards=draw(st.none() | st.lists(maybe_floats, max_size=3)),
        fidelity=draw(st.none() | names),
        provenance=draw(st.lists(names, max_size=2)),
        cost=RewardCost(cpu_s=draw(floats), wall_s=draw(floats), cost_units=draw(floats)),
    )
    stored = reward.model_dump(mode="json")
    if draw(st.booleans()):
        stored["revision"] = draw(st.integers(1, 5))
    else:  # a row written before a field was added: not in the model's shape
        del stored["revision"], stored["outcome_reward"]
    return stored


def _verdict(draw: st.DrawFn, item_id: str, step: int) -> VerdictRecord:
    return plain_row(
        VerdictRecord, id=f"{item_id}v{step}", item_id=item_id, step=step, tier=draw(names),
        tier_version="1.0", status=draw(st.sampled_from(["passed", "failed", "error"])),
        score=draw(maybe_floats), uncertainty=draw(maybe_floats),
        components=draw(st.dictionaries(names, floats, max_size=4)),
        feedback=draw(st.text()), reason=draw(st.none() | st.text(max_size=20)),
        cpu_s=draw(floats), wall_s=draw(floats), cached=draw(st.booleans()),
        cache_key=None, created_at=draw(times),
    )  # fmt: skip


@st.composite
def jobs(draw: st.DrawFn) -> tuple[Job, list[Item], dict[str, list[VerdictRecord]]]:
    items: list[Item] = []
    for n in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            items.append(_item(n, "molecule", draw(rewards())))
        else:  # a trajectory and its steps
            items.append(_item(n, "trajectory", draw(rewards())))
            steps = range(100 + 10 * n, 100 + 10 * n + draw(st.integers(0, 2)))  # ids apart
            items += [_item(s, "json", draw(rewards()), f"item{n}") for s in steps]
    found = {i.id: [_verdict(draw, i.id, n) for n in range(draw(st.integers(0, 2)))] for i in items}
    status = draw(st.sampled_from(["running", "completed"]))
    job = _job(len(items), status, draw(times), draw(st.none() | times))
    return job, items, found


@given(jobs(), st.lists(st.text(), max_size=2))
def test_a_jobs_json_is_the_bytes_of_its_model(
    job: tuple[Job, list[Item], dict[str, list[VerdictRecord]]], warnings: list[str]
) -> None:
    tree = job_tree(*job, warnings)
    assert job_json(tree) == JobOut.model_validate(tree).model_dump_json().encode()


@given(jobs())
def test_without_verdicts_a_jobs_json_is_the_same_less_every_items_verdicts(
    job: tuple[Job, list[Item], dict[str, list[VerdictRecord]]],
) -> None:
    def stripped(node: dict[str, Any]) -> dict[str, Any]:
        steps = node["steps"]
        return {k: v for k, v in node.items() if k != "verdicts"} | {
            "steps": None if steps is None else [stripped(s) for s in steps]
        }

    full = orjson.loads(job_json(job_tree(*job)))
    slim = orjson.loads(job_json(job_tree(job[0], job[1], None)))
    assert slim == full | {"items": [stripped(i) for i in full["items"]]}
    # As a model (the client's), the slim tree is the same job with empty verdicts.
    model = JobOut.model_validate(job_tree(job[0], job[1], None)).model_dump_json()
    assert model == JobOut.model_validate(job_tree(job[0], job[1], {})).model_dump_json()


def test_what_orjson_cannot_write_goes_through_the_model() -> None:
    reward = Reward(value=1.0, status=RewardStatus.scored).model_dump(mode="json")
    reward["components"] = {"big": 2**70}  # beyond 64 bits: orjson refuses it
    item = _item(0, "molecule", reward)
    tree = job_tree(_job(1, "completed", datetime(2026, 11, 27, tzinfo=UTC), None), [item], {})
    body = job_json(tree)
    assert orjson.loads(body)["items"][0]["reward"]["components"] == {"big": float(2**70)}
    assert body == JobOut.model_validate(tree).model_dump_json().encode()
