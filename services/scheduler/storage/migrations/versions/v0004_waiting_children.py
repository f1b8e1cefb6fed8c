"""A child trial waiting for its parent to save the state it copies survives a restart.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trials", sa.Column("waiting_on_trial_id", sa.Integer))


def downgrade() -> None:
    op.drop_column("trials", "waiting_on_trial_id")
