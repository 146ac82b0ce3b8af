"""The ladder state machine: moves items up their policy's tiers and makes their rewards.

An item's ladder state lives in its row: `step` (the next ladder step to consider) and `state`:
`climbing` (being decided), `waiting` (at a group step until its group has caught up),
`running` (a tier task has it), `done` (it has its reward). A pass over some items of one job
runs inside the caller's transaction and returns the tier work to enqueue after commit.
"""

from __future__ import annotations

import hashlib
import traceback
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.orm import Session

from tiers.base import Candidate, Verdict, VerdictStatus, config_hash
from tiers.registry import get_tier
from verifier_service.core.db import utcnow
from verifier_service.jobs.models import Item, Job
from verifier_service.jobs.schemas import Reward, RewardCost, RewardStatus
from verifier_service.ladder import repository
from verifier_service.ladder.models import CostLedgerEntry, VerdictRecord
from verifier_service.policies.gates import (
    GateContext,
    GateEvaluationError,
    StepDecision,
    audit_draw,
    decide_step,
)
from verifier_service.policies.schemas import LadderStep, PolicyDocument, RewardSpec
from verifier_service.policies.service import ResolvedPolicy, resolve
from verifier_service.scoring.compose import combine_trajectory, compose_reward


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

    def merge(self, other: LadderResult) -> None:
        self.dispatches.extend(other.dispatches)
        self.finished_jobs |= other.finished_jobs


def cache_key(tier_name: str, tier_version: str, config: dict[str, object], canonical: str) -> str:
    """Content address of a verdict: tier, its version, its config and the canonical payload."""
    text = "\x1f".join([tier_name, tier_version, config_hash(config), canonical])
    return hashlib.sha256(text.encode()).hexdigest()


def candidate_of(item: Item) -> Candidate:
    return Candidate.model_validate(item.candidate)


class LadderPass:
    """One pass of the state machine over items of one job, in the caller's transaction."""

    def __init__(self, session: Session, job: Job, policy: ResolvedPolicy) -> None:
        self.session = session
        self.job = job
        self.policy = policy
        self.doc: PolicyDocument = policy.document
        self.now = utcnow()
        self.result = LadderResult()
        self._verdicts: dict[str, list[VerdictRecord]] = {}
        self._dispatch: dict[tuple[str, str, int], list[str]] = defaultdict(list)
        self._spent: dict[tuple[str, str], float] = {}
        self._groups: dict[tuple[str, int], StepDecision | GateEvaluationError] = {}
        self._queue: deque[Item] = deque()
        self._queued: set[str] = set()
        self._items: dict[str, Item] = {}
        # Cache key and candidate of each item this pass sent to a tier (for run_here).
        self._sent: dict[str, tuple[str, Candidate]] = {}
        self._ledger: dict[tuple[str, int], CostLedgerEntry] = {}

    # ------------------------------------------------------------------ entry points

    def advance(self, items: Iterable[Item]) -> LadderResult:
        """Move each item as far up its ladder as it can go without waiting on a tier."""
        for item in items:
            self._enqueue(item)
        while self._queue:
            item = self._queue.popleft()
            self._queued.discard(item.id)
            if item.state in ("climbing", "waiting"):
                self._climb(item)
        for (tier, kind, step), ids in self._dispatch.items():
            self.result.dispatches.append(Dispatch(tier, kind, step, tuple(ids)))
        self._dispatch.clear()
        return self.result

    def new_items(self, items: Iterable[Item]) -> None:
        """Items this transaction just created: known to have no verdicts, nothing to query."""
        for item in items:
            self._verdicts.setdefault(item.id, [])

    def run_here(self, runs_here: Callable[[str], bool]) -> LadderResult:
        """Run the pending work of tiers that `runs_here` accepts now, in this transaction.

        The inline lane of small waiting requests: their fast-tier work (milliseconds) runs in
        the caller's process and transaction instead of a round trip through the broker, with
        the same verdicts, cache and ledger as a tier task. Work of other tiers stays in the
        result, for the caller to enqueue after commit.
        """
        while here := [d for d in self.result.dispatches if runs_here(d.tier)]:
            self.result.dispatches = [d for d in self.result.dispatches if d not in here]
            for work in here:
                items = [self._items[i] for i in work.item_ids]
                config = dict(self.doc.ladder_for(work.kind)[work.step].config)
                run = TierRun(self.job.id, work.tier, work.kind, work.step, config)
                for item in items:  # keyed when _climb looked the cache up: no second parse
                    key, candidate = self._sent[item.id]
                    run.keys[item.id] = key
                    run.candidates.setdefault(key, candidate)
                keys = list(run.candidates)
                verdicts = run_tier(work.tier, [run.candidates[k] for k in keys], run.config)
                ledger = {
                    i.id: entry
                    for i in items
                    if (entry := self._ledger.get((i.id, work.step))) is not None
                }
                self.store(run, dict(zip(keys, verdicts, strict=True)), items, set(), ledger)
            self.advance(i for i in self._items.values() if i.state == "climbing")
        return self.result

    def store(
        self,
        run: TierRun,
        verdicts: dict[str, Verdict],
        items: Sequence[Item],
        already: set[str],
        ledger: dict[str, CostLedgerEntry],
    ) -> None:
        """Store a tier run's verdicts (one per cache key) on its items and fill the cache."""
        first_for_key: set[str] = set()
        for key, verdict in verdicts.items():
            if verdict.status in (VerdictStatus.passed, VerdictStatus.failed):
                repository.put_cache(self.session, key, verdict)
        for item in items:
            if item.id in already:  # a redelivered task: the verdict is stored, just move on
                item.state, item.step = "climbing", run.step + 1
                continue
            item_key = run.keys.get(item.id)
            if item_key is None or item_key not in verdicts:
                continue
            verdict = verdicts[item_key]
            entry = ledger.get(item.id)
            if item_key in first_for_key:  # a duplicate in this batch rides on the first's work
                verdict = verdict.model_copy(update={"cached": True})
                if entry is not None:
                    entry.cached, entry.cost_units = True, 0.0
            else:
                first_for_key.add(item_key)
                if entry is not None:
                    entry.cpu_s, entry.wall_s = verdict.cost.cpu_s, verdict.cost.wall_s
            self.record(item, run.step, verdict, item_key)

    def verdicts_of(self, item_id: str) -> list[VerdictRecord]:
        """The verdicts this pass knows of an item (all of them, for items it created)."""
        return self._verdicts.get(item_id, [])

    def expire(self, items: Iterable[Item]) -> LadderResult:
        """At the job's deadline: finish every open item with what it has."""
        for item in items:
            if item.state != "done":
                self._finish(item, stop="deadline")
        return self.result

    def record(self, item: Item, step: int, verdict: Verdict, key: str | None) -> None:
        """Store a tier's verdict for an item that was running at `step`."""
        records = self._verdicts_of(item)
        records.append(repository.add_verdict(self.session, item.id, step, verdict, key))
        item.step = step + 1
        item.state = "climbing"

    # ------------------------------------------------------------------ climbing

    def _enqueue(self, item: Item) -> None:
        self._items[item.id] = item
        if item.id not in self._queued:
            self._queued.add(item.id)
            self._queue.append(item)

    def _verdicts_of(self, item: Item) -> list[VerdictRecord]:
        if item.id not in self._verdicts:
            self._verdicts.update(repository.verdicts_for(self.session, [item.id]))
            self._verdicts.setdefault(item.id, [])
        return self._verdicts[item.id]

    def _prefetch_verdicts(self, items: Sequence[Item]) -> None:
        missing = [i.id for i in items if i.id not in self._verdicts]
        if missing:
            found = repository.verdicts_for(self.session, missing)
            for item_id in missing:
                self._verdicts[item_id] = found.get(item_id, [])

    def _context(self, item: Item, step_index: int) -> GateContext:
        verdicts = {r.tier: repository.to_verdict(r) for r in self._verdicts_of(item)}
        candidate = item.candidate
        return GateContext.build(
            kind=item.kind,
            verdicts=verdicts,
            metadata=candidate.get("metadata") or {},
            audit=audit_draw(item.content_hash, step_index),
        )

    def _deadline_passed(self) -> bool:
        deadline = self.job.deadline_at
        return deadline is not None and self.now >= deadline

    def _climb(self, item: Item) -> None:
        ladder = self.doc.ladder_for(item.kind)
        while True:
            records = self._verdicts_of(item)
            last = records[-1] if records else None
            if last is not None and last.status in ("error", "pending"):
                return self._finish(item)
            if item.step >= len(ladder):
                return self._finish(item)
            if self._deadline_passed():
                return self._finish(item, stop="deadline")
            step = ladder[item.step]
            try:
                decision = self._decide(item, item.step, step)
            except GateEvaluationError as exc:
                return self._finish(item, stop=f"gate_error: ladder step {item.step}: {exc}")
            if decision == "wait":
                item.state = "waiting"
                return None
            if decision == "stop":
                return self._finish(item)
            tier = get_tier(step.tier)
            candidate = candidate_of(item)
            key = cache_key(tier.name, tier.version, step.config, tier.canonical_payload(candidate))
            hit = repository.cached_verdicts(self.session, [key]).get(key)
            if hit is not None:
                repository.count_cache_hits(self.session, {key: 1})
                self._charge(item, step.tier, 0.0, cached=True, audit=decision == "audit")
                self.record(item, item.step, hit.model_copy(update={"cached": True}), key)
                continue
            over = self._over_budget(step.tier, tier.cost_class)
            if over is not None:
                return self._finish(item, stop=over)
            self._charge(item, step.tier, tier.cost_class, cached=False, audit=decision == "audit")
            self._sent[item.id] = (key, candidate)
            item.state = "running"
            self._dispatch[(step.tier, item.kind, item.step)].append(item.id)
            return None

    def _decide(self, item: Item, index: int, step: LadderStep) -> str:
        """'climb', 'audit' (climbs only because of audit sampling), 'stop' or 'wait'."""
        if step.group is not None and item.group_key is not None:
            decision = self._group_decision(item, index, step)
            if decision is None:
                return "wait"
        else:
            group = step.group
            (decision,) = decide_step(
                [self._context(item, index)],
                gate=step.gate,
                audit_fraction=step.audit_fraction,
                group_by=group.by if group else None,
                top_k=group.top_k if group else None,
                top_fraction=group.top_fraction if group else None,
            )
        if isinstance(decision, GateEvaluationError):
            raise decision
        if not decision.climb:
            return "stop"
        return "audit" if decision.reason == "audit" else "climb"

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
            behind = peer.state != "done" and (
                peer.step < index or (peer.step == index and peer.state == "running")
            )
            if behind:
                return None
        eligible = [p for p in peers if p.state != "done" and p.step == index]
        self._prefetch_verdicts(eligible)
        decisions: Sequence[StepDecision | GateEvaluationError]
        try:
            decisions = decide_step(
                [self._context(p, index) for p in eligible],
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
            if peer.id != item.id and peer.state == "waiting":
                self._enqueue(peer)
        return self._groups[(item.id, index)]

    # ------------------------------------------------------------------ budgets and cost

    def _charge(self, item: Item, tier: str, units: float, *, cached: bool, audit: bool) -> None:
        self._ledger[(item.id, item.step)] = repository.charge(
            self.session,
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
        )
        for scope in ("job", "principal"):
            if (scope, tier) in self._spent:
                self._spent[(scope, tier)] += units

    def _over_budget(self, tier: str, units: float) -> str | None:
        """A reason if charging `units` more to `tier` would break a budget, else None."""
        budgets = self.doc.budgets
        limits = (
            ("job", budgets.per_job.get(tier)),
            ("principal", budgets.per_principal_hour.get(tier)),
        )
        for scope, limit in limits:
            if limit is None:
                continue
            if (scope, tier) not in self._spent:
                self.session.flush()
                if scope == "job":
                    spent = repository.spent_by_job(self.session, self.job.id, tier)
                else:
                    since = self.now - timedelta(hours=1)
                    spent = repository.spent_by_principal_since(
                        self.session, self.job.principal, tier, since
                    )
                self._spent[(scope, tier)] = spent
            if self._spent[(scope, tier)] + units > limit + 1e-12:
                what = (
                    "this job" if scope == "job" else f"principal {self.job.principal!r} per hour"
                )
                return f"budget_exhausted: {tier} budget of {limit:g} units for {what} is spent"
        return None

    # ------------------------------------------------------------------ rewards

    def _finish(self, item: Item, stop: str | None = None) -> None:
        records = self._verdicts_of(item)
        reward = self._leaf_reward(item, records, stop)
        self._complete(item, reward)

    def _leaf_reward(self, item: Item, records: list[VerdictRecord], stop: str | None) -> Reward:
        cost = RewardCost(
            cpu_s=sum(r.cpu_s for r in records if not r.cached),
            wall_s=sum(r.wall_s for r in records if not r.cached),
            cost_units=sum(get_tier(r.tier).cost_class for r in records if not r.cached),
        )
        provenance = [r.id for r in records]
        last = records[-1] if records else None
        if last is not None and last.status == VerdictStatus.error:
            return Reward(
                value=None,
                status=RewardStatus.infra_error,
                reason=f"{last.tier} could not judge the item: {last.reason or 'error'}"
                + (f" ({last.feedback[:300]})" if last.feedback else ""),
                fidelity=last.tier,
                provenance=provenance,
                cost=cost,
            )
        if last is not None and last.status == VerdictStatus.pending:
            return Reward(
                value=None,
                status=RewardStatus.pending,
                reason=f"waiting for {last.tier}",
                fidelity=last.tier,
                provenance=provenance,
                cost=cost,
            )
        if stop is not None and stop.startswith("gate_error"):
            return Reward(
                value=None,
                status=RewardStatus.infra_error,
                reason=stop,
                provenance=provenance,
                cost=cost,
            )
        if stop == "deadline" and self.doc.deadline_fallback == "infra_error":
            return Reward(
                value=None,
                status=RewardStatus.infra_error,
                reason="deadline: the job's deadline passed before the ladder finished",
                provenance=provenance,
                cost=cost,
            )
        ladder = [s.tier for s in self.doc.ladder_for(item.kind)]
        verdicts = {r.tier: repository.to_verdict(r) for r in records}
        spec: RewardSpec = self.doc.reward_for(item.kind)
        ctx = self._context(item, item.step)
        try:
            composed = compose_reward(spec, verdicts, ctx, order=ladder)
        except GateEvaluationError as exc:
            return Reward(
                value=None,
                status=RewardStatus.infra_error,
                reason=f"reward expression failed: {exc}",
                provenance=provenance,
                cost=cost,
            )
        if composed.value is None:
            return Reward(
                value=None,
                status=RewardStatus.infra_error,
                reason="no reward component could be computed from the verdicts "
                f"(missing: {', '.join(composed.missing) or 'all'})",
                provenance=provenance,
                cost=cost,
            )
        reasons = []
        if composed.gated_by:
            reasons.append(f"hard gate: {composed.gated_by}")
        reasons.extend(f"penalty: {p}" for p in composed.penalties)
        if stop == "deadline":
            reasons.append(f"deadline: best available reward (fidelity {composed.fidelity})")
        elif stop is not None:
            reasons.append(stop)
        if composed.missing and not composed.gated_by:
            reasons.append(f"components not reached: {', '.join(composed.missing)}")
        return Reward(
            value=composed.value,
            status=RewardStatus.scored,
            reason="; ".join(reasons) or None,
            components=composed.components,
            fidelity=composed.fidelity,
            provenance=provenance,
            cost=cost,
        )

    def _complete(self, item: Item, reward: Reward) -> None:
        item.reward = reward.model_dump(mode="json")
        item.state = "done"
        item.finished_at = self.now
        if item.parent_id is not None:
            self.session.flush()
            parent = self.session.get(Item, item.parent_id)
            assert parent is not None
            siblings = repository.children(self.session, parent.id)
            if all(s.state == "done" for s in siblings) and parent.state != "done":
                self._complete(parent, self._trajectory_reward(siblings))
            return
        self.job.n_done += 1
        if self.job.n_done >= self.job.n_items and self.job.status != "completed":
            self.job.status = "completed"
            self.job.finished_at = self.now
            self.result.finished_jobs.add(self.job.id)

    def _trajectory_reward(self, children: Sequence[Item]) -> Reward:
        rewards = [Reward.model_validate(c.reward) for c in children]
        steps = [r for c, r in zip(children, rewards, strict=True) if c.role == "step"]
        outcome = next(
            (r for c, r in zip(children, rewards, strict=True) if c.role == "outcome"), None
        )
        cost = RewardCost(
            cpu_s=sum(r.cost.cpu_s for r in rewards),
            wall_s=sum(r.cost.wall_s for r in rewards),
            cost_units=sum(r.cost.cost_units for r in rewards),
        )
        provenance = [v for r in rewards for v in r.provenance]
        step_values = [r.value for r in steps]
        outcome_value = outcome.value if outcome is not None else None
        common = {
            "step_rewards": step_values,
            "outcome_reward": outcome_value,
            "provenance": provenance,
            "cost": cost,
        }
        troubled = [(i, r) for i, r in enumerate(rewards) if r.status != RewardStatus.scored]
        if troubled:
            worst = (
                RewardStatus.infra_error
                if any(r.status == RewardStatus.infra_error for _, r in troubled)
                else RewardStatus.pending
            )
            reason = "; ".join(
                f"{children[i].role} {children[i].index}: {r.reason}" for i, r in troubled
            )
            return Reward(value=None, status=worst, reason=reason, **common)
        value = combine_trajectory(self.doc.trajectory, step_values, outcome_value)
        fidelities = [r.fidelity for r in rewards if r.fidelity]
        return Reward(
            value=value,
            status=RewardStatus.scored,
            fidelity=fidelities[-1] if fidelities else None,
            **common,
        )


# ---------------------------------------------------------------------- tier runs


@dataclass
class TierRun:
    """What a tier task must compute: unique candidates by cache key, and who gets what."""

    job_id: str
    tier: str
    kind: str
    step: int
    config: dict[str, object]
    keys: dict[str, str] = field(default_factory=dict)  # item id -> cache key
    candidates: dict[str, Candidate] = field(default_factory=dict)  # cache key -> candidate


def tier_run(
    job_id: str,
    tier_name: str,
    kind: str,
    step: int,
    config: dict[str, object],
    items: Sequence[Item],
) -> TierRun:
    """The unique candidates of some items by cache key, and which item gets which verdict."""
    tier = get_tier(tier_name)
    run = TierRun(job_id, tier_name, kind, step, config)
    for item in items:
        candidate = candidate_of(item)
        key = cache_key(tier.name, tier.version, config, tier.canonical_payload(candidate))
        run.keys[item.id] = key
        run.candidates.setdefault(key, candidate)
    return run


def run_tier(
    tier_name: str, candidates: Sequence[Candidate], config: dict[str, object]
) -> list[Verdict]:
    """A tier's verdicts on candidates. A crash in the tier becomes error verdicts with its
    traceback (recorded, never swallowed), so the items finish as infra_error, not lost."""
    tier = get_tier(tier_name)
    try:
        verdicts = tier.verify_batch(list(candidates), config)
        if len(verdicts) != len(candidates):
            raise RuntimeError(
                f"tier returned {len(verdicts)} verdicts for {len(candidates)} items"
            )
        return verdicts
    except Exception as exc:
        text = "".join(traceback.format_exception(exc))[-2000:]
        return [
            Verdict(
                status=VerdictStatus.error,
                reason=f"tier_crashed: {type(exc).__name__}: {exc}"[:250],
                feedback=text,
                tier=tier.name,
                tier_version=tier.version,
            )
            for _ in candidates
        ]


def prepare_tier_run(
    session: Session, tier_name: str, kind: str, step: int, item_ids: Sequence[str]
) -> TierRun | None:
    """Read what a tier task has to verify; None when nothing is left to do."""
    items = [
        i
        for i in repository.items_by_id(session, item_ids)
        if i.state == "running" and i.step == step
    ]
    if not items:
        return None
    job = session.get(Job, items[0].job_id)
    assert job is not None
    policy = resolve(session, job.policy_name, job.policy_version)
    config = dict(policy.document.ladder_for(kind)[step].config)
    done = repository.existing_verdict_steps(session, [i.id for i in items], step)
    return tier_run(job.id, tier_name, kind, step, config, [i for i in items if i.id not in done])


def record_tier_run(
    session: Session, run: TierRun, verdicts: dict[str, Verdict], item_ids: Sequence[str]
) -> LadderResult:
    """Store a tier's verdicts (one per cache key), fill the cache, and advance the items."""
    job = repository.lock_job(session, run.job_id)
    assert job is not None
    policy = resolve(session, job.policy_name, job.policy_version)
    ladder = LadderPass(session, job, policy)
    items = [
        i
        for i in repository.items_by_id(session, item_ids)
        if i.state == "running" and i.step == run.step
    ]
    already = repository.existing_verdict_steps(session, [i.id for i in items], run.step)
    ledger = {
        e.item_id: e for e in repository.ledger_entries(session, [i.id for i in items], run.step)
    }
    ladder.store(run, verdicts, items, already, ledger)
    return ladder.advance(i for i in items if i.state == "climbing")


def advance_job(session: Session, job_id: str) -> LadderResult:
    """Advance every open item of a job (recovery, and a job's first pass)."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status == "completed":
        return LadderResult()
    policy = resolve(session, job.policy_name, job.policy_version)
    items = [i for i in repository.open_leaf_items(session, job_id) if i.state != "running"]
    return LadderPass(session, job, policy).advance(items)


def expire_job(session: Session, job_id: str) -> LadderResult:
    """The job's deadline: unfinished items get the best reward available now."""
    job = repository.lock_job(session, job_id)
    if job is None or job.status == "completed":
        return LadderResult()
    policy = resolve(session, job.policy_name, job.policy_version)
    items = repository.open_leaf_items(session, job_id)
    return LadderPass(session, job, policy).expire(items)
