"""Gate decisions of one ladder pass: whether an item climbs at a step, alone or as a member of
a GRPO group (a group is decided once, when every member has reached the step)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session

from verifier_service.ladder import repository
from verifier_service.ladder.models import Item, Job, VerdictRecord
from verifier_service.ladder.states import Decision, ItemState
from verifier_service.policies.gates import (
    GateContext,
    GateEvaluationError,
    StepDecision,
    audit_draw,
    compile_expr,
    decide_step,
)
from verifier_service.policies.schemas import LadderStep


class StepGates:
    """The gates of one pass over a job's items; group decisions are remembered for the pass."""

    def __init__(
        self,
        session: Session,
        job: Job,
        records: Callable[[Item], list[VerdictRecord]],
        load: Callable[[Sequence[Item]], None],
        wake: Callable[[Item], None],
    ) -> None:
        self.session = session
        self.job = job
        self._records = records  # an item's stored verdicts (the pass keeps them)
        self._load = load  # loads the verdicts of many items in one query
        self._wake = wake  # a waiting peer whose group was decided goes round again
        self._groups: dict[tuple[str, int], StepDecision | GateEvaluationError] = {}

    def context(self, item: Item, step_index: int) -> GateContext:
        """What a gate expression sees of an item at a step."""
        verdicts = {r.tier: repository.to_verdict(r) for r in self._records(item)}
        return GateContext.build(
            kind=item.kind,
            verdicts=verdicts,
            metadata=item.candidate.get("metadata") or {},
            audit=audit_draw(item.content_hash, step_index),
        )

    def decide(self, item: Item, index: int, step: LadderStep) -> Decision:
        """Climb, audit, stop, or wait for the rest of the item's group."""
        if step.group is None and compile_expr(step.gate, expect="bool").constant == (True,):
            return Decision.climb  # a gate that is always true (the default): nothing to read
        if step.group is not None and item.group_key is not None:
            decision = self._group_decision(item, index, step)
            if decision is None:
                return Decision.wait
        else:
            group = step.group
            (decision,) = decide_step(
                [self.context(item, index)],
                gate=step.gate,
                audit_fraction=step.audit_fraction,
                group_by=group.by if group else None,
                top_k=group.top_k if group else None,
                top_fraction=group.top_fraction if group else None,
            )
        if isinstance(decision, GateEvaluationError):
            raise decision
        if not decision.climb:
            return Decision.stop
        return Decision.audit if decision.reason == "audit" else Decision.climb

    def _group_decision(
        self, item: Item, index: int, step: LadderStep
    ) -> StepDecision | GateEvaluationError | None:
        """Decide a GRPO group's climb at a step once every member has reached it."""
        decided = self._groups.get((item.id, index))
        if decided is not None:
            return decided
        assert step.group is not None
        assert item.group_key is not None
        peers = repository.group_items(self.session, self.job.id, item.group_key, item.kind)
        for peer in peers:
            behind = peer.state != ItemState.done and (
                peer.step < index or (peer.step == index and peer.state == ItemState.running)
            )
            if behind:
                return None
        eligible = [p for p in peers if p.state != ItemState.done and p.step == index]
        self._load(eligible)
        decisions: Sequence[StepDecision | GateEvaluationError]
        try:
            decisions = decide_step(
                [self.context(p, index) for p in eligible],
                gate=step.gate,
                audit_fraction=step.audit_fraction,
                group_by=step.group.by,
                top_k=step.group.top_k,
                top_fraction=step.group.top_fraction,
            )
        except GateEvaluationError as exc:
            decisions = [exc] * len(eligible)  # the whole group stops with the reason
        for peer, decision in zip(eligible, decisions, strict=True):
            self._groups[(peer.id, index)] = decision
            if peer.id != item.id and peer.state == ItemState.waiting:
                self._wake(peer)
        return self._groups[(item.id, index)]
