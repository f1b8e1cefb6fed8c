"""Checkpoint deletion as states the scheduler owns: when a checkpoint's state last changed, and an
index on state, so a restarted scheduler finds the DELETING ones (and the reconciler its rows).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("checkpoints", sa.Column("state_changed_at", sa.Text, nullable=False, server_default=""))
    op.create_index("checkpoints_state", "checkpoints", ["state"])


def downgrade() -> None:
    op.drop_index("checkpoints_state", table_name="checkpoints")
    op.drop_column("checkpoints", "state_changed_at")
