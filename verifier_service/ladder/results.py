"""What a ladder pass hands back to its caller: tier work to send and jobs that finished."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from verifier_service.events import service as events


@dataclass(frozen=True)
class Dispatch:
    """Items of one job that go to one tier at one ladder step."""

    tier: str
    kind: str
    step: int
    item_ids: tuple[str, ...]
    #: Each item's cache key at this step as the pass derived it, and the tier version it was
    #: derived under: the task takes them instead of parsing every item again (for molecules
    #: an RDKit parse each). Empty when the sender did not derive them (a resend).
    keys: tuple[str, ...] = ()
    tier_version: str | None = None


def chunks(
    ids: Sequence[str], key_of: Callable[[str], str], most: int
) -> Iterator[tuple[str, ...]]:
    """Items of one tier step in tasks of about even size, at most about `most` (the
    `worker.task_items` setting: a trainer's large batch is taken by several worker processes
    at once, while a small job stays one task and waits behind at most a few of these chunks);
    items with the same cache key (`key_of`) stay in one task (the first's work answers the
    rest)."""
    by_key: dict[str, list[str]] = defaultdict(list)
    for item_id in ids:
        by_key[key_of(item_id)].append(item_id)
    size = -(-len(ids) // -(-len(ids) // most))
    chunk: list[str] = []
    for same in by_key.values():
        chunk.extend(same)
        if len(chunk) >= size:
            yield tuple(chunk)
            chunk = []
    if chunk:
        yield tuple(chunk)


@dataclass
class LadderResult:
    """What a ladder pass wants done after its transaction commits."""

    dispatches: list[Dispatch] = field(default_factory=list)
    finished_jobs: set[str] = field(default_factory=set)
    #: Items finished or revised and jobs finished: written just before the commit.
    events: list[events.EventDraft] = field(default_factory=list)
