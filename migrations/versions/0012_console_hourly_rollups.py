"""The console's hourly rollups: settled hours of the per-minute counts and costs; wall-time
histograms as running totals per hour

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 18:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _hour() -> sa.Column[object]:
    return sa.Column("hour", sa.DateTime(timezone=True), primary_key=True)


def upgrade() -> None:
    op.create_table(
        "console_hour_items",
        _hour(),
        sa.Column("policy_name", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("items", sa.Integer(), nullable=False),
    )
    op.create_table(
        "console_hour_rewards",
        _hour(),
        sa.Column("status", sa.String(32), primary_key=True),
        sa.Column("items", sa.Integer(), nullable=False),
    )
    op.create_table(
        "console_hour_verdicts",
        _hour(),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("verdicts", sa.Integer(), nullable=False),
        sa.Column("cached", sa.Integer(), nullable=False),
    )
    op.create_table(
        "console_hour_cost",
        _hour(),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(128), primary_key=True),
        sa.Column("policy_name", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("cost_units", sa.Float(), nullable=False),
    )
    op.drop_table("console_hour_walls")
    op.create_table(
        "console_walls_upto",
        _hour(),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("bucket", sa.Integer(), primary_key=True),
        sa.Column("n", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    )
    # Minutes rolled before this settled on the old rule (a minute after their end, never
    # rolled again): the next refresh rolls everything up again from the ladder's tables.
    for table in (
        "console_minute_cost",
        "console_minute_verdicts",
        "console_minute_rewards",
        "console_minute_items",
        "console_rollup_state",
    ):
        op.execute(f"DELETE FROM {table}")


def downgrade() -> None:
    op.create_table(
        "console_hour_walls",
        _hour(),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("bucket", sa.Integer(), primary_key=True),
        sa.Column("n", sa.Integer(), nullable=False),
    )
    for table in (  # the old rollups start over
        "console_minute_cost",
        "console_minute_verdicts",
        "console_minute_rewards",
        "console_minute_items",
        "console_rollup_state",
    ):
        op.execute(f"DELETE FROM {table}")
    for table in (
        "console_walls_upto",
        "console_hour_cost",
        "console_hour_verdicts",
        "console_hour_rewards",
        "console_hour_items",
    ):
        op.drop_table(table)
