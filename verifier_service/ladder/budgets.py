"""Cost budgets of a policy: what a job and a principal (per hour) may spend on each tier."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from verifier_service.ladder import repository
from verifier_service.ladder.models import CostLedgerEntry, Job
from verifier_service.ladder.states import Stop, StopKind
from verifier_service.policies.schemas import BudgetSpec


class BudgetBook:
    """Spending of one job and its principal, read once per tier and kept up to date in a pass."""

    def __init__(
        self,
        session: Session,
        job: Job,
        budgets: BudgetSpec,
        now: datetime,
        unwritten: Sequence[CostLedgerEntry] = (),
    ) -> None:
        self.session = session
        self.job = job
        self.budgets = budgets
        self.now = now
        # This pass's ledger rows not yet written (all of this job and principal): they count.
        self.unwritten = unwritten
        self._spent: dict[tuple[str, str], float] = {}

    def charged(self, tier: str, units: float) -> None:
        """`units` more were charged to `tier` in this pass."""
        for scope in ("job", "principal"):
            if (scope, tier) in self._spent:
                self._spent[(scope, tier)] += units

    def over(self, tier: str, units: float) -> Stop | None:
        """Why charging `units` more to `tier` would break a budget, or None if it would not."""
        limits = (
            ("job", self.budgets.per_job.get(tier)),
            ("principal", self.budgets.per_principal_hour.get(tier)),
        )
        for scope, limit in limits:
            if limit is None:
                continue
            if (scope, tier) not in self._spent:
                self._spent[(scope, tier)] = self._read(scope, tier)
            if self._spent[(scope, tier)] + units > limit + 1e-12:
                what = (
                    "this job" if scope == "job" else f"principal {self.job.principal!r} per hour"
                )
                return Stop(
                    StopKind.budget_exhausted,
                    f"{tier} budget of {limit:g} units for {what} is spent",
                )
        return None

    def _read(self, scope: str, tier: str) -> float:
        self.session.flush()  # rows changed in the session count as they are now
        pending = sum(e.cost_units for e in self.unwritten if e.tier == tier)
        if scope == "job":
            return pending + repository.spent_by_job(self.session, self.job.id, tier)
        since = self.now - timedelta(hours=1)
        spent = repository.spent_by_principal_since(self.session, self.job.principal, tier, since)
        return pending + spent
