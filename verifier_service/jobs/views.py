"""A job as the API shows it: one tree of plain values in `JobOut`'s shape, two encodings.

`job_tree` maps the rows (job, items, verdicts) once; without verdicts (a trainer that asked
for rewards only, `?verdicts=false`) each item's `verdicts` key is left out, which `JobOut`
reads as an empty list. `JobOut.model_validate` takes the tree where a model is wanted (the
framework adapters, the console); `job_json` writes it as the reward API's body without
building the models: for a 256-item job, building, validating and dumping its `JobOut` took
5.5-6.2 ms, the tree and its JSON (orjson) 1.6-1.8 ms. The two give the same bytes
(`tests/jobs/test_job_views.py` holds them to it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from verifier_service.jobs.schemas import JobOut, Reward
from verifier_service.ladder.models import JOB_FINISHED, Item, Job, VerdictRecord
from verifier_service.ladder.repository import verdict_fields

#: A job in `JobOut`'s shape as plain values (`job_tree`).
JobTree = dict[str, Any]

#: A stored reward in this shape is already what `Reward`'s JSON dump gives.
_REWARD_KEYS = tuple(Reward.model_fields)


def job_tree(
    job: Job,
    items: Sequence[Item],
    verdicts: Mapping[str, Sequence[VerdictRecord]] | None,
    warnings: Sequence[str] = (),
) -> JobTree:
    """A job, all its items and their verdicts in `JobOut`'s shape: keys in its fields' order,
    every value as its JSON dump would give it (times stay datetimes). `verdicts` None: the
    items' `verdicts` keys are left out."""
    children: dict[str, list[Item]] = defaultdict(list)
    for item in items:
        if item.parent_id is not None:
            children[item.parent_id].append(item)

    def out(item: Item) -> dict[str, Any]:
        node: dict[str, Any] = {
            "index": item.index,
            "kind": item.kind,
            "state": item.state,
            "reward": _reward(item.reward),
        }
        if verdicts is not None:
            node["verdicts"] = [_verdict(r) for r in verdicts.get(item.id, [])]
        node["steps"] = (
            [out(c) for c in sorted(children[item.id], key=lambda c: c.index)]
            if item.kind == "trajectory"
            else None
        )
        return node

    top = sorted((i for i in items if i.parent_id is None), key=lambda i: i.index)
    return {
        "id": job.id,
        # (a cancelled job is finished for a trainer: every item has its final reward, and
        # the cancelled ones say so in their reason)
        "status": "completed" if job.status in JOB_FINISHED else "running",
        "policy": job.policy_name,
        "policy_version": job.policy_version,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "n_items": job.n_items,
        "n_done": job.n_done,
        "request_id": job.request_id,
        "items": [out(i) for i in top],
        "warnings": list(warnings),
    }


def _reward(stored: dict[str, Any] | None) -> dict[str, Any] | None:
    # Stored as `Reward.model_dump(mode="json")` plus its revision; a row in another shape
    # (written before a field was added) goes through the model.
    if stored is None or tuple(stored) == _REWARD_KEYS:
        return stored
    return Reward.model_validate(stored).model_dump(mode="json")


def _verdict(r: VerdictRecord) -> dict[str, Any]:
    # `StoredVerdict`: the verdict's fields, then its id and ladder step.
    return verdict_fields(r) | {"id": r.id, "step": r.step}


def job_json(tree: JobTree) -> bytes:
    """The tree as JSON, the bytes FastAPI would write of its `JobOut`.

    orjson writes times with "Z" as pydantic does, and NaN or infinity as null as pydantic
    does. A value it cannot write (an integer beyond 64 bits, text with a lone surrogate)
    sends the whole tree through the model instead, whatever that makes of it.
    """
    try:
        return orjson.dumps(tree, option=orjson.OPT_UTC_Z)
    except orjson.JSONEncodeError:
        return JobOut.model_validate(tree).model_dump_json().encode()
