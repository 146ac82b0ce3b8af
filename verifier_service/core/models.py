"""Imports every ORM model so that Base.metadata knows all tables (Alembic, tests)."""

from verifier_service.core.db import Base
from verifier_service.core.outbox import OutboxMessage
from verifier_service.jobs.models import Item, Job
from verifier_service.ladder.models import CostLedgerEntry, VerdictCacheEntry, VerdictRecord
from verifier_service.policies.models import PolicyRecord, PolicyVersionRecord

__all__ = [
    "Base",
    "CostLedgerEntry",
    "Item",
    "Job",
    "OutboxMessage",
    "PolicyRecord",
    "PolicyVersionRecord",
    "VerdictCacheEntry",
    "VerdictRecord",
]
