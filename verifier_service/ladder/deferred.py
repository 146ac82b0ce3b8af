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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sqlalchemy.orm import Session

from verifier_service.ladder.models import Item, Job, VerdictRecord

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
