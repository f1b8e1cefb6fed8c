"""A trial that continues another's checkpoint (PBT exploit, ASHA resume) remembers which.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trials", sa.Column("parent_trial_id", sa.Integer))


def downgrade() -> None:
    op.drop_column("trials", "parent_trial_id")
