"""What a ladder pass hands back to its caller: tier work to send and jobs that finished."""

from __future__ import annotations

from dataclasses import dataclass, field

from verifier_service.events import service as events


@dataclass(frozen=True)
class Dispatch:
    """Items of one job that go to one tier at one ladder step."""

    tier: str
    kind: str
    step: int
    item_ids: tuple[str, ...]


@dataclass
class LadderResult:
    """What a ladder pass wants done after its transaction commits."""

    dispatches: list[Dispatch] = field(default_factory=list)
    finished_jobs: set[str] = field(default_factory=set)
    #: Items finished or revised and jobs finished: written just before the commit.
    events: list[events.EventDraft] = field(default_factory=list)
