"""Every ORM model, imported so that Base.metadata knows all tables: what Alembic compares the
database with (env.py) and what the migration drift test checks. A new domain's models add
their import here."""

from verifier_service.auth.models import ApiKey, AuditEvent, Principal, User, WebSession
from verifier_service.console.overview.models import (
    HourCost,
    HourItems,
    HourRewards,
    HourVerdicts,
    MinuteCost,
    MinuteItems,
    MinuteRewards,
    MinuteVerdicts,
    RollupState,
    WallsUpTo,
)
from verifier_service.core.db import Base
from verifier_service.core.outbox import OutboxMessage
from verifier_service.events.models import JobCallback, JobEvent, WebhookAttempt, WebhookDelivery
from verifier_service.ladder.models import (
    CostLedgerEntry,
    Item,
    Job,
    VerdictCacheEntry,
    VerdictRecord,
)
from verifier_service.oracle.models import OracleAttempt, OracleBatch, OracleControl, OracleItem
from verifier_service.policies.models import PolicyRecord, PolicyVersionRecord
from verifier_service.review.models import (
    ReviewAdjudication,
    ReviewAnswer,
    ReviewerState,
    ReviewLease,
    ReviewQueue,
    ReviewTask,
)

target_metadata = Base.metadata

__all__ = [
    "ApiKey",
    "AuditEvent",
    "CostLedgerEntry",
    "HourCost",
    "HourItems",
    "HourRewards",
    "HourVerdicts",
    "Item",
    "Job",
    "JobCallback",
    "JobEvent",
    "MinuteCost",
    "MinuteItems",
    "MinuteRewards",
    "MinuteVerdicts",
    "OracleAttempt",
    "OracleBatch",
    "OracleControl",
    "OracleItem",
    "OutboxMessage",
    "PolicyRecord",
    "PolicyVersionRecord",
    "Principal",
    "ReviewAdjudication",
    "ReviewAnswer",
    "ReviewLease",
    "ReviewQueue",
    "ReviewTask",
    "ReviewerState",
    "RollupState",
    "User",
    "VerdictCacheEntry",
    "VerdictRecord",
    "WallsUpTo",
    "WebSession",
    "WebhookAttempt",
    "WebhookDelivery",
    "target_metadata",
]
