"""What a tier that reads an item's surroundings is given with it: for a step or the outcome
of a trajectory (`reads_trajectory`), the steps before it with their observations; for a
member of a GRPO group (`reads_group`), the group's candidates, to rank it among them.

A trajectory's steps are stored as child items holding only their action; the trajectory (the
parent item) holds every step's action and observation. The context is built from it, so a
step's verdict cache key covers what came before it (the same action after other steps is
another question to a process judge)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, object_session

from tiers.base import Candidate
from verifier_service.ladder import repository
from verifier_service.ladder.models import Item

_PARENTS = "ladder.trajectory_parents"
_GROUPS = "ladder.group_members"


def _parent(session: Session, parent_id: str) -> Item | None:
    known: dict[str, Item] = session.info.setdefault(_PARENTS, {})
    parent = known.get(parent_id)
    if parent is None:
        with session.no_autoflush:  # a job being submitted: its rows are written at the end
            parent = session.get(Item, parent_id)
        if parent is None:
            parent = next(
                (o for o in session.new if isinstance(o, Item) and o.id == parent_id), None
            )
        if parent is not None:
            known[parent_id] = parent
    return parent


def trajectory_context(item: Item) -> dict[str, Any] | None:
    """The context of a trajectory's step or outcome: its position, the steps before it (each
    `{action, observation}`), its own observation, and the trajectory's metadata."""
    session = object_session(item)
    if item.parent_id is None or session is None:
        return None
    parent = _parent(session, item.parent_id)
    if parent is None:
        return None
    steps: list[dict[str, Any]] = list(parent.candidate.get("steps") or [])
    upto = item.index if item.role == "step" else len(steps)
    own = steps[item.index] if item.role == "step" and item.index < len(steps) else {}
    return {
        "role": item.role,
        "index": item.index,
        "steps": len(steps),
        "before": [
            {"action": s.get("action"), "observation": s.get("observation")} for s in steps[:upto]
        ],
        "observation": own.get("observation"),
        "metadata": parent.candidate.get("metadata") or {},
    }


def with_context(candidate: Candidate, item: Item) -> Candidate:
    """`candidate` with its trajectory context, for an item that is part of a trajectory."""
    if item.parent_id is None:
        return candidate
    return candidate.model_copy(update={"context": trajectory_context(item)})


def group_context(item: Item) -> dict[str, Any] | None:
    """The context of a GRPO group's member: every member's candidate (in request order, this
    one included) and this one's position among them. None for an item in no group."""
    session = object_session(item)
    if item.group_key is None or item.parent_id is not None or session is None:
        return None
    known: dict[tuple[str, str, str], list[Item]] = session.info.setdefault(_GROUPS, {})
    key = (item.job_id, item.group_key, item.kind)
    members = known.get(key)
    if members is None or all(m.id != item.id for m in members):
        # (a job being submitted: this flushes its rows, as the group gate's query does)
        members = sorted(
            repository.group_items(session, item.job_id, item.group_key, item.kind),
            key=lambda m: m.index,
        )
        known[key] = members
    fields = ("kind", "payload", "reference", "metadata")
    return {
        "group": [{f: m.candidate.get(f) for f in fields} for m in members],
        "position": next(i for i, m in enumerate(members) if m.id == item.id),
    }
