"""The ladder's vocabulary: item states, step decisions, why an item stopped, and which state
changes are allowed (all in one table, so a reader sees the whole machine at once)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from verifier_service.ladder.models import Item


class ItemState(StrEnum):
    """Where an item is on its ladder (`items.state`; `items.step` is the next step)."""

    climbing = "climbing"  # being decided by a ladder pass
    waiting = "waiting"  # at a group step until every member of its GRPO group has reached it
    running = "running"  # a tier task has it
    deferred = "deferred"  # a deferred tier (people) has it: no task, no broker message
    done = "done"  # it has its reward


class Decision(StrEnum):
    """What a ladder step decides for one item."""

    climb = "climb"  # the gate lets it up to the step's tier
    audit = "audit"  # the gate held it, but audit sampling sends it up anyway
    stop = "stop"  # the gate holds it: its reward is made from what it has
    wait = "wait"  # a group step whose group has not caught up yet


class StopKind(StrEnum):
    """Why an item's climb ended before (or at) the top of its ladder."""

    finished = "finished"  # the ladder's end, a gate's stop, or an error/pending verdict
    deadline = "deadline"  # the job's deadline passed
    gate_error = "gate_error"  # a gate expression failed: the reward is an infra_error
    budget_exhausted = "budget_exhausted"  # the next tier's budget is spent
    lost = "lost"  # the item's tier work was lost or kept killing its worker
    cancelled = "cancelled"  # an operator cancelled the job


@dataclass(frozen=True)
class Stop:
    """Why an item stopped climbing, with the detail a person needs to act on it."""

    kind: StopKind = StopKind.finished
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.detail}" if self.detail else self.kind.value


FINISHED = Stop()

#: Every allowed change of an item's state. `done` is final.
TRANSITIONS: dict[ItemState, frozenset[ItemState]] = {
    # decided: climbs on (a cache hit), waits for its group, goes to a tier, or is finished
    ItemState.climbing: frozenset(
        {
            ItemState.climbing,
            ItemState.waiting,
            ItemState.running,
            ItemState.deferred,
            ItemState.done,
        }
    ),
    # its group caught up: decided like a climbing item
    ItemState.waiting: frozenset(
        {
            ItemState.climbing,
            ItemState.waiting,
            ItemState.running,
            ItemState.deferred,
            ItemState.done,
        }
    ),
    # the tier's verdict is stored: the item climbs on; or the job ends under it (deadline,
    # lost work)
    ItemState.running: frozenset({ItemState.climbing, ItemState.done}),
    # people answered (the verdict is stored): the item climbs on; or the job's deadline passed
    ItemState.deferred: frozenset({ItemState.climbing, ItemState.done}),
    ItemState.done: frozenset(),
}


class IllegalTransitionError(RuntimeError):
    """A bug: a state change the ladder's table does not allow."""


def move(item: Item, to: ItemState, *, step: int | None = None) -> None:
    """Change an item's state (and, when given, its next step) as the table allows."""
    current = ItemState(item.state)
    if to not in TRANSITIONS[current]:
        raise IllegalTransitionError(f"item {item.id}: {current} -> {to} is not a transition")
    item.state = to
    if step is not None:
        item.step = step


def sent_now(item: Item, now: datetime, *, first: bool) -> None:
    """Note that the item's tier work was (first: just now for the first time) sent."""
    item.dispatched_at = now
    item.claimed_by = item.claimed_at = None
    item.dispatches = 1 if first else item.dispatches + 1


def reopen(item: Item, *, step: int) -> None:
    """An operator's retry: a finished item climbs again from `step`. Its reward stays until
    the new one replaces it as the next revision (the trainer sees item.revised), so a trainer
    keeps one job and one item per thing it sent. The one way out of `done`, kept out of
    TRANSITIONS so that no ladder pass can take it."""
    if ItemState(item.state) != ItemState.done:
        raise IllegalTransitionError(f"item {item.id}: only a finished item can be retried")
    item.state = ItemState.climbing
    item.step = step
    item.finished_at = None
