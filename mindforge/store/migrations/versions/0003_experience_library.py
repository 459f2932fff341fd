"""Experience library: entries, snapshots and rejections per lineage; trials name the entries shown.

Why: a lineage's worked examples come from its own validated search-split experience.
``experience_entries`` holds validated entries (search-split tasks only, enforced by
``mindforge.store.experience``), ``experience_snapshots`` the published, content-addressed
snapshots, ``experience_rejections`` every rejected candidate with its reason, and
``trials.experience_entries`` the ids of the entries a trial was shown.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the three experience tables and add ``trials.experience_entries``."""
    op.create_table(
        "experience_entries",
        sa.Column("lineage_id", sa.String(), nullable=False),
        sa.Column("entry_id", sa.String(), nullable=False),
        sa.Column("task_id", sa.String(), nullable=False),
        sa.Column("task_hash", sa.String(), nullable=False),
        sa.Column("provenance", sa.String(length=32), nullable=False),
        sa.Column("trial_id", sa.String(), nullable=False),
        sa.Column("generation_index", sa.Integer(), nullable=False),
        sa.Column("entry", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["lineage_id"], ["lineages.id"], name=op.f("fk_experience_entries_lineage_id_lineages")
        ),
        sa.ForeignKeyConstraint(["task_hash"], ["tasks.id"], name=op.f("fk_experience_entries_task_hash_tasks")),
        sa.PrimaryKeyConstraint("lineage_id", "entry_id", name=op.f("pk_experience_entries")),
    )
    with op.batch_alter_table("experience_entries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_experience_entries_task_hash"), ["task_hash"], unique=False)
    op.create_table(
        "experience_snapshots",
        sa.Column("lineage_id", sa.String(), nullable=False),
        sa.Column("snapshot_id", sa.String(), nullable=False),
        sa.Column("generation_index", sa.Integer(), nullable=False),
        sa.Column("entry_ids", sa.JSON(), nullable=False),
        sa.Column("oracle_entries", sa.Integer(), nullable=False),
        sa.Column("model_entries", sa.Integer(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["lineage_id"], ["lineages.id"], name=op.f("fk_experience_snapshots_lineage_id_lineages")
        ),
        sa.PrimaryKeyConstraint("lineage_id", "snapshot_id", name=op.f("pk_experience_snapshots")),
    )
    op.create_table(
        "experience_rejections",
        sa.Column("lineage_id", sa.String(), nullable=False),
        sa.Column("generation_index", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.String(), nullable=False),
        sa.Column("task_id", sa.String(), nullable=False),
        sa.Column("task_hash", sa.String(), nullable=False),
        sa.Column("provenance", sa.String(length=32), nullable=False),
        sa.Column("trial_id", sa.String(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["lineage_id"], ["lineages.id"], name=op.f("fk_experience_rejections_lineage_id_lineages")
        ),
        sa.PrimaryKeyConstraint(
            "lineage_id", "generation_index", "entry_id", name=op.f("pk_experience_rejections")
        ),
    )
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.add_column(sa.Column("experience_entries", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    """Drop the experience tables and ``trials.experience_entries``."""
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.drop_column("experience_entries")
    op.drop_table("experience_rejections")
    op.drop_table("experience_snapshots")
    with op.batch_alter_table("experience_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experience_entries_task_hash"))
    op.drop_table("experience_entries")
