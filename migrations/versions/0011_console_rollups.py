"""The console's rollups: per-minute counts and costs, per-hour wall-time histograms

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-23 14:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVENT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _time(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "console_rollup_state",
        sa.Column("name", sa.String(32), primary_key=True),
        _time("start"),
        _time("closed_until"),
        _time("walls_until"),
        sa.Column("event_id", EVENT_ID, nullable=False),
        _time("refreshed_at"),
    )
    op.create_table(
        "console_minute_items",
        sa.Column("minute", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("policy_name", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("items", sa.Integer(), nullable=False),
    )
    op.create_table(
        "console_minute_rewards",
        sa.Column("minute", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("status", sa.String(32), primary_key=True),
        sa.Column("items", sa.Integer(), nullable=False),
    )
    op.create_table(
        "console_minute_verdicts",
        sa.Column("minute", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("verdicts", sa.Integer(), nullable=False),
        sa.Column("cached", sa.Integer(), nullable=False),
    )
    op.create_table(
        "console_minute_cost",
        sa.Column("minute", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(128), primary_key=True),
        sa.Column("policy_name", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("cost_units", sa.Float(), nullable=False),
    )
    op.create_table(
        "console_hour_walls",
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tier", sa.String(64), primary_key=True),
        sa.Column("bucket", sa.Integer(), primary_key=True),
        sa.Column("n", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    for table in (
        "console_hour_walls",
        "console_minute_cost",
        "console_minute_verdicts",
        "console_minute_rewards",
        "console_minute_items",
        "console_rollup_state",
    ):
        op.drop_table(table)
