"""Deferred tiers: tiers whose work is not a tier task but something outside (people).

The ladder does not know who does that work. A domain that does it (the review queue) registers
a handler for its tier at start-up; when an item climbs to such a tier, the ladder hands it to
the handler in the same transaction (no broker message) and the item waits in state `deferred`
until the handler records the tier's verdict (`answers.record_deferred`) or the job's deadline
passes (the handler is told the item stops waiting, and says what the reward falls back to and
whether its work stays open: a verdict that comes later revises the fallback reward).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy.orm import Session

from verifier_service.ladder.models import Item, Job, VerdictRecord
from verifier_service.ladder.schemas import Reward, RewardStatus
from verifier_service.ladder.states import ItemState
from verifier_service.policies.schemas import PolicyDocument

Fallback = Literal["best_lower_tier", "infra_error"]


@dataclass(frozen=True)
class Closing:
    """What becomes of deferred items that stop waiting (the job's deadline)."""

    fallback: Fallback
    #: Their work stays open: a verdict that comes later revises the fallback reward.
    still_open: bool = False


@dataclass(frozen=True)
class DeferredWork:
    """Items of one job sent to a deferred tier at one ladder step, with what they have."""

    job: Job
    tier: str
    step: int
    config: dict[str, Any]
    items: Sequence[Item]
    verdicts: dict[str, list[VerdictRecord]]  # item id -> its verdicts so far, in ladder order


class DeferredTier(Protocol):
    """What the ladder asks of the domain that does a deferred tier's work."""

    def send(self, session: Session, work: DeferredWork) -> str:
        """Take the items (in the caller's transaction); a short reason shown on their pending
        rewards, e.g. "waiting for people (queue default)"."""
        ...

    def close(
        self,
        session: Session,
        items: Sequence[Item],
        config: dict[str, Any],
        *,
        cancelled: bool = False,
    ) -> Closing:
        """The items stop waiting (the job's deadline, or `cancelled` by an operator): say what
        their reward falls back to, and close their open work or keep it open (a later verdict
        revises the reward). A cancel closes the work: nobody is asked to judge a cancelled job
        (an operator's retry opens it again)."""
        ...


_handlers: dict[str, DeferredTier] = {}
_lock = threading.Lock()


def register(tier: str, handler: DeferredTier) -> None:
    """Make `tier` deferred in this process, its work done by `handler`."""
    with _lock:
        _handlers[tier] = handler


def handler_for(tier: str) -> DeferredTier | None:
    """The handler of a deferred tier, or None for a tier run by tier tasks."""
    with _lock:
        return _handlers.get(tier)


# ---------------------------------------------------------------------- a ladder pass's side


def send_all(
    session: Session,
    job: Job,
    doc: PolicyDocument,
    groups: dict[tuple[str, str, int], list[Item]],
    records: Callable[[Item], list[VerdictRecord]],
) -> None:
    """Hand the items waiting for deferred tiers over (in this transaction), grouped by
    (tier, kind, step); each gets a pending reward that shows what it waits for."""
    if groups:
        session.flush()  # the handler's rows point at these items
    for (tier, kind, step), items in groups.items():
        handler = handler_for(tier)
        assert handler is not None
        config = dict(doc.ladder_for(kind)[step].config)
        verdicts = {i.id: list(records(i)) for i in items}
        reason = handler.send(session, DeferredWork(job, tier, step, config, items, verdicts))
        parents: set[str] = set()
        for item in items:
            if item.parent_id is not None:
                parents.add(item.parent_id)
            if has_revision(item):
                # An operator's retry: the trainer keeps the earlier reward until the new
                # one replaces it as its next revision.
                continue
            held = records(item)
            item.reward = Reward(
                value=None,
                status=RewardStatus.pending,
                reason=reason,
                fidelity=held[-1].tier if held else None,
                provenance=[r.id for r in held],
            ).model_dump(mode="json")
        for parent_id in sorted(parents):
            _pending_trajectory(session, parent_id, reason)


def _pending_trajectory(session: Session, parent_id: str, reason: str) -> None:
    """A trajectory some of whose steps wait for people has a pending reward (not none)
    that says so, until its steps' rewards make its own."""
    parent = session.get(Item, parent_id)
    if parent is None or parent.state == ItemState.done or has_revision(parent):
        return
    parent.reward = Reward(
        value=None, status=RewardStatus.pending, reason=f"steps {reason}"
    ).model_dump(mode="json")


def close_all(
    session: Session, doc: PolicyDocument, items: Sequence[Item], *, cancelled: bool = False
) -> dict[str, Closing]:
    """Tell deferred tiers their items stop waiting; each one's fallback and whether its
    work stays open."""
    by_step: dict[tuple[str, int], list[Item]] = defaultdict(list)
    for item in items:
        by_step[(item.kind, item.step)].append(item)
    fallbacks: dict[str, Closing] = {}
    for (kind, step), group in by_step.items():
        ladder_step = doc.ladder_for(kind)[step]
        handler = handler_for(ladder_step.tier)
        if handler is None:  # a process without the handler: the policy's fallback
            continue
        closing = handler.close(session, group, dict(ladder_step.config), cancelled=cancelled)
        fallbacks.update((i.id, closing) for i in group)
    return fallbacks


def has_revision(item: Item) -> bool:
    """Whether the item has had a finished reward (it is climbing again: an operator's retry)."""
    return bool((item.reward or {}).get("revision"))
