"""Oracles: items sent to outside systems (labs, markets), their batches and push attempts

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 03:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oracle_items",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("oracle", sa.String(64), nullable=False),
        sa.Column(
            "item_id", sa.String(32), sa.ForeignKey("items.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("reference", sa.JSON, nullable=True),
        sa.Column("value", sa.Float, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("batch_id", sa.String(32), nullable=True),
        sa.Column("tries", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("selected_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_oracle_items_queue", "oracle_items", ["oracle", "state", "created_at"])
    op.create_index("ix_oracle_items_item", "oracle_items", ["item_id"])
    op.create_index("ix_oracle_items_batch", "oracle_items", ["batch_id"])
    op.create_index("ix_oracle_items_selected", "oracle_items", ["oracle", "selected_at"])
    op.create_table(
        "oracle_batches",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("oracle", sa.String(64), nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("busy_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_id", sa.String(32), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(128), nullable=True),
        sa.Column("claims", sa.Integer, nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_oracle_batches_claim", "oracle_batches", ["oracle", "state", "created_at"])
    op.create_table(
        "oracle_attempts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "batch_id",
            sa.String(32),
            sa.ForeignKey("oracle_batches.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("duration_ms", sa.Float, nullable=False),
    )
    op.create_index("ix_oracle_attempts_batch", "oracle_attempts", ["batch_id", "number"])


def downgrade() -> None:
    op.drop_table("oracle_attempts")
    op.drop_table("oracle_batches")
    op.drop_table("oracle_items")
