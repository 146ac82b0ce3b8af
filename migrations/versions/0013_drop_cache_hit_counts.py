"""Verdict-cache entries no longer count their hits

Every cache hit updated its entry's `hits` column (and on PostgreSQL locked the entries first,
in key order), yet nothing read it: cache hits are reported from the cost ledger and the
metrics. The write made every cached answer dirty the cache table and made trainers sending
the same molecules queue on those row locks.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 00:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("verdict_cache") as batch:
        batch.drop_column("hits")


def downgrade() -> None:
    with op.batch_alter_table("verdict_cache") as batch:
        batch.add_column(sa.Column("hits", sa.Integer(), nullable=False, server_default="0"))
