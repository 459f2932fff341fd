"""Three splits: the pool's ``held_out`` split becomes ``sealed``.

Pools used to have two splits, ``search`` and ``held_out``; the held-out split both chose
the successor contract and measured the lift. Pools now have ``search``, ``selection``
(decisions) and ``sealed`` (measurement only). A stored ``held_out`` task becomes
``sealed``: its old trials fed decisions, so an older lineage's report says so where it
shows them, but from now on no decision reads it. No column changes (splits are
``VARCHAR(32)``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Rename the split value ``held_out`` to ``sealed``."""
    op.execute("UPDATE pool_memberships SET split = 'sealed' WHERE split = 'held_out'")


def downgrade() -> None:
    """Fold ``selection`` and ``sealed`` back into ``held_out``."""
    op.execute("UPDATE pool_memberships SET split = 'held_out' WHERE split IN ('sealed', 'selection')")
