"""The ladder state machine: moves items up their policy's tiers and makes their rewards.

An item's ladder state lives in its row: `step` (the next ladder step to consider) and `state`
(an `ItemState`; the allowed changes are the table in `states.py`). A pass over some items of
one job runs inside the caller's transaction and returns the tier work to enqueue after commit.
It works in rounds: every item still climbing is decided at its current step, then the cache is
read once for all of them; items answered from the cache go round again at their next step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from tiers.base import Candidate, Verdict, VerdictStatus
from tiers.registry import get_tier
from verifier_service.core.db import utcnow
from verifier_service.events import service as events
from verifier_service.ladder import deferred, repository
from verifier_service.ladder.budgets import BudgetBook
from verifier_service.ladder.deferred import Closing, handler_for
from verifier_service.ladder.execute import TierRun, execute, item_cache_key, tier_candidate
from verifier_service.ladder.gating import StepGates
from verifier_service.ladder.models import JOB_FINISHED, CostLedgerEntry, Item, Job, VerdictRecord
from verifier_service.ladder.results import Dispatch, LadderResult, chunks
from verifier_service.ladder.rewards import leaf_reward, trajectory_reward
from verifier_service.ladder.schemas import Reward
from verifier_service.ladder.states import (
    FINISHED,
    Decision,
    ItemState,
    Stop,
    StopKind,
    move,
    sent_now,
)
from verifier_service.ladder.writes import PendingWrites
from verifier_service.metrics import record as observe
from verifier_service.policies.gates import GateEvaluationError
from verifier_service.policies.schemas import PolicyDocument
from verifier_service.policies.service import ResolvedPolicy
from verifier_service.settings import get_settings

OPEN = (ItemState.climbing, ItemState.waiting)


@dataclass(frozen=True)
class _Climb:
    """An item that climbs to the tier of its current step, unless the cache answers first."""

    item: Item
    tier: str
    key: str
    audit: bool


#: Verdicts after which an item climbs no further.
UNSETTLED = (VerdictStatus.error, VerdictStatus.pending)


class LadderPass:
    """One pass of the state machine over items of one job, in the caller's transaction."""

    def __init__(self, session: Session, job: Job, policy: ResolvedPolicy) -> None:
        self.session = session
        self.job = job
        self.doc: PolicyDocument = policy.document
        self.now = utcnow()
        self.result = LadderResult()
        self.budgets = BudgetBook(session, job, self.doc.budgets, self.now)
        self._verdicts: dict[str, list[VerdictRecord]] = {}
        self._dispatch: dict[tuple[str, str, int], list[str]] = defaultdict(list)
        self._woken: dict[str, Item] = {}
        self.gates = StepGates(session, job, self._records, self._load_verdicts, self._wake)
        self._items: dict[str, Item] = {}
        # Cache key and candidate of each item this pass sent to a tier (for advance_here,
        # and the keys its dispatches carry).
        self._sent: dict[str, tuple[str, Candidate]] = {}
        self._ledger: dict[tuple[str, int], CostLedgerEntry] = {}
        # Items this pass handed to a deferred tier (people), by (tier, kind, step).
        self._deferred: dict[tuple[str, str, int], list[Item]] = defaultdict(list)
        # While set: trajectories whose steps were revised, recomposed once at the end.
        self._held_parents: set[str] | None = None
        # Parts (steps, outcome) not done of each trajectory this pass finished a part of.
        self._open_parts: dict[str, int] = {}
        # Rows made by this pass (verdicts, ledger rows, cache entries, tier times), written
        # together by `_write`.
        self._writes = PendingWrites()
        #: The job's status when its last item finishes in this pass (an operator's cancel:
        #: "cancelled").
        self.finishes_as = "completed"

    # ------------------------------------------------------------------ entry points

    def advance(self, items: Iterable[Item]) -> LadderResult:
        """Move each item as far up its ladder as it can go without waiting on a tier."""
        self._move(items)
        self._write()
        self._send_deferred()
        return self.result

    def _move(self, items: Iterable[Item]) -> None:
        """`advance` without writing: the rows it makes wait in the pass."""
        round_ = list({i.id: i for i in items}.values())
        self._items.update((i.id, i) for i in round_)
        self._load_verdicts(round_)
        while round_:
            climbs = [c for item in round_ if (c := self._decide_step(item)) is not None]
            again = self._climb(climbs)
            woken, self._woken = list(self._woken.values()), {}
            round_ = list({i.id: i for i in [*again, *woken] if i.state in OPEN}.values())
        for (tier, kind, step), ids in self._dispatch.items():
            most = get_settings().worker.task_items
            version = get_tier(tier).version
            for chunk in chunks(ids, lambda item_id: self._sent[item_id][0], most):
                keys = tuple(self._sent[item_id][0] for item_id in chunk)
                self.result.dispatches.append(Dispatch(tier, kind, step, chunk, keys, version))
        self._dispatch.clear()

    def _write(self) -> None:
        """Write the rows this pass made so far (see `PendingWrites.write`)."""
        self._writes.write(self.session)

    def new_items(self, items: Iterable[Item]) -> None:
        """Items this transaction just created: known to have no verdicts, nothing to query."""
        for item in items:
            self._verdicts.setdefault(item.id, [])

    def advance_here(self, items: Iterable[Item], runs_here: Callable[[str], bool]) -> LadderResult:
        """`advance`, running the work of tiers that `runs_here` accepts now, in this
        transaction.

        The inline lane of small waiting requests: their fast-tier work (milliseconds) runs in
        the caller's process and transaction instead of a round trip through the broker, with
        the same verdicts, cache and ledger as a tier task. Work of other tiers stays in the
        result, for the caller to enqueue after commit. The pass's rows (new items and job
        included, in the state they end in) are written once, at the end.
        """
        self._move(items)
        while here := [d for d in self.result.dispatches if runs_here(d.tier)]:
            self.result.dispatches = [d for d in self.result.dispatches if d not in here]
            for work in here:
                items = [self._items[i] for i in work.item_ids]
                config = dict(self.doc.ladder_for(work.kind)[work.step].config)
                run = TierRun(self.job.id, work.tier, work.kind, work.step, config)
                for item in items:  # keyed when the pass looked the cache up: no second parse
                    run.add(item.id, *self._sent[item.id])
                verdicts = execute(run)
                with self.session.no_autoflush:  # new items are written once, below
                    self.store(run, verdicts, items, set())
            self._move(i for i in self._items.values() if i.state == ItemState.climbing)
        self._write()
        self._send_deferred()
        return self.result

    def store(
        self,
        run: TierRun,
        verdicts: dict[str, Verdict],
        items: Sequence[Item],
        already: set[str],
    ) -> None:
        """Store a tier run's verdicts (one per cache key) on its items and fill the cache.

        Each item's ledger row at this step gets the call's CPU and wall time, or, for a
        duplicate that rode on another item's call, costs nothing: a row this pass made (the
        inline lane) before it is written, a stored one (a tier task) with one UPDATE per kind
        of change."""
        self._writes.cache.update(
            (key, verdict)
            for key, verdict in verdicts.items()
            if verdict.status in (VerdictStatus.passed, VerdictStatus.failed)
        )
        self._load_verdicts(items)  # one query, not one per item in record()
        first_for_key: set[str] = set()
        timed: list[repository.ChargeTimes] = []
        riders: list[str] = []
        for item in items:
            if item.id in already:  # a redelivered task: the verdict is stored, just move on
                move(item, ItemState.climbing, step=run.step + 1)
                continue
            item_key = run.keys.get(item.id)
            if item_key is None or item_key not in verdicts:
                continue
            verdict = verdicts[item_key]
            entry = self._ledger.get((item.id, run.step))  # made by this pass, not yet written
            if item_key in first_for_key:  # a duplicate in this batch rides on the first's work
                verdict = verdict.model_copy(update={"cached": True})
                if entry is None:
                    riders.append(item.id)
                else:
                    entry.cached, entry.cost_units = True, 0.0
            else:
                first_for_key.add(item_key)
                cost = verdict.cost
                units = verdict.components.get("cost_units")  # a judge's tokens at its price
                if entry is None:
                    timed.append(repository.ChargeTimes(item.id, cost.cpu_s, cost.wall_s, units))
                else:
                    entry.cpu_s, entry.wall_s = cost.cpu_s, cost.wall_s
                    if units is not None:
                        entry.cost_units = units
            self.record(item, run.step, verdict, item_key)
        self._writes.charge_updates.append((run.step, timed, riders))  # written by `_write`

    def verdicts_of(self, item_id: str) -> list[VerdictRecord]:
        """The verdicts this pass knows of an item (all of them, for items it created)."""
        return self._verdicts.get(item_id, [])

    def expire(self, items: Iterable[Item]) -> LadderResult:
        """At the job's deadline: finish every open item with what it has."""
        self.end(items, Stop(StopKind.deadline))
        return self.result

    def end(self, items: Iterable[Item], stop: Stop) -> None:
        """Finish these items now, whatever their state, for the reason `stop`.

        Items a deferred tier holds have its work closed first; their reward falls back as
        that tier's config says."""
        pending = [i for i in items if i.state != ItemState.done]
        self._load_verdicts(pending)
        held = [i for i in pending if i.state == ItemState.deferred]
        closings = self._close_deferred(held, cancelled=stop.kind == StopKind.cancelled)
        for item in pending:
            closing = closings.get(item.id)
            if closing is None:
                self._finish(item, stop)
            else:
                # (the stop's own detail first: a cancel names the operator who cancelled)
                details = [stop.detail] if stop.detail else []
                details.append(f"{self._step_tier(item)} had not answered")
                if closing.still_open:
                    details.append("its answer will revise this reward")
                self._finish(item, Stop(stop.kind, "; ".join(details)), closing.fallback)

    def deliver(self, item: Item, verdict: Verdict) -> LadderResult:
        """A deferred tier's verdict for an item it held: store it (with its content key, so
        that a replay finds it) and move the item on."""
        step = self.doc.ladder_for(item.kind)[item.step]
        key = item_cache_key(step.tier, dict(step.config), item)
        self.record(item, item.step, verdict, key)
        return self.advance([item])

    def deliver_late(self, item: Item, verdict: Verdict) -> LadderResult:
        """A deferred tier's verdict for an item that took a fallback reward when it stopped
        waiting (the job's deadline): stored, and the item's reward made anew from every
        verdict is its next revision (the steps after this one are not run: the job is over)."""
        step = self.doc.ladder_for(item.kind)[item.step]
        key = item_cache_key(step.tier, dict(step.config), item)
        records = self._records(item)
        records.append(repository.add_verdict(self.session, item.id, item.step, verdict, key))
        observe.verdict(self.session, verdict)
        later = len(self.doc.ladder_for(item.kind)) - item.step - 1
        stop = FINISHED
        if later > 0:
            stop = Stop(StopKind.deadline, f"{step.tier} answered late; later steps not run")
        context = self.gates.context(item, item.step)
        self.revise(item, leaf_reward(self.doc, item, records, stop, context))
        return self.result

    def deliver_all(self, verdicts: Sequence[tuple[Item, Verdict]], step: int) -> LadderResult:
        """A deferred tier's verdicts for several items it held at `step` (a trajectory's steps
        judged as one task): each delivered, or delivered late; a trajectory revised through
        several of its steps gets one new revision, not one per step."""
        self._held_parents = set()
        for item, verdict in verdicts:
            if item.state == ItemState.deferred:
                self.deliver(item, verdict)
            elif item.state == ItemState.done and item.step == step and not self.answered(item):
                self.deliver_late(item, verdict)
        held, self._held_parents = self._held_parents, None
        for parent_id in sorted(held):
            siblings = repository.children(self.session, parent_id)
            parent = self.session.get(Item, parent_id)
            if parent is not None and all(s.state == ItemState.done for s in siblings):
                self._complete(parent, trajectory_reward(self.doc, siblings))
        return self.result

    def answered(self, item: Item) -> bool:
        """Whether the item has a verdict at its current step."""
        return any(r.step == item.step for r in self._records(item))

    def record(self, item: Item, step: int, verdict: Verdict, key: str | None) -> None:
        """Store a tier's verdict for an item that was running (or answered by the cache)."""
        record = repository.new_verdict(item.id, step, verdict, key, self.now)
        self._records(item).append(record)
        self._writes.verdicts.append(record)
        observe.verdict(self.session, verdict)
        move(item, ItemState.climbing, step=step + 1)

    # ------------------------------------------------------------------ one round

    def _load_verdicts(self, items: Sequence[Item]) -> None:
        """One query for the stored verdicts of every item this pass does not know yet."""
        missing = [i.id for i in items if i.id not in self._verdicts]
        if missing:
            found = repository.verdicts_for(self.session, missing)
            for item_id in missing:
                self._verdicts[item_id] = found.get(item_id, [])

    def _wake(self, peer: Item) -> None:
        """A waiting peer whose group was decided goes round again in this pass."""
        self._items[peer.id] = peer
        self._woken[peer.id] = peer

    def _records(self, item: Item) -> list[VerdictRecord]:
        if item.id not in self._verdicts:
            self._load_verdicts([item])
        return self._verdicts[item.id]

    def _decide_step(self, item: Item) -> _Climb | None:
        """Decide an open item at its current step: finish it, park it, or let it climb."""
        if item.state not in OPEN:
            return None
        ladder = self.doc.ladder_for(item.kind)
        records = self._records(item)
        last = records[-1] if records else None
        stop: Stop | None = None
        # (an error verdict at the item's own step is one an operator's retry is trying again)
        if last is not None and last.step < item.step and last.status in UNSETTLED:
            stop = FINISHED
        elif item.step >= len(ladder):
            stop = FINISHED
        elif self.job.deadline_at is not None and self.now >= self.job.deadline_at:
            stop = Stop(StopKind.deadline)
        if stop is not None:
            self._finish(item, stop)
            return None
        step = ladder[item.step]
        try:
            decision = self.gates.decide(item, item.step, step)
            observe.gate_decision(self.session, self.job.policy_name, item.step, step, decision)
        except GateEvaluationError as exc:
            self._finish(item, Stop(StopKind.gate_error, f"ladder step {item.step}: {exc}"))
            return None
        if decision == Decision.wait:
            move(item, ItemState.waiting)
            return None
        if decision == Decision.stop:
            self._finish(item)
            return None
        key = item_cache_key(step.tier, dict(step.config), item)
        return _Climb(item, step.tier, key, audit=decision == Decision.audit)

    def _climb(self, climbs: Sequence[_Climb]) -> list[Item]:
        """Answer climbs from the cache (one query), else send them to their tier; the items
        the cache answered, to decide at their next step."""
        if not climbs:
            return []
        # (Not flushing first: items this transaction made are written once, in their final
        # state, at the end of the pass instead of inserted here and updated at commit.)
        with self.session.no_autoflush:
            hits = repository.cached_verdicts(self.session, {c.key for c in climbs}, as_hits=True)
        answered: list[Item] = []
        for climb in climbs:
            item = climb.item
            hit = hits.get(climb.key)
            if hit is not None:
                self._charge(item, climb.tier, 0.0, cached=True, audit=climb.audit)
                self.record(item, item.step, hit, climb.key)
                answered.append(item)
                continue
            units = get_tier(climb.tier).cost_class
            over = self.budgets.over(climb.tier, units)
            if over is not None:
                self._finish(item, over)
                continue
            self._charge(item, climb.tier, units, cached=False, audit=climb.audit)
            if handler_for(climb.tier) is not None:
                move(item, ItemState.deferred)
                self._deferred[(climb.tier, item.kind, item.step)].append(item)
                continue
            self._sent[item.id] = (climb.key, tier_candidate(climb.tier, item))
            move(item, ItemState.running)
            sent_now(item, self.now, first=True)
            self._dispatch[(climb.tier, item.kind, item.step)].append(item.id)
        observe.cache_lookups(self.session, ((c.tier, c.key in hits) for c in climbs))
        return answered

    # ------------------------------------------------------------------ deferred tiers

    def _step_tier(self, item: Item) -> str:
        return self.doc.ladder_for(item.kind)[item.step].tier

    def _send_deferred(self) -> None:
        groups, self._deferred = self._deferred, defaultdict(list)
        deferred.send_all(self.session, self.job, self.doc, groups, self._records)

    def _close_deferred(
        self, items: Sequence[Item], *, cancelled: bool = False
    ) -> dict[str, Closing]:
        return deferred.close_all(self.session, self.doc, items, cancelled=cancelled)

    # ------------------------------------------------------------------ cost

    def _charge(self, item: Item, tier: str, units: float, *, cached: bool, audit: bool) -> None:
        # Written in bulk with the pass's other rows (`_write`). A tier call's row gets its
        # CPU and wall time when the verdict comes (`store`).
        self._ledger[(item.id, item.step)] = entry = repository.new_charge(
            job_id=self.job.id,
            item_id=item.id,
            step=item.step,
            tier=tier,
            principal=self.job.principal,
            policy_name=self.job.policy_name,
            policy_version=self.job.policy_version,
            cost_units=units,
            cached=cached,
            audit=audit,
            created_at=self.now,
        )
        self._writes.charges.append(entry)
        self.budgets.charged(tier, units)

    # ------------------------------------------------------------------ rewards

    def _finish(self, item: Item, stop: Stop = FINISHED, fallback: str | None = None) -> None:
        context = self.gates.context(item, item.step)
        reward = leaf_reward(self.doc, item, self._records(item), stop, context, fallback)
        self._complete(item, reward)

    def _part_done(self, parent_id: str, revised: bool) -> None:
        """A step (or the outcome) of a trajectory finished, or got a new reward: the
        trajectory is composed (again) once none of its parts is open. Its open parts are
        counted once per pass (one query), then kept here: a part finishing reads nothing, so
        a long trajectory's work costs the same statements per item as a short one's."""
        if revised and self._held_parents is not None:
            self._held_parents.add(parent_id)
            return
        open_parts = self._open_parts.get(parent_id)
        if open_parts is None:
            self.session.flush()  # this pass's finished parts count as finished
            open_parts = repository.open_children(self.session, parent_id)
        elif not revised:
            open_parts -= 1
        self._open_parts[parent_id] = open_parts
        if open_parts > 0:
            return
        parent = self.session.get(Item, parent_id)
        assert parent is not None
        if revised or parent.state != ItemState.done:
            parts = repository.children(self.session, parent_id)
            self._complete(parent, trajectory_reward(self.doc, parts))

    def revise(self, item: Item, reward: Reward) -> None:
        """Give a finished item a new reward (e.g. people's answer after a deadline fallback):
        its revision goes up by one and the trainer is told (item.revised), if it changed."""
        if item.state != ItemState.done:
            raise ValueError(f"item {item.id} is not finished: it has no reward to revise")
        self._complete(item, reward)

    def _complete(self, item: Item, reward: Reward) -> None:
        revised = item.state == ItemState.done
        if revised:
            before = dict(item.reward or {})
            if Reward.model_validate(before).model_copy(update={"revision": None}) == reward:
                return  # the same reward again: not a change
            revision = int(before.get("revision") or 1) + 1
        else:
            # an item an operator retried kept its old reward until now: this is the next one
            revision = int((item.reward or {}).get("revision") or 0) + 1
            observe.reward(self.session, self.job.policy_name, str(reward.status))
            move(item, ItemState.done)
            item.finished_at = self.now
        stored = reward.model_dump(mode="json")
        stored["revision"] = revision  # (not a model copy per item: the dump is what is kept)
        item.reward = stored
        if item.parent_id is not None:
            self._part_done(item.parent_id, revised)
            return
        self.result.events.append(
            events.item_event(self.job.id, self.job.principal, item.index, revision, item.reward)
        )
        if revised:
            return
        self.job.n_done += 1
        if self.job.n_done >= self.job.n_items and self.job.status not in JOB_FINISHED:
            self.job.status = self.finishes_as
            self.job.finished_at = self.now
            self.result.finished_jobs.add(self.job.id)
            job = self.job
            finished = events.job_event(
                job.id, job.principal, job.n_items, job.n_done, status=self.finishes_as
            )
            self.result.events.append(finished)
