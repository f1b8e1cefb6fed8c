"""Disabled agents and slots (`det agent|slot disable`) survive a scheduler restart.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "disabled_slots",
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("slot_id", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "slot_id"),
    )


def downgrade() -> None:
    op.drop_table("disabled_slots")
