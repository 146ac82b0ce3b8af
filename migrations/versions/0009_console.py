"""Indexes for the operators' console: jobs, verdicts and the cost ledger by creation time

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 12:55:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_jobs_created", "jobs", ["created_at"])
    op.create_index(
        "ix_verdicts_created_tier", "verdicts", ["created_at", "tier", "cached", "wall_s"]
    )
    op.create_index("ix_cost_created", "cost_ledger", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_cost_created", table_name="cost_ledger")
    op.drop_index("ix_verdicts_created_tier", table_name="verdicts")
    op.drop_index("ix_jobs_created", table_name="jobs")
