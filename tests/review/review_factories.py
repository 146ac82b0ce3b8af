"""Factories of the review tests: policies that send items to people, and jobs under them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from verifier_service.core.db import transaction
from verifier_service.jobs import service as jobs
from verifier_service.jobs.schemas import RewardRequest
from verifier_service.policies import service as policies

RUBRIC: dict[str, Any] = {
    "dimensions": [
        {"name": "quality", "type": "score", "min": 1, "max": 5},
        {"name": "verdict", "type": "label", "labels": ["good", "bad"]},
    ]
}


def _everywhere(_tier: str) -> bool:
    return True  # lower tiers' work runs in this process (the inline lane): no worker needed


@dataclass
class ReviewDb:
    """A migrated database this process uses, and factories of jobs that go to people."""

    url: str

    def policy(
        self, kind: str = "text", lower: list[dict[str, Any]] | None = None, **config: Any
    ) -> str:
        """A policy sending every item of `kind` to people (after the `lower` steps), with
        this human step config; the queue is named like the policy unless given."""
        name = f"people-{uuid.uuid4().hex[:8]}"
        step = {"queue": config.pop("queue", name), "rubric": RUBRIC, **config}
        ladder = [*(lower or []), {"tier": "human", "config": step}]
        document = {"name": name, "ladders": {kind: ladder}}
        with transaction() as session:
            policies.save(session, document)
        return name

    def job(
        self, policy: str, n: int, items: list[dict[str, Any]] | None = None, **request: Any
    ) -> str:
        """A job of `n` fresh text items (or of `items`) under `policy`; its id."""
        if items is None:
            items = [{"kind": "text", "payload": {"text": uuid.uuid4().hex}} for _ in range(n)]
        body = RewardRequest.model_validate({"policy": policy, "items": items, **request})
        with transaction() as session:
            submission = jobs.submit(
                session, body, principal="trainer", idempotency_key=None, runs_here=_everywhere
            )
            return submission.job.id
