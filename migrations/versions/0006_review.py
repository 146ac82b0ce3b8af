"""review queue: queues, tasks, leases, answers, adjudications, reviewers' state

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "review_queues",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("show_accuracy", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "reviewer_states",
        sa.Column("reviewer", sa.String(length=128), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("paused_reason", sa.String(length=256), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("reviewer"),
    )
    op.create_table(
        "review_tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("queue", sa.String(length=64), nullable=False),
        sa.Column("item_id", sa.String(length=32), nullable=True),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("reference", sa.JSON(), nullable=True),
        sa.Column("verdicts", sa.JSON(), nullable=False),
        sa.Column("guidelines", sa.Text(), nullable=False),
        sa.Column("rubric", sa.JSON(), nullable=False),
        sa.Column("overlap", sa.Integer(), nullable=False),
        sa.Column("min_agreement", sa.Float(), nullable=False),
        sa.Column("gold", sa.Boolean(), nullable=False),
        sa.Column("gold_answer", sa.JSON(), nullable=True),
        sa.Column("gold_tolerance", sa.Float(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("taken", sa.Integer(), nullable=False),
        sa.Column("answered", sa.Integer(), nullable=False),
        sa.Column("agreement", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("review_tasks", schema=None) as batch_op:
        batch_op.create_index(
            "ix_review_tasks_claim", ["queue", "gold", "state", "created_at", "id"], unique=False
        )
        batch_op.create_index("ix_review_tasks_item", ["item_id"], unique=False)

    op.create_table(
        "review_adjudications",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("operator", sa.String(length=128), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["review_tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", name="uq_review_adjudications_task"),
    )
    op.create_table(
        "review_answers",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("lease_id", sa.String(length=32), nullable=False),
        sa.Column("reviewer", sa.String(length=128), nullable=False),
        sa.Column("submit_key", sa.String(length=200), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("steps", sa.JSON(), nullable=True),
        sa.Column("gold", sa.Boolean(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["review_tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("submit_key", name="uq_review_answers_submit_key"),
        sa.UniqueConstraint("task_id", "reviewer", name="uq_review_answers_task_reviewer"),
    )
    with op.batch_alter_table("review_answers", schema=None) as batch_op:
        batch_op.create_index(
            "ix_review_answers_reviewer_created", ["reviewer", "created_at"], unique=False
        )

    op.create_table(
        "review_leases",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("reviewer", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("draft", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["task_id"], ["review_tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("review_leases", schema=None) as batch_op:
        batch_op.create_index(
            "ix_review_leases_reviewer_state", ["reviewer", "state"], unique=False
        )
        batch_op.create_index(
            "ix_review_leases_state_expires", ["state", "expires_at"], unique=False
        )
        batch_op.create_index(
            "ix_review_leases_task_reviewer", ["task_id", "reviewer"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("review_leases", schema=None) as batch_op:
        batch_op.drop_index("ix_review_leases_task_reviewer")
        batch_op.drop_index("ix_review_leases_state_expires")
        batch_op.drop_index("ix_review_leases_reviewer_state")

    op.drop_table("review_leases")
    with op.batch_alter_table("review_answers", schema=None) as batch_op:
        batch_op.drop_index("ix_review_answers_reviewer_created")

    op.drop_table("review_answers")
    op.drop_table("review_adjudications")
    with op.batch_alter_table("review_tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_review_tasks_item")
        batch_op.drop_index("ix_review_tasks_claim")

    op.drop_table("review_tasks")
    op.drop_table("reviewer_states")
    op.drop_table("review_queues")
