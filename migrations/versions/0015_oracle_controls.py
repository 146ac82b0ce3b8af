"""Oracle controls: an operator pauses an oracle, and resends a batch its partner lost

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 03:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oracle_controls",
        sa.Column("oracle", sa.String(64), primary_key=True),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("changed_by", sa.String(128), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("oracle_batches") as batch:
        batch.add_column(sa.Column("retry_from", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oracle_batches") as batch:
        batch.drop_column("retry_from")
    op.drop_table("oracle_controls")
