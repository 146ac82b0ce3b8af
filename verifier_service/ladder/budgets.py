"""Cost budgets of a policy: what a job and a principal (per hour) may spend on each tier."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from verifier_service.ladder import repository
from verifier_service.ladder.models import Job
from verifier_service.ladder.states import Stop, StopKind
from verifier_service.policies.schemas import BudgetSpec


class BudgetBook:
    """Spending of one job and its principal, read once per tier and kept up to date in a pass."""

    def __init__(self, session: Session, job: Job, budgets: BudgetSpec, now: datetime) -> None:
        self.session = session
        self.job = job
        self.budgets = budgets
        self.now = now
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
        # What is stored, with the session's changes to stored ledger rows (a duplicate's
        # entry set to cost nothing). The pass's new ledger rows are written at its end, but
        # none is for `tier` yet: every tier call's charge is checked here first, and from the
        # first read on `charged` adds them.
        self.session.flush()
        if scope == "job":
            return repository.spent_by_job(self.session, self.job.id, tier)
        since = self.now - timedelta(hours=1)
        return repository.spent_by_principal_since(self.session, self.job.principal, tier, since)
