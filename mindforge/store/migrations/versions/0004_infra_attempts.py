"""Infrastructure attempts: trial runs that a fault ended, kept apart from the trials.

Why: a trial whose sandbox engine, policy endpoint or Ray worker failed has no reward; it
is run again (Temporal retries the ``run_trials`` activity) and its row in ``trials``
comes from the clean run. ``infra_attempts`` keeps each fault-ended run, so a report can
say how many faults a stage met without any of them counting as a score.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``infra_attempts``."""
    op.create_table(
        "infra_attempts",
        sa.Column("trial_id", sa.String(), nullable=False),
        sa.Column("activity_attempt", sa.Integer(), nullable=False),
        sa.Column("lineage_id", sa.String(), nullable=False),
        sa.Column("generation_index", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("task_id", sa.String(), nullable=False),
        sa.Column("failure_class", sa.String(length=32), nullable=False),
        sa.Column("failure_detail", sa.Text(), nullable=False),
        sa.Column("worker", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["lineage_id", "generation_index"],
            ["generations.lineage_id", "generations.index"],
            name=op.f("fk_infra_attempts_lineage_id_generations"),
        ),
        sa.ForeignKeyConstraint(["lineage_id"], ["lineages.id"], name=op.f("fk_infra_attempts_lineage_id_lineages")),
        sa.PrimaryKeyConstraint("trial_id", "activity_attempt", name=op.f("pk_infra_attempts")),
    )
    with op.batch_alter_table("infra_attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_infra_attempts_lineage_id"), ["lineage_id"], unique=False)


def downgrade() -> None:
    """Drop ``infra_attempts``."""
    with op.batch_alter_table("infra_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_infra_attempts_lineage_id"))
    op.drop_table("infra_attempts")
