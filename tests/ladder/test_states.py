"""The ladder's state machine on its own (no database): what a pass may do to an item and what
it may not. The end-to-end tests show the ladder working; these pin the table they rely on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from verifier_service.ladder.models import Item
from verifier_service.ladder.states import (
    TRANSITIONS,
    IllegalTransitionError,
    ItemState,
    Stop,
    StopKind,
    move,
    reopen,
    sent_now,
)


def _item(state: ItemState, step: int = 0) -> Item:
    return Item(id="item-1", state=state.value, step=step, dispatches=0)


def test_every_state_has_a_row_and_done_is_final() -> None:
    assert set(TRANSITIONS) == set(ItemState)
    assert TRANSITIONS[ItemState.done] == frozenset()
    # Every state but done can end: a deadline or a cancel reaches items wherever they are.
    assert all(ItemState.done in TRANSITIONS[s] for s in ItemState if s != ItemState.done)


@pytest.mark.parametrize(
    ("start", "to"),
    [(s, t) for s in ItemState for t in ItemState if t in TRANSITIONS[s]],
)
def test_an_allowed_change_moves_the_item(start: ItemState, to: ItemState) -> None:
    item = _item(start, step=2)
    move(item, to, step=3)
    assert (item.state, item.step) == (to, 3)


@pytest.mark.parametrize(
    ("start", "to"),
    [(s, t) for s in ItemState for t in ItemState if t not in TRANSITIONS[s]],
)
def test_a_change_outside_the_table_is_refused_and_leaves_the_item(
    start: ItemState, to: ItemState
) -> None:
    item = _item(start, step=2)
    with pytest.raises(IllegalTransitionError, match=f"{start} -> {to}"):
        move(item, to, step=5)
    assert (item.state, item.step) == (start, 2)


def test_a_running_or_deferred_item_cannot_be_sent_again_without_its_verdict() -> None:
    # Only a stored verdict (climbing) lets it go up again: no second task for the same step.
    for start in (ItemState.running, ItemState.deferred):
        assert ItemState.running not in TRANSITIONS[start]
        assert ItemState.deferred not in TRANSITIONS[start]


def test_move_without_a_step_keeps_the_step() -> None:
    item = _item(ItemState.climbing, step=4)
    move(item, ItemState.running)
    assert item.step == 4


def test_only_a_finished_item_is_reopened_and_it_climbs_from_the_given_step() -> None:
    item = _item(ItemState.done, step=3)
    item.finished_at = datetime(2026, 1, 1, tzinfo=UTC)
    reopen(item, step=1)
    assert (item.state, item.step, item.finished_at) == (ItemState.climbing, 1, None)
    for state in set(ItemState) - {ItemState.done}:
        with pytest.raises(IllegalTransitionError, match="only a finished item"):
            reopen(_item(state), step=0)


def test_sent_now_counts_dispatches_and_forgets_the_last_claim() -> None:
    item = _item(ItemState.running)
    item.claimed_by, item.claimed_at = "worker-1", datetime(2026, 1, 1, tzinfo=UTC)
    now = datetime(2026, 1, 2, tzinfo=UTC)
    sent_now(item, now, first=True)
    assert (item.dispatches, item.dispatched_at, item.claimed_by, item.claimed_at) == (
        1, now, None, None,
    )  # fmt: skip
    sent_now(item, now, first=False)
    sent_now(item, now, first=False)
    assert item.dispatches == 3


def test_a_stop_reads_as_its_kind_and_detail() -> None:
    assert str(Stop()) == "finished"
    assert str(Stop(StopKind.cancelled, "by operator ada")) == "cancelled: by operator ada"
